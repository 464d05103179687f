/* The run page's Profile panel: on a running run, "Profile N steps" asks the run's client to
 * profile its next N steps (POST /api/v1/runs/<id>/profiles, admin scope: a log token's 403
 * shows next to the button); while a profile is open the panel polls the list (the client
 * takes the request on its next heartbeat, about every 10 s). For each profile: its state,
 * steps, who asked, each rank's trace to download (Perfetto, chrome://tracing) and, once
 * stored, where the time went: the cause's hint, the time split, host syncs per step with
 * the Python lines that made them, the top ops, the GPU's idle share. Two profiles ticked
 * show their diff. run.js calls RunProfiles.render(run) on every header refresh. */
"use strict";

const RunProfiles = (() => {
  const { h, api, clear } = T;
  const SPLIT = [["compute", "compute"], ["communication", "communication"],
    ["memory_copies", "memory copies"], ["dataloader", "dataloader wait"], ["idle", "idle"]];
  const POLL_MS = 2000;
  const RECHECK_MS = 10000; // a running run's list, re-read on header refreshes: one asked elsewhere (the CLI) shows up
  let loadedAt = 0;
  let runId = null;
  let run = null;
  let profiles = null; // newest first, null until loaded
  let maxSteps = 500;
  const details = new Map(); // id -> GET .../profiles/<id> of a closed profile (kept)
  const picked = [];
  let poller = null;
  let askError = null;
  const chosen = { steps: "20", ranks: "0" }; // kept across redraws
  let diffBox = null;

  const base = () => `/api/v1/runs/${runId}/profiles`;
  const isOpen = (p) => p.state === "requested" || p.state === "running";
  // whole numbers from 10 %, one decimal below (a small op's 0.8 % is not 0 %)
  const pct = (share) => {
    if (typeof share !== "number") return "–";
    const p = share * 100;
    if (p > 0 && p < 0.05) return "<0.1 %";
    return `${p >= 10 || p === 0 ? p.toFixed(0) : p.toFixed(1)} %`;
  };
  const ms = (value) => (typeof value === "number" ? value.toFixed(2) : "–");

  function stepsText(p) {
    if (p.first_step === null || p.first_step === undefined) return `next ${p.steps}`;
    const last = p.last_step === null || p.last_step === undefined ? p.first_step + p.steps - 1 : p.last_step;
    return `${p.first_step}..${last}`;
  }

  async function load() {
    loadedAt = Date.now();
    const doc = await api(base());
    profiles = doc.profiles;
    maxSteps = doc.max_steps || maxSteps;
    for (const p of profiles) {
      if (!isOpen(p) && p.traces.length && !details.has(p.id)) {
        try {
          details.set(p.id, await api(`${base()}/${p.id}`));
        } catch (exc) {
          details.set(p.id, { profile: p, summary: null, cause: null, summary_error: exc.message });
        }
      }
    }
    draw();
    if (profiles.some(isOpen)) follow();
    return profiles.some(isOpen);
  }

  function follow() {
    if (poller) return;
    poller = T.poll(async () => {
      const open = await load();
      if (!open) poller = null;
      return open;
    }, POLL_MS);
  }

  async function ask(stepsInput, ranksSelect, button) {
    button.disabled = true;
    try {
      const steps = Number(stepsInput.value);
      await api(base(), { method: "POST", body: { steps: Number.isInteger(steps) ? steps : stepsInput.value, ranks: ranksSelect.value } });
      askError = null;
      await load();
    } catch (exc) {
      askError = exc.message;
      draw();
    } finally {
      button.disabled = false;
    }
  }

  // ------------------------------------------------------------------ the control

  function control(open) {
    if (!run || run.status !== "running") {
      return h("p", { class: "muted" }, "Only a running run can be profiled: the profiles taken while it ran are below.");
    }
    const steps = h("input", { type: "number", id: "profile-steps", min: 1, max: maxSteps, value: chosen.steps, class: "profile-steps", "aria-label": "Steps to profile" });
    const ranks = h("select", { id: "profile-ranks", "aria-label": "Ranks to profile" },
      h("option", { value: "0", selected: chosen.ranks === "0" }, "rank 0"),
      h("option", { value: "all", selected: chosen.ranks === "all" }, "all ranks"));
    const label = () => `Profile ${steps.value || "N"} steps`;
    const button = h("button", { type: "button", class: "btn small primary", id: "profile-ask" }, label());
    steps.addEventListener("input", () => { chosen.steps = steps.value; button.textContent = label(); });
    ranks.addEventListener("change", () => { chosen.ranks = ranks.value; });
    button.addEventListener("click", () => ask(steps, ranks, button));
    if (open) button.disabled = true;
    return h("div", { class: "profile-control" },
      h("label", { class: "inline" }, "Steps ", steps), h("label", { class: "inline" }, "Ranks ", ranks), button,
      open ? h("span", { class: "muted" }, "one profile at a time") : null,
      askError ? h("span", { class: "edit-error", role: "alert", id: "profile-error" }, askError) : null);
  }

  function openLine(p) {
    const text = p.state === "requested"
      ? `Profile #${p.id} requested: waiting for the run's next heartbeat (up to ~10 s)…`
      : `Profile #${p.id}: profiling steps ${stepsText(p)}…`;
    return h("p", { class: "profile-progress", id: "profile-progress", role: "status" }, text);
  }

  // ------------------------------------------------------------------ a summary

  function splitBar(summary) {
    const split = summary.time_split || {};
    const bar = h("div", { class: "split-bar", role: "img", "aria-label": "Time split of the profiled steps" },
      SPLIT.map(([key, label]) => {
        const share = (split[key] || {}).share || 0;
        return share > 0 ? h("span", { class: `split-seg split-${key}`, style: `width: ${(share * 100).toFixed(2)}%`, title: `${label}: ${pct(share)}` }) : null;
      }));
    const legend = h("ul", { class: "split-legend" }, SPLIT.map(([key, label]) =>
      h("li", { dataset: { part: key } }, h("span", { class: `split-key split-${key}`, "aria-hidden": "true" }),
        `${label} ${pct((split[key] || {}).share)}`)));
    return h("div", { class: "profile-split" }, bar, legend);
  }

  function syncs(summary) {
    const s = summary.host_syncs || {};
    const ops = Object.entries(s.by_op || {}).map(([op, n]) => `${op} ×${n}`).join(", ");
    return h("div", { class: "profile-syncs" },
      h("strong", {}, "Host syncs: "), `${(s.per_step || 0).toFixed(2)} per step`, ops ? h("span", { class: "muted" }, ` (${ops})`) : null,
      (s.frames || []).length ? h("ul", { class: "sync-frames" }, s.frames.map((f) =>
        h("li", {}, h("code", {}, f.frame), ` ${f.op} ×${f.count}`))) : null);
  }

  function opsTable(summary) {
    const rows = (summary.top_ops || []).slice(0, 10).map((o) => h("tr", {},
      h("td", { class: "op-name" }, h("code", {}, o.name)), h("td", { class: "num" }, String(o.calls)),
      h("td", { class: "num" }, ms(o.self_ms)), h("td", { class: "num" }, pct(o.share))));
    return h("div", { class: "table-wrap" }, h("table", { class: "data-table compact profile-ops" },
      h("thead", {}, h("tr", {}, h("th", {}, "Op"), h("th", { class: "num" }, "Calls"), h("th", { class: "num" }, "Self ms"), h("th", { class: "num" }, "Share"))),
      h("tbody", {}, rows)));
  }

  function summaryView(found) {
    if (!found.summary) {
      return h("p", { class: "muted profile-nosummary" }, found.summary_error || "No summary: no trace was stored.");
    }
    const s = found.summary;
    return h("div", { class: "profile-summary" },
      found.cause ? h("p", { class: "profile-hint", role: "note" }, h("strong", {}, "Likely cause: "), found.cause.hint)
        : h("p", { class: "profile-ok" }, "No dominant cause: no dataloader wait, communication, memory copies or host syncs past their thresholds."),
      h("p", { class: "muted" }, `Median step ${ms(s.steps.median_ms)} ms over ${s.steps.count} steps`),
      splitBar(s), syncs(s),
      s.gpu ? h("p", { class: "profile-gpu" }, `GPU idle ${pct(s.gpu.idle_share)} of the profiled span (kernels ${ms(s.gpu.kernel_ms)} ms)`) : null,
      opsTable(s));
  }

  // ------------------------------------------------------------------ each profile

  function item(p, newest) {
    const traces = p.traces.map((t) => h("a", { class: "btn small", href: `${base()}/${p.id}/trace?rank=${t.rank}`, download: "" }, `trace rank ${t.rank} ↓`));
    const tick = p.state === "stored" && p.traces.length
      ? h("label", { class: "inline profile-pick" }, h("input", { type: "checkbox", checked: picked.includes(p.id), onchange: (e) => pick(p.id, e.target.checked) }), " compare")
      : null;
    const head = h("summary", { class: "profile-head" },
      h("strong", {}, `#${p.id}`), h("span", { class: `badge profile-state state-${p.state}` }, p.state),
      h("span", {}, `steps ${stepsText(p)}`),
      h("span", { class: "muted" }, `requested ${T.fmtTime(p.requested_at)}${p.requested_by ? ` by ${p.requested_by}` : ""}`));
    const found = details.get(p.id);
    return h("details", { class: "profile-item", dataset: { profile: p.id }, open: newest },
      head,
      h("div", { class: "profile-body" },
        p.message ? h("p", { class: "muted" }, p.message) : null,
        traces.length || tick ? h("div", { class: "profile-actions" }, traces, tick) : null,
        found ? summaryView(found) : (isOpen(p) ? null : h("p", { class: "muted" }, "No trace was stored."))));
  }

  // ------------------------------------------------------------------ the diff

  function pick(id, on) {
    const at = picked.indexOf(id);
    if (on && at < 0) picked.push(id);
    if (!on && at >= 0) picked.splice(at, 1);
    while (picked.length > 2) picked.shift();
    draw();
    if (picked.length === 2) showDiff();
  }

  async function showDiff() {
    const [a, b] = [...picked].sort((x, y) => x - y);
    try {
      const doc = await api(`${base()}/${a}/diff/${b}`);
      diffBox = diffView(a, b, doc.diff);
    } catch (exc) {
      diffBox = h("p", { class: "edit-error", role: "alert" }, exc.message);
    }
    draw();
  }

  function diffView(a, b, d) {
    const sign = (v) => (v > 0 ? "+" : "");
    const splitRows = SPLIT.map(([key, label]) => {
      const pair = d.time_split[key];
      return h("tr", {}, h("td", {}, label), h("td", { class: "num" }, pct(pair.a)), h("td", { class: "num" }, pct(pair.b)),
        h("td", { class: "num" }, `${sign(pair.delta)}${(pair.delta * 100).toFixed(0)} pts`));
    });
    const syncs = d.host_syncs_per_step;
    const ops = d.ops.slice(0, 8).map((o) => h("tr", {}, h("td", { class: "op-name" }, h("code", {}, o.name)),
      h("td", { class: "num" }, ms(o.a_ms_per_step)), h("td", { class: "num" }, ms(o.b_ms_per_step)),
      h("td", { class: "num" }, `${sign(o.delta_ms_per_step)}${ms(o.delta_ms_per_step)}`)));
    const ratio = d.step_time_ratio === null ? "–" : `×${d.step_time_ratio.toFixed(2)}`;
    return h("section", { class: "profile-diff", id: "profile-diff" },
      h("h3", {}, `#${b} against #${a}: median step time ${ratio}`),
      h("p", {}, `Host syncs per step: ${syncs.a} → ${syncs.b}`),
      h("div", { class: "table-wrap" }, h("table", { class: "data-table compact" },
        h("thead", {}, h("tr", {}, h("th", {}, "Time split"), h("th", { class: "num" }, `#${a}`), h("th", { class: "num" }, `#${b}`), h("th", { class: "num" }, "Change"))),
        h("tbody", {}, splitRows))),
      h("div", { class: "table-wrap" }, h("table", { class: "data-table compact" },
        h("thead", {}, h("tr", {}, h("th", {}, "Op (self ms per step)"), h("th", { class: "num" }, `#${a}`), h("th", { class: "num" }, `#${b}`), h("th", { class: "num" }, "Change"))),
        h("tbody", {}, ops))));
  }

  // ------------------------------------------------------------------ wiring

  function draw() {
    const box = document.getElementById("run-profiles");
    if (!box || profiles === null) return;
    const running = run && run.status === "running";
    box.hidden = !running && profiles.length === 0;
    if (box.hidden) return;
    // keep what the reader opened or closed across redraws
    const was = new Map([...box.querySelectorAll("details.profile-item")].map((d) => [Number(d.dataset.profile), d.open]));
    const open = profiles.find(isOpen);
    T.append(clear(box), [
      h("div", { class: "profile-top" }, h("h2", {}, "Profile"),
        h("span", { class: "muted" }, "where the time of the run's steps goes (torch.profiler)")),
      control(!!open), open ? openLine(open) : null,
      picked.length === 2 && diffBox ? diffBox : (profiles.filter((p) => p.state === "stored").length > 1 && picked.length < 2
        ? h("p", { class: "muted" }, "Tick two stored profiles to compare them.") : null),
      profiles.map((p, i) => item(p, was.has(p.id) ? was.get(p.id) : i === 0))]);
  }

  /** The run as GET /api/v1/runs/<id> has it; the first call loads the profiles. */
  function render(r) {
    if (runId === null) runId = Number(document.querySelector("main").dataset.runId);
    const first = run === null;
    const wasRunning = run && run.status === "running";
    run = r;
    const stale = r.status === "running" && !poller && Date.now() - loadedAt > RECHECK_MS;
    if (first || stale) load().catch((exc) => { if (exc.status !== 0) console.error(exc); });
    else if (wasRunning !== (r.status === "running")) draw();
  }

  function init(id) {
    runId = id;
  }

  return { init, render };
})();
