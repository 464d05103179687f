/* Compare 2 to 200 runs: the config keys that differ (all keys on request), one metric
 * overlaid with a colour per run, a parallel-coordinates plot of config values against that
 * metric, and a scatter of any config key against any metric. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const ids = (el("main").dataset.runIds || "").split(",").filter(Boolean).map(Number);
  const MAX_PARCOORDS_DIMS = 12;
  let runs = [];
  let rows = [];
  let colors = new Map();
  let metricKeys = [];
  const lastValues = new Map(); // metric -> Map(run id -> number)
  let overlayZoom = null;

  function fail(message) {
    const box = el("compare-error");
    box.textContent = message;
    box.hidden = false;
  }

  // ---------------------------------------------------------------- config diff

  function runHeader(run) {
    return h("th", { class: "run-col" },
      h("span", { class: "swatch", style: `background:${colors.get(run.id)}` }),
      h("a", { href: `/runs/${run.id}` }, run.name), h("span", { class: "muted" }, ` #${run.id}`),
      h("div", {}, T.statusBadge(run.status, run.failure_class, run.failure_hint)));
  }

  function renderDiff() {
    const showAll = el("show-all-keys").checked;
    const visible = showAll ? rows : rows.filter((r) => r.differs);
    const table = el("diff-table");
    clear(table.tHead).append(h("tr", {}, h("th", { class: "key-col" }, "Config key"), runs.map(runHeader)));
    const body = clear(table.tBodies[0]);
    for (const row of visible) {
      body.append(h("tr", { class: row.differs ? "differs" : "same", dataset: { key: row.key } },
        h("th", { class: "key-col", scope: "row" }, row.key),
        row.values.map((v, i) => (row.missing[i]
          ? h("td", { class: "missing" }, "missing")
          : h("td", { title: T.fmtConfig(v) }, T.fmtConfig(v))))));
    }
    el("diff-empty").hidden = visible.length > 0;
    table.hidden = visible.length === 0;
  }

  // ---------------------------------------------------------------- metrics

  const COUNTED_METRICS = 60; // metric keys whose presence is counted to pick the defaults

  /** How many of the compared runs have a finite last value of each metric (one search). */
  async function metricCounts(keys) {
    const counted = keys.slice(0, COUNTED_METRICS);
    if (!counted.length) return new Map();
    const params = new URLSearchParams({ q: `id in (${ids.join(", ")})`, metrics: counted.join(","), limit: 500 });
    const doc = await api(`/api/v1/runs?${params}`);
    const counts = new Map(counted.map((k) => [k, 0]));
    for (const key of counted) {
      const values = new Map();
      for (const r of doc.runs) {
        const v = (r.metrics || {})[key];
        if (typeof v === "number") values.set(r.id, v);
      }
      lastValues.set(key, values);
      counts.set(key, values.size);
    }
    return counts;
  }

  /** The metric most compared runs have (val/ first among equals, sys/ last). */
  function preferredMetric(keys, counts) {
    const score = (k) => [counts.get(k) || 0, k.startsWith("sys/") ? 0 : 1, k.startsWith("val/") ? 1 : 0];
    return [...keys].sort((a, b) => {
      const [x, y] = [score(a), score(b)];
      return y[0] - x[0] || y[1] - x[1] || y[2] - x[2] || a.localeCompare(b);
    })[0];
  }

  /** The metric keys at least one compared run logged (their last values came with the
   *  runs from /api/v1/compare): a key only other runs of the project have is no choice. */
  async function loadMetricKeys() {
    metricKeys = [...new Set(runs.flatMap((r) => Object.keys(r.last_metrics || {})))].sort();
    const nonSys = metricKeys.filter((k) => !k.startsWith("sys/"));
    const counts = await metricCounts([...nonSys, ...metricKeys.filter((k) => k.startsWith("sys/"))]);
    const preferred = preferredMetric(metricKeys, counts);
    for (const select of [el("metric-select"), el("scatter-y")]) {
      clear(select).append(...metricKeys.map((k) => h("option", { value: k }, k)));
      if (preferred) select.value = preferred;
    }
    const configKeys = rows.map((r) => r.key);
    const scatterX = el("scatter-x");
    clear(scatterX).append(...configKeys.map((k) => h("option", { value: k }, k)));
    // The differing numeric key that most runs have (a key only one run has plots one dot).
    const present = (r) => r.missing.filter((m) => !m).length;
    const numeric = rows.filter((r) => r.differs && r.values.some((v) => typeof v === "number"))
      .sort((a, b) => present(b) - present(a));
    const fallback = rows.filter((r) => r.differs).sort((a, b) => present(b) - present(a));
    const pick = numeric[0] || fallback[0];
    if (pick) scatterX.value = pick.key;
  }

  /** Last value of `metric` for every compared run (one search request; NaN/missing left out). */
  async function metricValues(metric) {
    if (lastValues.has(metric)) return lastValues.get(metric);
    const params = new URLSearchParams({ q: `id in (${ids.join(", ")})`, metrics: metric, limit: 500 });
    const doc = await api(`/api/v1/runs?${params}`);
    const values = new Map();
    for (const r of doc.runs) {
      const v = r.metrics[metric];
      if (typeof v === "number") values.set(r.id, v);
    }
    lastValues.set(metric, values);
    return values;
  }

  async function drawOverlay() {
    const key = el("metric-select").value;
    const target = el("overlay-chart");
    if (!key) { target.textContent = "These runs have no metrics."; return; }
    const params = new URLSearchParams({ key, runs: ids.join(","), max_buckets: runs.length > 20 ? 300 : 1000 });
    if (overlayZoom) { params.set("lo", overlayZoom[0]); params.set("hi", overlayZoom[1]); }
    const doc = await api(`/api/v1/series?${params}`);
    const axis = Charts.xAxis("step", 0, 0);
    const smoothing = Number(el("cmp-smoothing").value);
    const band = runs.length <= 10;
    const traces = runs.flatMap((run) => {
      const p = doc.series[String(run.id)];
      if (!p || !p.last_step.length) return [];
      p.key = key;
      return Charts.seriesTraces(p, { axis, c: colors.get(run.id), name: `${run.name} #${run.id}`, smoothing, band, legend: runs.length <= 20 });
    });
    const lay = Charts.layout({ axis, logY: el("cmp-log-y").checked, height: 380, yTitle: key, legend: runs.length <= 20, revision: key });
    const drawn = runs.map((run) => doc.series[String(run.id)]).filter((p) => p && p.last_step.length);
    Object.assign(lay.xaxis, Charts.stepTicks(axis, drawn));
    Object.assign(lay.yaxis, Charts.yRange(Charts.extent(drawn), { logY: el("cmp-log-y").checked }));
    lay.legend = { orientation: "v", x: 1.02, y: 1, font: { size: 10 } };
    lay.margin.r = runs.length <= 20 ? 180 : 14;
    target.dataset.traces = String(traces.length);
    if (!traces.length) {
      Plotly.purge(target);
      clear(target).append(h("p", { class: "empty" }, `None of these runs logged ${key}: pick another metric.`));
      delete target.dataset.listening;
      return;
    }
    const note = target.querySelector(":scope > p.empty");
    if (note) note.remove();
    await Plotly.react(target, traces, lay, Charts.PLOT_CONFIG);
    if (!target.dataset.listening) {
      target.dataset.listening = "1";
      target.on("plotly_relayout", (ev) => {
        if (ev["xaxis.autorange"]) overlayZoom = null;
        else if (ev["xaxis.range[0]"] !== undefined) {
          overlayZoom = [Math.max(0, Math.floor(ev["xaxis.range[0]"])), Math.ceil(ev["xaxis.range[1]"])];
        } else return;
        drawOverlay().catch((exc) => T.toast(exc.message));
      });
    }
  }

  // ------------------------------------------------------------ config vs metric

  /** A parcoords dimension for one config key: numbers as they are, other values as categories. */
  function dimension(row, runIndex) {
    const values = runIndex.map((i) => (row.missing[i] ? undefined : row.values[i]));
    if (values.every((v) => typeof v === "number")) {
      return { label: row.key, values };
    }
    const labels = [...new Set(values.map((v) => (v === undefined ? "missing" : T.fmtConfig(v))))].sort();
    return {
      label: row.key,
      values: values.map((v) => labels.indexOf(v === undefined ? "missing" : T.fmtConfig(v))),
      tickvals: labels.map((_, i) => i),
      ticktext: labels,
    };
  }

  async function drawParcoords() {
    const metric = el("metric-select").value;
    const target = el("parcoords-chart");
    const values = metric ? await metricValues(metric) : new Map();
    const runIndex = runs.map((r, i) => [r, i]).filter(([r]) => values.has(r.id)).map(([, i]) => i);
    // Only keys whose values differ among the runs drawn: a constant axis says nothing.
    const distinct = (row) => new Set(runIndex.map((i) => (row.missing[i] ? "\u0000missing" : JSON.stringify(row.values[i])))).size;
    const keys = rows.filter((r) => !r.values.some((v) => v !== null && typeof v === "object"))
      .filter((r) => distinct(r) > 1).slice(0, MAX_PARCOORDS_DIMS);
    if (runIndex.length < 2 || !keys.length) {
      clear(target).append(h("p", { class: "empty" }, !metric ? "No metric to plot."
        : runIndex.length < 2 ? `Fewer than two of these runs have a finite ${metric}.`
          : `The runs with a ${metric} have the same config: no axis to draw.`));
      delete target.dataset.lines;
      return;
    }
    const dims = keys.map((row) => dimension(row, runIndex));
    dims.push({ label: metric, values: runIndex.map((i) => values.get(runs[i].id)) });
    ParCoords.draw(target, dims, runIndex.map((i) => `${runs[i].name} #${runs[i].id}`));
    target.dataset.lines = String(runIndex.length);
  }

  /** [lo, hi] centred on the value when every value is the same (half its size each side,
   *  or 1 around 0), else null: plotly's autorange would span a unit around nothing. */
  function around(values) {
    const finite = values.filter((v) => typeof v === "number" && Number.isFinite(v));
    if (!finite.length || finite.some((v) => v !== finite[0])) return null;
    const v = finite[0];
    const half = v === 0 ? 1 : Math.abs(v) / 2;
    return [v - half, v + half];
  }

  async function drawScatter() {
    const key = el("scatter-x").value;
    const metric = el("scatter-y").value;
    const target = el("scatter-chart");
    const row = rows.find((r) => r.key === key);
    if (!row || !metric) { Plotly.purge(target); clear(target).append(h("p", { class: "empty" }, "Pick a config key and a metric.")); return; }
    const values = await metricValues(metric);
    const numeric = row.values.every((v, i) => row.missing[i] || v === null || typeof v === "number");
    const points = runs.map((run, i) => ({ run, x: row.missing[i] ? null : row.values[i], y: values.get(run.id) }))
      .filter((p) => p.y !== undefined && p.x !== null && p.x !== undefined);
    if (!points.length) {
      Plotly.purge(target);
      clear(target).append(h("p", { class: "empty scatter-empty" },
        `None of these ${runs.length} runs has both ${key} and a finite ${metric}: pick another config key or metric.`));
      target.dataset.points = "0";
      return;
    }
    const trace = {
      type: "scatter", mode: "markers",
      x: points.map((p) => (numeric ? p.x : T.plotText(T.fmtConfig(p.x)))),
      y: points.map((p) => p.y),
      text: points.map((p) => T.plotText(`${p.run.name} #${p.run.id}`)),
      customdata: points.map((p) => T.fmtMetric(metric, p.y)),
      marker: { size: 11, color: points.map((p) => colors.get(p.run.id)), line: { width: 1, color: "#fff" } },
      hovertemplate: `%{text}<br>${T.plotText(key)} = %{x}<br>${T.plotText(metric)} = %{customdata}<extra></extra>`,
    };
    const axis = { title: key, type: numeric ? "linear" : "category" };
    const lay = Charts.layout({ axis, height: 380, yTitle: metric, revision: `${key}|${metric}` });
    const positive = numeric && points.length > 1 && points.every((p) => p.x > 0);
    const spread = positive ? Math.max(...points.map((p) => p.x)) / Math.min(...points.map((p) => p.x)) : 1;
    if (spread >= 20) Object.assign(lay.xaxis, { type: "log", dtick: "D2" }); // learning rates and the like span decades
    // One point (or one value on an axis): a range around it, not an autorange over nothing.
    const xRange = numeric ? around(points.map((p) => p.x)) : null;
    const yRange = around(points.map((p) => p.y));
    if (xRange) Object.assign(lay.xaxis, { range: xRange, autorange: false });
    if (yRange) Object.assign(lay.yaxis, { range: yRange, autorange: false });
    Plotly.purge(target); // a plot whose nodes were removed would be diffed, not redrawn
    clear(target);
    target.dataset.points = String(points.length);
    await Plotly.react(target, [trace], lay, Charts.PLOT_CONFIG);
  }

  const safely = (fn) => () => fn().catch((exc) => T.toast(exc.message));

  async function start() {
    if (ids.length < 2) {
      // No empty cards with blank selects: only what to do.
      el("compare-body").hidden = true;
      const box = el("compare-error");
      clear(box).append(ids.length ? `Only one run (#${ids[0]}) is selected. ` : "No runs are selected. ",
        "Select 2 to 200 runs on the ", h("a", { href: "/" }, "Runs page"),
        " (tick the box of each run) and press Compare.");
      box.hidden = false;
      return;
    }
    let doc;
    try {
      doc = await api(`/api/v1/compare?runs=${ids.join(",")}&all=1`);
    } catch (exc) {
      el("compare-body").hidden = true;
      fail(exc.message);
      return;
    }
    runs = doc.runs;
    rows = doc.rows;
    colors = new Map(runs.map((r, i) => [r.id, Charts.color(i, runs.length)]));
    el("compare-count").textContent = `${runs.length} runs`;
    document.title = `Compare ${runs.length} runs · tracker`;
    // Controls answer from the first paint: a box ticked while the metric keys still load
    // must not be ignored.
    el("show-all-keys").addEventListener("change", renderDiff);
    renderDiff();
    await loadMetricKeys();
    el("metric-select").addEventListener("change", () => {
      overlayZoom = null;
      safely(drawOverlay)();
      safely(drawParcoords)();
    });
    el("cmp-log-y").addEventListener("change", safely(drawOverlay));
    el("cmp-smoothing").addEventListener("input", safely(drawOverlay));
    el("scatter-x").addEventListener("change", safely(drawScatter));
    el("scatter-y").addEventListener("change", safely(drawScatter));
    let resizeTimer = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(safely(drawParcoords), 200);
    });
    await Promise.all([safely(drawOverlay)(), safely(drawParcoords)(), safely(drawScatter)()]);
  }

  start();
})();
