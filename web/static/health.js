/* The doctor's diagnoses in the pages (API: GET /api/v1/runs/<id>/diagnoses).
 * - Health.badges(chips): one chip per code, for the runs table (like the failure class):
 *   coloured by severity (error red, warning amber, as the Health panel), with the onset
 *   step ("loss spike @1200") and the message as its tooltip.
 * - On the run page (#run-health present): the Health panel (severity, code, onset step,
 *   message, what to try), refreshed every 5 s while the run is live, and a marker on the
 *   chart of each diagnosed metric: a dashed line at the onset step and a band over the
 *   evidence window (step axis only). Charts are redrawn by Plotly.react, which drops
 *   shapes, so the markers are put back after every draw (plotly_afterplot). */
"use strict";

const Health = (() => {
  const { h, api, clear } = T;
  const LABEL = {
    nonfinite: "NaN/Inf", loss_spike: "loss spike", divergence: "divergence",
    memory_growth: "memory growth", throughput_drop: "throughput drop",
    grad_explosion: "grad explosion", grad_vanishing: "grad vanishing",
    amp_scale_collapse: "AMP scale collapse", recompiles: "recompiles",
    checkpoint_corrupt: "corrupt checkpoint",
  };

  // chips: the run's `health` from /api/v1/runs ({code, severity, step, metric, message,
  // count}, by onset step)
  function badges(chips) {
    return (chips || []).map((chip) => {
      const severity = chip.severity === "error" ? "error" : "warning";
      const at = chip.step === null || chip.step === undefined ? null : chip.step;
      const more = chip.count > 1 ? ` (+${chip.count - 1} more)` : "";
      const dataset = { code: chip.code, severity };
      if (at !== null) dataset.step = String(at);
      return h("span", {
        class: `health-badge ${severity}`, dataset,
        title: `${severity}${at === null ? "" : ` at step ${at}`}: ${chip.message}${more}`,
      }, LABEL[chip.code] || chip.code, at === null ? null : h("span", { class: "health-badge-step" }, ` @${at}`));
    });
  }

  let found = [];
  let ended = null; // {status, failure_class, failure_hint} of a run that failed or crashed

  function shapesFor(plot) {
    const keys = (plot.dataset.keys || "").split(",");
    const axis = document.getElementById("x-axis");
    if (axis && axis.value !== "step") return [];
    const out = [];
    for (const d of found) {
      if (!d.metric || d.step === null || d.step === undefined || !keys.includes(d.metric)) continue;
      const end = d.evidence && d.evidence.window ? d.evidence.window[1] : d.step;
      const warn = d.severity !== "error";
      out.push({ type: "rect", name: "health", xref: "x", yref: "paper", x0: d.step, x1: Math.max(end, d.step),
        y0: 0, y1: 1, fillcolor: warn ? "rgba(245, 158, 11, 0.10)" : "rgba(220, 38, 38, 0.08)",
        line: { width: 0 }, layer: "below" });
      out.push({ type: "line", name: "health", xref: "x", yref: "paper", x0: d.step, x1: d.step, y0: 0, y1: 1,
        line: { color: warn ? "#f59e0b" : "#dc2626", width: 1.5, dash: "dash" } });
    }
    return out;
  }

  function mark(plot) {
    if (!plot.layout) return;
    const ours = shapesFor(plot);
    const label = found.filter((d) => (plot.dataset.keys || "").split(",").includes(d.metric))
      .map((d) => `${d.code}@${d.step}`).join(",");
    const kept = (plot.layout.shapes || []).filter((s) => s.name !== "health");
    const have = (plot.layout.shapes || []).filter((s) => s.name === "health").length;
    plot.dataset.healthMarkers = ours.length ? label : "";
    if (have === ours.length && plot.dataset.healthDrawn === label) return;
    plot.dataset.healthDrawn = label;
    Plotly.relayout(plot, { shapes: [...kept, ...ours] });
  }

  function hook(plot) {
    if (plot.dataset.healthHooked) return;
    plot.dataset.healthHooked = "1";
    if (typeof plot.on === "function") plot.on("plotly_afterplot", () => mark(plot));
    else setTimeout(() => { plot.dataset.healthHooked = ""; hook(plot); }, 500);
  }

  function markAll() {
    for (const plot of document.querySelectorAll("#chart-groups .chart")) {
      if (typeof plot.on === "function") { hook(plot); mark(plot); }
    }
  }

  function renderPanel(panel) {
    panel.hidden = found.length === 0 && !ended;
    panel.classList.toggle("warning", !ended && found.length > 0 && found.every((d) => d.severity !== "error"));
    // A run that failed or crashed says so here too, as its failure box does: a clean list
    // of diagnoses under it means its series looked fine, not that the run did.
    const how = ended ? h("div", { class: "health-ended", id: "health-ended" },
      h("span", { class: "health-severity error" }, ended.status),
      h("strong", {}, ended.failure_class || "no failure class"),
      ended.failure_hint ? h("p", { class: "health-hint" }, ended.failure_hint) : null,
      found.length === 0 ? h("p", { class: "muted" }, "No problem found in its series.") : null) : null;
    clear(panel).append(...[
      h("h2", {}, "Health"),
      how, // null unless the run failed or crashed: append() would write "null"
      h("ul", { class: "health-list" }, found.map((d) => h("li", { class: `health-item ${d.severity}`, dataset: { code: d.code } },
        h("div", { class: "health-head" },
          h("span", { class: `health-severity ${d.severity}` }, d.severity),
          h("strong", {}, LABEL[d.code] || d.code),
          d.step !== null && d.step !== undefined ? h("span", { class: "muted" }, ` at step ${d.step}`) : null,
          d.metric ? h("code", {}, d.metric) : null),
        h("p", { class: "health-message" }, d.message),
        d.hint ? h("p", { class: "health-hint" }, h("em", {}, "Try: "), d.hint) : null))),
    ].filter(Boolean));
  }

  async function refresh(panel, runId) {
    try {
      const body = await api(`/api/v1/runs/${runId}/diagnoses`);
      found = body.diagnoses || [];
      const run = await api(`/api/v1/runs/${runId}`);
      const info = run.run || run;
      ended = ["failed", "crashed"].includes(info.status)
        ? { status: info.status, failure_class: info.failure_class, failure_hint: info.failure_hint } : null;
    } catch (err) {
      return; // the panel keeps what it showed; the run page shows connection problems
    }
    renderPanel(panel);
    markAll();
  }

  function start() {
    const panel = document.getElementById("run-health");
    if (!panel) return;
    const runId = Number(document.getElementById("main").dataset.runId);
    refresh(panel, runId);
    const live = document.getElementById("live-indicator");
    setInterval(() => { if (live && !live.hidden) refresh(panel, runId); }, 5000);
    const groups = document.getElementById("chart-groups");
    if (groups) new MutationObserver(() => markAll()).observe(groups, { childList: true, subtree: true });
    const axis = document.getElementById("x-axis");
    if (axis) axis.addEventListener("change", () => setTimeout(markAll, 0));
  }

  document.addEventListener("DOMContentLoaded", start);
  if (document.readyState !== "loading") start();
  return { badges, LABEL };
})();
