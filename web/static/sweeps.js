/* The sweeps page: every sweep that learns (GET /api/v1/sweeps) with its status, method,
 * pruner, metric and goal, trials done of its budget, best value and age. Refreshes every
 * 5 s; each handled answer is counted on <body data-sweeps-answered> so tests can wait. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const REFRESH_MS = 5000;
  let status = "";

  function sweepRow(s) {
    const best = s.best;
    return h("tr", { id: `sweep-${s.id}`, dataset: { sweepId: s.id, status: s.status } },
      h("td", {}, h("a", { href: `/sweeps/${s.id}`, class: "sweep-link" }, h("strong", {}, s.name)),
        h("div", { class: "muted small" }, `#${s.id} · ${s.project}`)),
      h("td", {}, SweepBadge(s.status)),
      h("td", {}, s.method),
      h("td", {}, s.prune),
      h("td", {}, h("code", {}, s.metric), h("span", { class: "muted small" }, ` ${s.goal}`)),
      h("td", { class: "num trials-done", title: Object.entries(s.counts).map(([k, n]) => `${n} ${k}`).join(", ") },
        `${s.done}/${s.trials}`),
      h("td", { class: "num best" }, best ? h("span", { title: `trial ${best.number}` }, T.fmtValue(best.value)) : ""),
      h("td", { class: "nowrap", title: T.fmtTime(s.created_at) }, T.fmtAge(s.created_at)));
  }

  /** A sweep's status as a badge: running, stopped (by a person) or finished. */
  function SweepBadge(value) {
    const cls = { running: "status-running", stopped: "status-killed", finished: "status-finished" }[value] || "";
    return h("span", { class: `badge ${cls}`, dataset: { status: value } }, value);
  }

  async function load() {
    const params = new URLSearchParams({ limit: 200 });
    if (status) params.set("status", status);
    const doc = await api(`/api/v1/sweeps?${params}`);
    clear(document.querySelector("#sweeps-table tbody")).append(...doc.sweeps.map(sweepRow));
    el("sweeps-empty").hidden = doc.sweeps.length > 0;
    el("sweeps-table").hidden = doc.sweeps.length === 0;
    document.body.dataset.sweepsAnswered = String(Number(document.body.dataset.sweepsAnswered || 0) + 1);
  }

  for (const b of document.querySelectorAll(".seg[data-status]")) {
    b.addEventListener("click", () => {
      status = b.dataset.status;
      for (const other of document.querySelectorAll(".seg[data-status]")) other.classList.toggle("active", other === b);
      load().catch((exc) => T.toast(exc.message));
    });
  }

  load().catch((exc) => T.toast(exc.message));
  T.poll(load, REFRESH_MS);
})();
