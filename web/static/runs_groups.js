/* The runs table grouped by a config key or a tag (?group=config.lr): one row per group,
 * computed on the server (GET /api/v1/runs?group=..., tracker/rules/group_series.py
 * group_table). A group row shows the group's value, its size ("5 runs"), its status counts
 * and, under each metric column, the mean of the members' last values with min–max below
 * it; under each config column, the value the members share ("varies" otherwise). Clicking
 * the row's toggle shows its members: the ordinary run rows (runs.js builds them, with their
 * checkboxes), so runs from several groups can be selected and compared. Which groups are
 * open is kept while the page lives (not in the URL). */
"use strict";

(() => {
  const { h } = T;
  const open = new Set(); // labels of the expanded groups

  function statusText(statuses) {
    return Object.entries(statuses).map(([status, n]) => `${n} ${status}`).join(", ");
  }

  /** The config cell of a group: the value every member shares, or "varies". */
  function configCell(key, members) {
    const seen = new Set(members.map((r) => JSON.stringify(r.config ? r.config[key] ?? null : null)));
    if (seen.size !== 1) return h("td", { class: "col-config muted" }, "varies");
    const value = JSON.parse([...seen][0]);
    return h("td", { class: "col-config", title: T.fmtConfig(value) },
      value === null ? h("span", { class: "muted" }, "–") : T.fmtConfig(value));
  }

  function metricCell(key, summary) {
    if (!summary || summary.mean === null) {
      return h("td", { class: "num col-metric" }, h("span", { class: "muted" }, "–"));
    }
    const range = `${T.fmtMetric(key, summary.min)}–${T.fmtMetric(key, summary.max)}`;
    return h("td", {
      class: "num col-metric group-metric-cell",
      title: `mean of ${summary.n} runs' last values; min ${summary.min}, max ${summary.max}`,
      dataset: { mean: summary.mean, min: summary.min, max: summary.max, n: summary.n },
    }, h("span", { class: "group-mean" }, T.fmtMetric(key, summary.mean)), h("span", { class: "group-range muted" }, range));
  }

  /**
   * The body rows of a grouped page: per group its row, then (when open) its members.
   * `ctx`: { row(run) -> <tr>, config: [keys], metrics: [keys], attrSpan, rerender() }.
   */
  function rows(page, ctx) {
    const byId = new Map(page.runs.map((r) => [r.id, r]));
    const out = [];
    for (const group of page.groups) {
      const members = group.run_ids.map((id) => byId.get(id)).filter(Boolean);
      const expanded = open.has(group.label);
      const toggle = h("button", {
        type: "button", class: "group-toggle", "aria-expanded": String(expanded),
        "aria-label": `${expanded ? "collapse" : "expand"} group ${group.label}`,
        title: expanded ? "hide this group's runs" : "show this group's runs",
        onclick: () => {
          if (open.has(group.label)) open.delete(group.label); else open.add(group.label);
          ctx.rerender();
        },
      }, expanded ? "▾" : "▸");
      const cells = [
        h("td", { class: "check" }, toggle),
        h("td", { colspan: ctx.attrSpan, class: "group-head" },
          h("strong", { class: "group-label" }, group.label),
          h("span", { class: "group-size" }, ` ${group.size} ${group.size === 1 ? "run" : "runs"}`),
          h("span", { class: "group-status muted" }, ` · ${statusText(group.statuses)}`)),
      ];
      for (const key of ctx.config) cells.push(configCell(key, members));
      for (const key of ctx.metrics) cells.push(metricCell(key, group.metrics[key]));
      out.push(h("tr", { class: "group-row", dataset: { group: group.label, size: group.size } }, cells));
      if (expanded) {
        for (const r of members) {
          const tr = ctx.row(r);
          tr.classList.add("group-member");
          tr.dataset.memberOf = group.label;
          out.push(tr);
        }
      }
    }
    return out;
  }

  /** The pager's line for a grouped page. */
  function info(page) {
    const shown = page.runs.length.toLocaleString();
    const more = page.truncated ? ` (the first ${shown} of ${page.total.toLocaleString()} matching runs)` : "";
    return `${page.groups.length} groups of ${shown} runs${more}`;
  }

  window.RunsGroups = { rows, info };
})();
