/* The runs table: server-side filter (query language), sort and pagination; columns for
 * config keys and metrics chosen by the user. Everything the user sets lives in the URL
 * (?q=&project=&tag=&sort=&order=&limit=&offset=&config=&metrics=&group=), so a view can be
 * shared. With group=config.<key> | tag.<key> | tags the table shows one row per group
 * (runs_groups.js); the workspace's charts group by their own ws_group. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const ATTR_COLUMNS = [
    { id: "starred", label: "★", sort: "starred", title: "sort by star" }, // starCell; sorted desc: starred first
    { id: "status", label: "Status", sort: "status" },
    { id: "name", label: "Name", sort: "name" },
    { id: "project", label: "Project", sort: "project" },
    { id: "tags", label: "Tags", sort: null },
    { id: "started", label: "Started", sort: "started" },
    { id: "duration", label: "Duration", sort: "duration" },
  ];
  const DEFAULT_METRICS = 3;
  const DEFAULT_CONFIG = 4;

  const el = (id) => document.getElementById(id);
  const state = readUrl();
  const selected = new Set();
  let columns = { config: [], metrics: [] };
  let page = null;
  let refresher = null;
  let asked = 0; // the latest request for rows: an answer to an older one is stale and dropped
  // Answers handled so far, drawn or dropped, on <body data-rows-answered>: what a test (or
  // a script driving the page) waits for instead of a pause.
  const answered = () => {
    const seen = Number(document.body.dataset.rowsAnswered || 0);
    document.body.dataset.rowsAnswered = String(seen + 1);
  };

  function readUrl() {
    const search = T.params();
    return {
      q: search.get("q") || "",
      project: search.get("project") || "",
      tags: T.listParam(search, "tag") || [],
      sort: search.get("sort") || "created",
      order: search.get("order") === "asc" ? "asc" : "desc",
      limit: Number(search.get("limit")) || 50,
      offset: Math.max(0, Number(search.get("offset")) || 0),
      config: T.listParam(search, "config"), // null: not chosen yet (defaults apply)
      metrics: T.listParam(search, "metrics"),
      deleted: search.get("deleted") === "1", // only soft-deleted runs (hidden otherwise)
      group: search.get("group") || "", // group the table by a config key or a tag
    };
  }

  function writeUrl(push) {
    const search = new URLSearchParams();
    if (state.q) search.set("q", state.q);
    if (state.project) search.set("project", state.project);
    if (state.tags.length) search.set("tag", state.tags.join(","));
    if (state.sort !== "created") search.set("sort", state.sort);
    if (state.order !== "desc") search.set("order", state.order);
    if (state.limit !== 50) search.set("limit", state.limit);
    if (state.offset) search.set("offset", state.offset);
    if (state.deleted) search.set("deleted", "1");
    if (state.group) search.set("group", state.group);
    search.set("config", (state.config || []).join(","));
    search.set("metrics", (state.metrics || []).join(","));
    for (const [k, v] of T.params()) if (k.startsWith("ws")) search.set(k, v); // workspace.js's
    const url = `${location.pathname}?${search.toString().replace(/%2C/g, ",").replace(/%2F/g, "/")}`;
    if (push) history.pushState(null, "", url);
    else history.replaceState(null, "", url);
  }

  function apiParams() {
    const search = new URLSearchParams({
      sort: state.sort, order: state.order, limit: state.limit, offset: state.offset,
    });
    if (state.q) search.set("q", state.q);
    if (state.project) search.set("project", state.project);
    for (const tag of state.tags) search.append("tag", tag);
    if (state.deleted) search.set("deleted", "1");
    if (state.config.length) search.set("config", state.config.join(","));
    if (state.metrics.length) search.set("metrics", state.metrics.join(","));
    if (state.group) { // no pages: the grouped runs (at most 500) are the CSV's rows too
      search.set("group", state.group);
      search.set("limit", 500);
      search.set("offset", 0);
    }
    return search;
  }

  // ---------------------------------------------------------------- loading

  async function load({ push = false } = {}) {
    writeUrl(push);
    const mine = ++asked;
    let doc;
    try {
      doc = await api(`/api/v1/runs?${apiParams()}`);
    } catch (exc) {
      answered();
      if (mine === asked) showError(exc);
      return;
    }
    answered();
    if (mine !== asked) return; // the view changed while this answer was on its way
    showError(null);
    page = doc;
    el("csv-link").href = `/api/v1/runs.csv?${apiParams()}`; // the CSV of exactly this view
    render();
    scheduleRefresh();
  }

  /** The server's message names the position: show it with a caret under that character. */
  function showError(exc) {
    const box = el("query-error");
    el("query-input").classList.toggle("invalid", Boolean(exc && exc.field === "q"));
    el("group-input").classList.toggle("invalid", Boolean(exc && exc.field === "group"));
    if (!exc) { box.hidden = true; return; }
    clear(box).append(h("strong", {}, exc.code === "invalid_query" ? "Query error: " : "Error: "), exc.message);
    const m = /^position (\d+):/.exec(exc.message);
    if (m && exc.field === "q") {
      const pos = Number(m[1]);
      box.append(h("pre", { class: "caret" }, state.q, "\n", " ".repeat(pos), "^"));
      const input = el("query-input");
      input.focus();
      input.setSelectionRange(pos, Math.min(pos + 1, state.q.length));
    }
    box.hidden = false;
  }

  // A running run's duration and metrics change: refresh quietly while any is on screen.
  function scheduleRefresh() {
    const live = page.runs.some((r) => r.status === "running" || r.status === "queued");
    if (live && !refresher) {
      refresher = T.poll(async () => {
        const mine = ++asked;
        const doc = await api(`/api/v1/runs?${apiParams()}`).finally(answered);
        if (mine !== asked) return true; // a load for a newer view is under way or done
        page = doc;
        render();
        return doc.runs.some((r) => r.status === "running" || r.status === "queued");
      }, 5000);
    } else if (!live && refresher) {
      refresher.stop();
      refresher = null;
    }
  }

  // ---------------------------------------------------------------- the table

  function sortKeyFor(column) {
    if (column.startsWith("config.") || column.startsWith("metrics.")) return column;
    return (ATTR_COLUMNS.find((c) => c.id === column) || {}).sort;
  }

  function headerCell(column, label, title) {
    const sort = sortKeyFor(column);
    if (!sort) return h("th", {}, label);
    const active = state.sort === sort;
    const arrow = active ? (state.order === "desc" ? " ▼" : " ▲") : "";
    return h("th", { class: active ? "sorted" : null, "aria-sort": active ? (state.order === "desc" ? "descending" : "ascending") : null },
      h("button", {
        type: "button", class: "sort", title: title || `sort by ${label}`, dataset: { sort },
        onclick: () => {
          state.order = active && state.order === "desc" ? "asc" : "desc";
          state.sort = sort;
          state.offset = 0;
          load({ push: true });
        },
      }, label, h("span", { class: "arrow" }, arrow)));
  }

  function renderHead() {
    const head = clear(el("runs-head"));
    const all = h("input", { type: "checkbox", "aria-label": "select all on this page", onchange: (ev) => {
      for (const r of page.runs) { if (ev.target.checked) selected.add(r.id); else selected.delete(r.id); }
      render();
    } });
    all.checked = page.runs.length > 0 && page.runs.every((r) => selected.has(r.id));
    head.append(h("th", { class: "check" }, all));
    for (const c of ATTR_COLUMNS) head.append(headerCell(c.id, c.label, c.title));
    for (const key of state.config) head.append(headerCell(`config.${key}`, key, `config ${key}`));
    for (const key of state.metrics) head.append(headerCell(`metrics.${key}`, key, `last value of ${key}`));
    head.querySelectorAll("th").forEach((th, i) => {
      if (i > ATTR_COLUMNS.length && i <= ATTR_COLUMNS.length + state.config.length) th.classList.add("col-config");
      if (i > ATTR_COLUMNS.length + state.config.length) th.classList.add("col-metric", "num");
    });
    // A row above says which columns are config values and which are metrics.
    const groups = clear(el("runs-groups"));
    groups.append(h("th", { colspan: ATTR_COLUMNS.length + 1, class: "group-run" }, "Run"));
    if (state.config.length) groups.append(h("th", { colspan: state.config.length, class: "col-config group-config" }, "Config"));
    if (state.metrics.length) groups.append(h("th", { colspan: state.metrics.length, class: "col-metric group-metric" }, "Metrics (last value)"));
  }

  /** The star of a run: a toggle (PATCH /api/v1/runs/<id>/star, admin; an error is a toast). */
  function starCell(r) {
    const button = h("button", { type: "button", class: `star-toggle${r.starred ? " on" : ""}`,
      "aria-pressed": r.starred ? "true" : "false", "aria-label": `star run ${r.id}`,
      title: r.starred ? "Starred: click to remove the star" : "Star this run" }, r.starred ? "★" : "☆");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        Object.assign(r, await api(`/api/v1/runs/${r.id}/star`, { method: "PATCH", body: { starred: !r.starred } }));
        button.replaceWith(starCell(r).firstChild);
      } catch (exc) {
        button.disabled = false;
        T.toast(`Star not changed: ${exc.message}`);
      }
    });
    return h("td", { class: "col-star" }, button);
  }

  function row(r) {
    const box = h("input", { type: "checkbox", "aria-label": `select run ${r.id}`, onchange: (ev) => {
      if (ev.target.checked) selected.add(r.id); else selected.delete(r.id);
      updateSelection();
    } });
    box.checked = selected.has(r.id);
    const cells = [
      h("td", { class: "check" }, box),
      starCell(r),
      h("td", {}, T.statusBadge(r.status, r.failure_class, r.failure_hint), Health.badges(r.health)),
      h("td", { class: "name" }, T.runLink(r), h("span", { class: "muted id" }, ` #${r.id}`),
        r.deleted_at ? h("span", { class: "tag deleted", title: `deleted ${T.fmtTime(r.deleted_at)}` }, "deleted") : null,
        r.notes_preview ? h("span", { class: "notes-preview", title: r.notes_preview + (r.notes_truncated ? "…" : "") },
          r.notes_preview.split("\n")[0]) : null),
      h("td", {}, r.project),
      h("td", {}, (r.tags || []).map((t) => h("span", { class: "tag" }, t))),
      h("td", { class: "nowrap", title: T.fmtTime(r.created_at) }, T.fmtTime(r.started_at)),
      h("td", { class: "num" }, T.fmtDuration(T.runDuration(r))),
    ];
    for (const key of state.config) {
      const value = r.config ? r.config[key] : undefined;
      cells.push(h("td", { class: "col-config", title: value === undefined ? "" : T.fmtConfig(value) },
        value === null || value === undefined ? h("span", { class: "muted" }, "–") : T.fmtConfig(value)));
    }
    for (const key of state.metrics) {
      const value = r.metrics ? r.metrics[key] : undefined;
      const bad = typeof value === "string";
      cells.push(h("td", { class: `num col-metric${bad ? " nonfinite" : ""}` },
        value === undefined ? h("span", { class: "muted" }, "–") : T.fmtMetric(key, value)));
    }
    return h("tr", { dataset: { runId: r.id, status: r.status }, class: selected.has(r.id) ? "selected" : null }, cells);
  }

  function render() {
    renderHead();
    el("runs-empty").hidden = page.runs.length > 0;
    if (page.groups) { // grouped: every group on one page, members shown on demand
      clear(el("runs-body")).append(...RunsGroups.rows(page, {
        row, config: state.config, metrics: state.metrics, attrSpan: ATTR_COLUMNS.length, rerender: render,
      }));
      el("page-info").textContent = RunsGroups.info(page);
      el("prev-page").disabled = el("next-page").disabled = true;
    } else {
      clear(el("runs-body")).append(...page.runs.map(row));
      const first = page.total ? page.offset + 1 : 0;
      const last = page.offset + page.runs.length;
      el("page-info").textContent = `${first.toLocaleString()}–${last.toLocaleString()} of ${page.total.toLocaleString()} runs`;
      el("prev-page").disabled = page.offset === 0;
      el("next-page").disabled = last >= page.total;
    }
    const tags = new Set(page.runs.flatMap((r) => r.tags || []));
    clear(el("tag-list")).append(...[...tags].sort().map((t) => h("option", { value: t })));
    renderGroupKeys();
    updateSelection();
  }

  function updateSelection() {
    const n = selected.size;
    el("selection-count").textContent = n ? `${n} selected` : "";
    const button = el("compare-btn");
    button.disabled = n < 2 || n > 200;
    button.title = n < 2 ? "select 2 to 200 runs to compare" : "";
    for (const tr of el("runs-body").children) {
      if (tr.dataset.runId) tr.classList.toggle("selected", selected.has(Number(tr.dataset.runId)));
    }
    // Select-all follows the rows: checked when every row is, mixed when some are.
    const all = el("runs-head").querySelector("input[type=checkbox]");
    if (all && page) {
      const ticked = page.runs.filter((r) => selected.has(r.id)).length;
      all.checked = page.runs.length > 0 && ticked === page.runs.length;
      all.indeterminate = ticked > 0 && ticked < page.runs.length;
    }
  }

  // ---------------------------------------------------------------- columns

  function columnList(container, keys, chosen, filter) {
    const text = filter.toLowerCase();
    clear(container).append(...keys.filter((k) => k.toLowerCase().includes(text)).map((key) => {
      const box = h("input", { type: "checkbox", value: key, onchange: (ev) => {
        const i = chosen.indexOf(key);
        if (ev.target.checked && i < 0) chosen.push(key);
        if (!ev.target.checked && i >= 0) chosen.splice(i, 1);
        load();
      } });
      box.checked = chosen.includes(key);
      return h("label", { class: "col-option" }, box, h("span", {}, key));
    }));
    if (!container.children.length) container.append(h("p", { class: "muted" }, "none"));
  }

  function renderColumnPicker() {
    columnList(el("config-cols"), columns.config, state.config, el("config-col-filter").value);
    columnList(el("metric-cols"), columns.metrics, state.metrics, el("metric-col-filter").value);
  }

  /** The group-by suggestions: config keys, the keys of key=value tags on screen, tags. */
  function renderGroupKeys() {
    const tagKeys = new Set((page ? page.runs : []).flatMap((r) => r.tags || []).filter((t) => t.includes("="))
      .map((t) => `tag.${t.split("=")[0]}`));
    clear(el("group-keys")).append(...[...columns.config.map((k) => `config.${k}`), ...[...tagKeys].sort(), "tags"]
      .map((v) => h("option", { value: v })));
  }

  async function loadColumns() {
    const params = state.project ? `?project=${encodeURIComponent(state.project)}` : "";
    columns = await T.shared(`/api/v1/runs/columns${params}`); // the workspace asks too
    if (state.metrics === null) {
      const visible = columns.metrics.filter((k) => !k.startsWith("sys/"));
      const preferred = [...visible.filter((k) => k.startsWith("val/")), ...visible.filter((k) => !k.startsWith("val/"))];
      state.metrics = preferred.slice(0, DEFAULT_METRICS);
    }
    if (state.config === null) state.config = await varyingConfigKeys(columns.config);
    renderColumnPicker();
  }

  /** Default config columns: the keys whose values differ between the newest runs. */
  async function varyingConfigKeys(keys) {
    if (!keys.length) return [];
    const params = new URLSearchParams({ limit: 100, config: keys.slice(0, 40).join(",") });
    if (state.project) params.set("project", state.project);
    const doc = await api(`/api/v1/runs?${params}`);
    const varying = keys.slice(0, 40).filter((k) => {
      const seen = new Set(doc.runs.filter((r) => r.config[k] !== null).map((r) => JSON.stringify(r.config[k])));
      return seen.size > 1;
    });
    return (varying.length ? varying : keys).slice(0, DEFAULT_CONFIG);
  }

  // ---------------------------------------------------------------- controls

  async function loadProjects() {
    const doc = await api("/api/v1/projects");
    const select = el("project-select");
    select.append(...doc.projects.map((p) => h("option", { value: p }, p)));
    select.value = state.project;
  }

  function readForm() {
    state.q = el("query-input").value.trim();
    state.project = el("project-select").value;
    state.tags = el("tag-input").value.split(",").map((t) => t.trim()).filter(Boolean);
    state.deleted = el("deleted-toggle").checked;
    state.group = el("group-input").value.trim();
    state.offset = 0;
  }

  el("filter-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    readForm();
    load({ push: true });
  });
  el("deleted-toggle").addEventListener("change", () => {
    readForm();
    load({ push: true });
  });
  el("project-select").addEventListener("change", async () => {
    readForm();
    await loadColumns();
    load({ push: true });
  });
  el("columns-btn").addEventListener("click", () => {
    const panel = el("columns-panel");
    panel.hidden = !panel.hidden;
    el("columns-btn").setAttribute("aria-expanded", String(!panel.hidden));
  });
  el("config-col-filter").addEventListener("input", renderColumnPicker);
  el("metric-col-filter").addEventListener("input", renderColumnPicker);
  el("prev-page").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); load({ push: true }); });
  el("next-page").addEventListener("click", () => { state.offset += state.limit; load({ push: true }); });
  el("page-size").addEventListener("change", (ev) => { state.limit = Number(ev.target.value); state.offset = 0; load(); });
  el("compare-btn").addEventListener("click", () => {
    window.location.assign(`/compare?runs=${[...selected].sort((a, b) => a - b).join(",")}`);
  });
  window.addEventListener("popstate", () => {
    Object.assign(state, readUrl());
    syncForm();
    load();
  });

  function syncForm() {
    el("query-input").value = state.q;
    el("project-select").value = state.project;
    el("tag-input").value = state.tags.join(", ");
    el("deleted-toggle").checked = state.deleted;
    el("group-input").value = state.group;
    el("page-size").value = String(state.limit);
  }

  async function start() {
    syncForm();
    try {
      await Promise.all([loadProjects(), loadColumns()]);
    } catch (exc) {
      T.toast(exc.message);
    }
    if (!el("page-size").value) el("page-size").value = "50";
    syncForm();
    state.config = state.config || [];
    state.metrics = state.metrics || [];
    load();
  }

  start();
})();
