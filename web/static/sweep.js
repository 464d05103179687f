/* One sweep that learns (GET /api/v1/sweeps/<id>): its settings, its trials (params, state,
 * objective, job, run, note) and four charts: the objective by trial with the best so far,
 * each param's importance, parallel coordinates of the complete trials' params coloured by
 * the objective (parcoords.js: SVG, no WebGL), and every trial's learning curve of the
 * sweep's metric (pruned trials dashed and grey, a cross where the pruner stopped them).
 * Stop / Stop & kill / Resume post to /api/v1/sweeps/<id>/{stop,resume} (admin; a log
 * token's 403 shows as a toast). Refreshes every 3 s while the sweep or a trial runs; each
 * handled answer is counted on <body data-sweep-answered> (and the sweep's status put on
 * <body data-sweep-status>) so tests can wait for it. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const sweepId = Number(document.getElementById("main").dataset.sweepId);
  const REFRESH_MS = 3000;
  const PRUNED_COLOR = "#94a3b8";
  const STATE_CLASS = { complete: "status-finished", pruned: "status-pruned", failed: "status-failed", running: "status-running" };
  const SWEEP_CLASS = { running: "status-running", stopped: "status-killed", finished: "status-finished" };
  let poller = null;

  const isNum = (v) => typeof v === "number" && Number.isFinite(v);
  const badge = (text, cls) => h("span", { class: `badge ${cls || ""}`, dataset: { status: text } }, text);

  function live(doc) {
    return doc.sweep.status === "running" || (doc.sweep.counts.running || 0) > 0;
  }

  // ------------------------------------------------------------------ head, facts

  function renderHead(s) {
    document.title = `${s.name} · sweep · tracker`;
    el("sweep-name").textContent = s.name;
    clear(el("sweep-status")).append(badge(s.status, SWEEP_CLASS[s.status]));
    const running = (s.counts.running || 0) > 0;
    el("sweep-stop").hidden = s.status !== "running";
    el("sweep-kill").hidden = !(s.status === "running" || (s.status === "stopped" && running));
    el("sweep-resume").hidden = s.status !== "stopped";
    const best = s.best;
    const facts = [
      ["Project", s.project],
      ["Method", s.method],
      ["Pruner", s.prune],
      ["Objective", `${s.goal} ${s.metric} (${s.objective} value)`],
      ["Trials", `${s.done} done of ${s.trials}, ${s.parallel} at a time`],
      ["Best", best ? `${T.fmtValue(best.value)} (trial ${best.number})` : "–"],
      ["Space", s.space.join("  ")],
      ["Command", T.commandSummary(s.spec.argv)],
      ["Created", T.fmtTime(s.created_at)],
    ];
    clear(el("sweep-facts")).append(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    el("sweep-note").hidden = !s.note;
    el("sweep-note").textContent = s.note || "";
    el("trial-counts").textContent = Object.entries(s.counts).sort().map(([k, n]) => `${n} ${k}`).join(" · ");
  }

  // ------------------------------------------------------------------ trials table

  function trialRow(t) {
    const pairs = T.configPairs(t.params);
    const state = [badge(t.state, STATE_CLASS[t.state])];
    if (t.state === "pruned" && t.pruned_step !== null) state.push(h("span", { class: "muted small" }, ` at step ${t.pruned_step}`));
    return h("tr", { id: `trial-${t.number}`, dataset: { number: t.number, state: t.state } },
      h("td", { class: "num" }, t.number),
      h("td", {}, state),
      h("td", {}, h("code", { class: "config" }, pairs.join(" "))),
      h("td", { class: "num value" }, T.fmtValue(t.value)),
      h("td", {}, t.job_id ? [h("a", { href: `/jobs/${t.job_id}` }, `#${t.job_id}`),
        t.job_status ? h("span", { class: "muted small" }, ` ${t.job_status.replace("_", " ")}`) : null] : ""),
      h("td", {}, t.run_id ? h("a", { href: `/runs/${t.run_id}` }, `#${t.run_id}`) : ""),
      h("td", { class: "note muted small" }, t.note || ""));
  }

  // ------------------------------------------------------------------ charts

  function empty(target, text) {
    if (target.classList.contains("js-plotly-plot")) Plotly.purge(target);
    clear(target).append(h("p", { class: "empty" }, text));
    delete target.dataset.traces;
  }

  async function plot(target, traces, layout) {
    const note = target.querySelector(":scope > p.empty");
    if (note) note.remove();
    await Plotly.react(target, traces, layout, Charts.PLOT_CONFIG);
    target.dataset.traces = String(traces.length);
  }

  /** A sweep compares trials whose values often differ by orders of magnitude (a pruned
   *  trial's loss beside the best ones): a log axis from 1.5 decades, when all are > 0. */
  function spreadsDecades(ext) {
    return Boolean(ext) && ext[0] > 0 && Math.log10(ext[1] / ext[0]) >= 1.5;
  }

  function baseLayout(xTitle, yTitle, height, legend = false) {
    return Charts.layout({ axis: { title: xTitle, type: "linear" }, yTitle, height, legend });
  }

  async function drawObjective(doc) {
    const s = doc.sweep;
    const target = el("objective-chart");
    const scored = doc.trials.filter((t) => isNum(t.value) && (t.state === "complete" || t.state === "pruned"));
    if (!scored.length) { empty(target, `No trial has a ${s.metric} yet.`); return; }
    const complete = scored.filter((t) => t.state === "complete");
    const pruned = scored.filter((t) => t.state === "pruned");
    const better = s.goal === "maximize" ? Math.max : Math.min;
    const bestX = [];
    const bestY = [];
    let best = null;
    for (const t of complete) {
      best = best === null ? t.value : better(best, t.value);
      bestX.push(t.number);
      bestY.push(best);
    }
    const hover = (t) => `trial ${t.number} (${t.state})<br>${T.plotText(T.configPairs(t.params).join(" "))}`;
    const traces = [
      { type: "scatter", mode: "markers", name: "complete", x: complete.map((t) => t.number), y: complete.map((t) => t.value),
        text: complete.map(hover), hovertemplate: "%{text}<br>%{y}<extra></extra>", marker: { color: Charts.color(0, 1), size: 8 } },
      { type: "scatter", mode: "lines", name: "best so far", x: bestX, y: bestY, line: { shape: "hv", color: Charts.color(2, 4), width: 2 } },
    ];
    if (pruned.length) {
      traces.push({ type: "scatter", mode: "markers", name: "pruned", x: pruned.map((t) => t.number), y: pruned.map((t) => t.value),
        text: pruned.map(hover), hovertemplate: "%{text}<br>%{y}<extra></extra>", marker: { color: PRUNED_COLOR, size: 8, symbol: "x" } });
    }
    const layout = baseLayout("trial", T.plotText(s.metric), 260, true);
    layout.xaxis.tickformat = "d";
    const values = scored.map((t) => t.value);
    if (spreadsDecades([Math.min(...values), Math.max(...values)])) layout.yaxis.type = "log";
    await plot(target, traces, layout);
  }

  async function drawImportance(doc) {
    const target = el("importance-chart");
    const entries = Object.entries(doc.importance || {}).sort((a, b) => a[1] - b[1]);
    el("objective-hint").textContent = doc.sweep.goal === "maximize" ? "higher is better" : "lower is better";
    if (!entries.length) { empty(target, doc.importance_note || "No importance yet."); return; }
    const layout = baseLayout("importance", "", Math.max(200, 60 + 28 * entries.length));
    layout.yaxis.type = "category";
    layout.yaxis.automargin = true;
    layout.xaxis.range = [0, 1];
    const traces = [{ type: "bar", orientation: "h", x: entries.map((e) => e[1]), y: entries.map((e) => T.plotText(e[0])),
      marker: { color: Charts.color(0, 1) }, hovertemplate: "%{y}: %{x:.3f}<extra></extra>" }];
    await plot(target, traces, layout);
    target.title = doc.importance_note || "";
  }

  /** A parcoords dimension for one param: numbers as they are, other values as categories. */
  function dimension(key, trials) {
    const values = trials.map((t) => t.params[key]);
    if (values.every((v) => typeof v === "number")) return { label: key, values };
    const labels = [...new Set(values.map((v) => T.fmtConfig(v)))].sort();
    return { label: key, values: values.map((v) => labels.indexOf(T.fmtConfig(v))), tickvals: labels.map((_, i) => i), ticktext: labels };
  }

  function drawParcoords(doc) {
    const target = el("parcoords-chart");
    const done = doc.trials.filter((t) => t.state === "complete" && isNum(t.value));
    const keys = [...new Set(done.flatMap((t) => Object.keys(t.params)))].filter((k) => done.every((t) => k in t.params)).sort();
    if (done.length < 2 || !keys.length) {
      clear(target).append(h("p", { class: "empty" }, "Parallel coordinates need two complete trials."));
      delete target.dataset.lines;
      return;
    }
    const dims = keys.map((k) => dimension(k, done));
    dims.push({ label: doc.sweep.metric, values: done.map((t) => t.value) });
    ParCoords.draw(target, dims, done.map((t) => `trial ${t.number}`));
    target.dataset.lines = String(done.length);
  }

  async function drawCurves(doc) {
    const target = el("curves-chart");
    const byNumber = new Map(doc.trials.map((t) => [t.number, t]));
    const curves = doc.curves.filter((c) => byNumber.has(c.number));
    if (!curves.length) { empty(target, `No trial has logged ${doc.sweep.metric} yet.`); return; }
    const traces = [];
    const marks = { x: [], y: [], text: [] };
    curves.forEach((c, i) => {
      const t = byNumber.get(c.number);
      const pruned = t.state === "pruned";
      const x = [];
      const y = [];
      c.last.forEach((v, k) => { if (v !== null) { x.push(c.last_step[k]); y.push(v); } });
      traces.push({
        type: "scatter", mode: x.length < Charts.MARKERS_BELOW ? "lines+markers" : "lines", name: `trial ${t.number}${pruned ? " (pruned)" : ""}`,
        x, y, opacity: pruned ? 0.75 : 0.9, marker: { size: 4 },
        line: { width: pruned ? 1.2 : 1.6, dash: pruned ? "dash" : "solid", color: pruned ? PRUNED_COLOR : t.state === "failed" ? "#f87171" : Charts.color(i, curves.length) },
        hovertemplate: `trial ${t.number} (${t.state})<br>step %{x}: %{y}<extra></extra>`,
      });
      if (pruned && t.pruned_step !== null) {
        const k = c.last_step.findIndex((s, j) => c.first_step[j] <= t.pruned_step && t.pruned_step <= s);
        if (k >= 0 && c.last[k] !== null) {
          marks.x.push(t.pruned_step);
          marks.y.push(c.last[k]);
          marks.text.push(`trial ${t.number} pruned at step ${t.pruned_step}`);
        }
      }
    });
    if (marks.x.length) {
      traces.push({ type: "scatter", mode: "markers", name: "pruned here", x: marks.x, y: marks.y, text: marks.text,
        hovertemplate: "%{text}<extra></extra>", marker: { symbol: "x", size: 11, color: "#dc2626", line: { width: 1 } } });
    }
    const layout = baseLayout("step", T.plotText(doc.sweep.metric), 380);
    Object.assign(layout.xaxis, Charts.stepTicks({ mode: "step" }, curves));
    if (spreadsDecades(Charts.extent(curves))) layout.yaxis.type = "log";
    await plot(target, traces, layout);
    target.dataset.pruneMarks = String(marks.x.length);
    el("curves-hint").textContent = `pruned trials dashed, ✕ where they were stopped${doc.curves_left_out ? ` · the newest ${curves.length} trials (${doc.curves_left_out} older left out)` : ""}`;
  }

  // ------------------------------------------------------------------ load, poll

  async function load() {
    let doc;
    try {
      doc = await api(`/api/v1/sweeps/${sweepId}`);
    } catch (exc) {
      if (exc.status === 404) {
        el("sweep-error").textContent = exc.message;
        el("sweep-error").hidden = false;
        return false;
      }
      throw exc;
    }
    renderHead(doc.sweep);
    clear(document.querySelector("#trials-table tbody")).append(...doc.trials.map(trialRow));
    el("trials-empty").hidden = doc.trials.length > 0;
    await Promise.all([drawObjective(doc), drawImportance(doc), drawCurves(doc)]);
    drawParcoords(doc);
    document.body.dataset.sweepStatus = doc.sweep.status;
    document.body.dataset.sweepAnswered = String(Number(document.body.dataset.sweepAnswered || 0) + 1);
    return live(doc);
  }

  function follow() {
    if (poller) poller.stop();
    poller = T.poll(load, REFRESH_MS);
  }

  async function act(path, body, done) {
    try {
      await api(`/api/v1/sweeps/${sweepId}/${path}`, { method: "POST", body });
      T.toast(done, "ok");
    } catch (exc) {
      T.toast(exc.message);
    }
    if (await load().catch((exc) => { T.toast(exc.message); return false; })) follow();
  }

  el("sweep-stop").addEventListener("click", () => act("stop", { kill: false }, "Sweep stopped: no more trials are queued"));
  el("sweep-kill").addEventListener("click", () => {
    if (window.confirm("Stop this sweep and cancel its running trials?")) act("stop", { kill: true }, "Sweep stopped; running trials cancelled");
  });
  el("sweep-resume").addEventListener("click", () => act("resume", {}, "Sweep resumed"));

  load().then((running) => { if (running) follow(); }).catch((exc) => T.toast(exc.message));
})();
