/* The runs page's workspace: one chart panel per metric, each drawing every run the table's
 * query selects (its first `limit` runs in the table's order), from
 * GET /api/v1/workspace/series (many runs x many metrics, downsampled on the server to the
 * panel's width by the one bucket rule): a first draw asks a metric at a time, in order, and
 * draws each panel as its answer comes (see load); a live refresh asks once for all.
 * Group-by draws one line per group (mean or median) with a band (min-max or +-std),
 * aggregated on the server (tracker/rules/group_series.py).
 *
 * A run has one colour everywhere (a hash of its id into PALETTE: every panel, the group
 * table and a swatch in the runs table); hovering a row of the runs table, or selecting
 * rows, highlights those runs in every panel. Hover on a line shows the run's name and the
 * config keys whose values differ between the drawn runs.
 *
 * Everything the user sets lives in the URL, next to the table's own parameters (runs.js
 * keeps every `ws*` parameter): ws=1 (workspace shown), ws_keys, ws_filter, ws_cols,
 * ws_x, ws_smooth, ws_limit, ws_group, ws_agg, ws_band, and ws_view (a named view: opening
 * `/?ws_view=NAME` applies the view saved under that name). Named views are stored on the
 * server (GET/POST /api/v1/views, POST /api/v1/views/delete; saving needs an admin token).
 *
 * When every panel has drawn, #ws-grid gets data-drawn="1" (the benchmark and the browser
 * tests wait for it). Running runs are polled every 5 s, like the run page; #ws-grid has
 * data-polling="1" meanwhile and "0" once no run drawn is running any more. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const root = el("workspace");
  if (!root) return;

  const PALETTE = [
    "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d",
    "#ea580c", "#4f46e5", "#0d9488", "#b91c1c", "#9333ea", "#ca8a04", "#0369a1", "#be185d",
    "#15803d", "#c2410c", "#6d28d9", "#475569",
  ];
  const MAX_PANELS = 24;
  const QUERY_KEYS = ["q", "project", "tag", "deleted", "sort", "order"];
  const WS_KEYS = ["ws", "ws_keys", "ws_filter", "ws_cols", "ws_x", "ws_smooth", "ws_limit", "ws_group", "ws_agg", "ws_band", "ws_view"];

  /** A run's colour: the same in every panel and every visit (FNV-1a of its id). */
  function runColor(id) {
    let x = 2166136261;
    for (const ch of String(id)) { x ^= ch.charCodeAt(0); x = Math.imul(x, 16777619) >>> 0; }
    return PALETTE[x % PALETTE.length];
  }

  const state = readUrl();
  let allKeys = [];
  let configKeys = [];
  let doc = null; // the last answer of /api/v1/workspace/series
  let loadedFor = null; // the query + settings `doc` answers
  // Metrics per request of a load (see load); ?ws_per_request= overrides it (the benchmark
  // compares it with one request for all).
  const KEYS_PER_REQUEST = Number(new URLSearchParams(location.search).get("ws_per_request")) || 1;
  let refresher = null;
  let plotlyReady = null;
  let highlighted = new Set();
  let loading = 0;
  let columnsFor = null; // the project whose keys allKeys/configKeys hold
  let drawnShape = ""; // the group table shown, and the columns, when the panels were sized
  let resizeAll = false; // the panels were drawn while hidden: size them on the next draw

  function readUrl() {
    const s = T.params();
    const num = (name, dflt, lo, hi) => {
      const v = Number(s.get(name));
      return s.has(name) && Number.isFinite(v) ? Math.min(hi, Math.max(lo, v)) : dflt;
    };
    return {
      shown: s.get("ws") === "1",
      keys: T.listParam(s, "ws_keys"), // null: every key the filter matches
      filter: s.get("ws_filter") || "",
      cols: num("ws_cols", 3, 1, 4),
      x: ["step", "relative", "wall"].includes(s.get("ws_x")) ? s.get("ws_x") : "step",
      smooth: num("ws_smooth", 0, 0, 0.99),
      limit: num("ws_limit", 100, 1, 500),
      group: s.get("ws_group") || "",
      agg: s.get("ws_agg") === "median" ? "median" : "mean",
      band: ["std", "none"].includes(s.get("ws_band")) ? s.get("ws_band") : "minmax",
      view: s.get("ws_view") || "",
    };
  }

  /** The workspace's settings as URL parameters (defaults left out). */
  function wsParams() {
    const out = {};
    if (state.shown) out.ws = "1";
    if (state.keys) out.ws_keys = state.keys.join(",");
    if (state.filter) out.ws_filter = state.filter;
    if (state.cols !== 3) out.ws_cols = String(state.cols);
    if (state.x !== "step") out.ws_x = state.x;
    if (state.smooth) out.ws_smooth = String(state.smooth);
    if (state.limit !== 100) out.ws_limit = String(state.limit);
    if (state.group) out.ws_group = state.group;
    if (state.agg !== "mean") out.ws_agg = state.agg;
    if (state.band !== "minmax") out.ws_band = state.band;
    if (state.view) out.ws_view = state.view;
    return out;
  }

  function writeUrl() {
    const search = T.params();
    for (const k of WS_KEYS) search.delete(k);
    for (const [k, v] of Object.entries(wsParams())) search.set(k, v);
    const text = search.toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
    history.replaceState(null, "", `${location.pathname}${text ? `?${text}` : ""}`);
  }

  /** The table's query as runs.js wrote it into the URL. */
  function tableQuery() {
    const s = T.params();
    const out = {};
    for (const k of QUERY_KEYS) if (s.get(k)) out[k] = s.get(k);
    return out;
  }

  // ------------------------------------------------------------------ plotly, lazily

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.addEventListener("load", resolve);
      script.addEventListener("error", () => reject(new Error(`${src} could not be loaded`)));
      document.head.append(script);
    });
  }

  /** plotly.js and charts.js: the runs table does not need them, the workspace loads them once. */
  function needPlotly() {
    if (!plotlyReady) {
      plotlyReady = (async () => {
        if (typeof Plotly === "undefined") await loadScript(root.dataset.plotly);
        if (typeof Charts === "undefined") await loadScript(root.dataset.charts);
      })();
    }
    return plotlyReady;
  }

  // ------------------------------------------------------------------ which panels

  function filterRegex() {
    if (!state.filter) return null;
    try {
      return new RegExp(state.filter);
    } catch (_exc) {
      return undefined; // invalid: shown as such, nothing drawn
    }
  }

  function panelKeys() {
    if (state.keys) return state.keys.slice(0, MAX_PANELS);
    const re = filterRegex();
    if (re === undefined) return [];
    const keys = re ? allKeys.filter((k) => re.test(k)) : allKeys.filter((k) => !k.startsWith("sys/"));
    return keys.slice(0, MAX_PANELS);
  }

  function renderPicker() {
    const box = clear(el("ws-picker"));
    const chosen = new Set(panelKeys());
    const actions = h("div", { class: "ws-picker-actions" },
      h("button", { type: "button", class: "btn small", onclick: () => { state.keys = null; changed(); } }, "Follow the regex"),
      h("button", { type: "button", class: "btn small", onclick: () => { state.keys = []; changed(); } }, "None"));
    box.append(actions, ...allKeys.map((key) => {
      const input = h("input", { type: "checkbox", value: key, onchange: (ev) => {
        const keys = state.keys ? state.keys.slice() : panelKeys();
        const i = keys.indexOf(key);
        if (ev.target.checked && i < 0) keys.push(key);
        if (!ev.target.checked && i >= 0) keys.splice(i, 1);
        state.keys = keys;
        changed();
      } });
      input.checked = chosen.has(key);
      return h("label", {}, input, key);
    }));
  }

  function renderGroupOptions() {
    const select = el("ws-group");
    const tagKeys = new Set();
    for (const r of (doc && doc.runs) || []) {
      for (const t of r.tags || []) if (t.includes("=")) tagKeys.add(t.split("=")[0]);
    }
    const options = [
      ...configKeys.map((k) => [`config.${k}`, `config.${k}`]),
      ...[...tagKeys].sort().map((k) => [`tag.${k}`, `tag ${k}`]),
      ["tags", "tags (all of them)"],
    ];
    if (state.group && !options.some(([v]) => v === state.group)) options.unshift([state.group, state.group]);
    clear(select).append(h("option", { value: "" }, "no grouping"), ...options.map(([v, label]) => h("option", { value: v }, label)));
    select.value = state.group;
  }

  // ------------------------------------------------------------------ loading

  function seriesUrl(keys) {
    const width = el("ws-grid").clientWidth || 1200;
    const panel = (width - 12 * (state.cols - 1)) / state.cols;
    const buckets = Math.max(40, Math.min(400, Math.round(panel / 4)));
    const search = new URLSearchParams({ keys: keys.join(","), limit: state.limit, max_buckets: buckets });
    const query = tableQuery();
    for (const [k, v] of Object.entries(query)) {
      if (k === "tag") for (const t of v.split(",")) search.append("tag", t.trim());
      else search.set(k, v);
    }
    if (state.group) {
      search.set("group", state.group);
      search.set("agg", state.agg);
      search.set("band", state.band);
      search.set("series", "0"); // the groups are drawn, not their members' lines
    }
    if (state.x !== "step") search.set("fields", "wall_time");
    return `/api/v1/workspace/series?${search.toString().replace(/%2C/g, ",").replace(/%2F/g, "/")}`;
  }

  async function load({ quiet = false } = {}) {
    if (!state.shown) return;
    const keys = panelKeys();
    const url = seriesUrl(keys);
    el("ws-grid").dataset.drawn = "0";
    if (!keys.length) {
      doc = null;
      loadedFor = url;
      clear(el("ws-grid"));
      showEmpty(filterRegex() === undefined ? `The metric filter is not a valid regular expression: ${state.filter}` : "No metric matches: choose panels or change the metric filter.");
      el("ws-grid").dataset.drawn = "1";
      return;
    }
    const ticket = ++loading;
    if (!quiet) el("ws-info").textContent = "loading…";
    // A metric per request, in order: the server reads the next while the browser draws this
    // one, so the first panel shows in about a quarter of the time of one request for all.
    // A live refresh (quiet) asks once for all: every panel shows the same moment of the runs.
    const per = quiet ? keys.length : KEYS_PER_REQUEST;
    const chunks = [];
    for (let i = 0; i < keys.length; i += per) chunks.push(keys.slice(i, i + per));
    let next = api(seriesUrl(chunks[0]));
    const parts = [];
    for (let i = 0; i < chunks.length; i += 1) {
      let answer;
      try {
        [answer] = await Promise.all([next, needPlotly()]);
      } catch (exc) {
        if (ticket === loading) { el("ws-info").textContent = ""; showEmpty(`Error: ${exc.message}`); }
        return;
      }
      if (ticket !== loading) return; // a newer request is on its way
      if (i + 1 < chunks.length) {
        next = api(seriesUrl(chunks[i + 1]));
        next.catch(() => {}); // seen by the next turn of the loop, or dropped with a newer load
      }
      parts.push(answer);
      const last = i + 1 === chunks.length;
      doc = { ...answer, keys: parts.flatMap((a) => a.keys), unknown_keys: parts.flatMap((a) => a.unknown_keys) };
      if (last) loadedFor = url;
      showEmpty(null);
      if (i === 0) renderGroupOptions();
      await draw({ keys: answer.keys, final: last });
      if (i === 0 && window.performance && performance.mark) performance.mark("workspace-first-drawn");
    }
    scheduleRefresh();
  }

  function showEmpty(text) {
    const p = el("ws-empty");
    p.hidden = !text;
    p.textContent = text || "";
  }

  // #ws-grid data-polling="1" while running runs are polled, "0" once polling ended
  function polling(on) { el("ws-grid").dataset.polling = on ? "1" : "0"; }

  function scheduleRefresh() {
    const live = doc && doc.runs.some((r) => r.status === "running" || r.status === "queued");
    if (live && !refresher) {
      const mine = T.poll(async () => {
        await load({ quiet: true });
        const still = Boolean(doc && doc.runs.some((r) => r.status === "running" || r.status === "queued"));
        if (!still && refresher === mine) { refresher = null; polling(false); } // ends itself
        return still;
      }, 5000);
      refresher = mine;
      polling(true);
    } else if (!live && refresher) {
      refresher.stop();
      refresher = null;
      polling(false);
    }
  }

  // ------------------------------------------------------------------ drawing

  function info() {
    const shown = doc.runs.length;
    const parts = [`showing ${shown.toLocaleString()} of ${doc.total.toLocaleString()} runs`];
    if (doc.groups.length) parts.push(`${doc.groups.length} groups`);
    if (doc.unknown_keys.length) parts.push(`no run logged ${doc.unknown_keys.join(", ")}`);
    el("ws-info").textContent = parts.join(" · ");
  }

  function configText(run) {
    const pairs = doc.differing.slice(0, 8).map((k) => `${k}=${T.fmtConfig(run.config[k])}`);
    return T.plotText(pairs.join("  "));
  }

  function xOf(p, axis) {
    if (state.x === "step") return p.step;
    if (state.x === "wall") return Charts.xValues({ last_step: p.step, wall_time: p.wall_time }, axis);
    const t0 = p.wall_time.find((t) => t !== null && t !== undefined);
    return p.wall_time.map((t) => (t === null || t === undefined ? null : (t - t0) / axis.unit));
  }

  /** One trace per colour, not per run: the runs of a colour are one line broken by gaps
   * (plotly's cost is per trace: 100 traces per panel took seconds to draw). Each point
   * carries its run (customdata: the run id; text: its hover label, one string per run,
   * shared by its points: no array per point to build and collect); meta.runs lists a
   * trace's runs. */
  function runTraces(key, axis) {
    const byColor = new Map();
    for (const run of doc.runs) {
      const p = key.series[String(run.id)];
      if (!p || !p.step.length) continue;
      const c = runColor(run.id);
      if (!byColor.has(c)) byColor.set(c, { x: [], y: [], customdata: [], text: [], runs: [], single: false });
      const t = byColor.get(c);
      const label = `<b>${T.plotText(run.name || `run ${run.id}`)}</b> #${run.id}<br>${configText(run)}`;
      const xs = xOf(p, axis);
      const ys = state.smooth ? Charts.ema(p.last, state.smooth) : p.last;
      for (let i = 0; i < xs.length; i += 1) {
        t.x.push(xs[i]);
        t.y.push(ys[i]);
        t.customdata.push(run.id);
        t.text.push(label);
      }
      t.x.push(null);
      t.y.push(null);
      t.customdata.push(run.id);
      t.text.push(label);
      t.runs.push(run.id);
      t.single = t.single || xs.length < 2; // a lone point shows only as a marker
    }
    return [...byColor].map(([c, t]) => ({
      type: "scatter", mode: t.single ? "lines+markers" : "lines", x: t.x, y: t.y, customdata: t.customdata, text: t.text,
      line: { color: c, width: 1.4 }, marker: { color: c, size: 5 }, connectgaps: false,
      hovertemplate: "%{text}<br>%{x}: %{y}<extra></extra>", showlegend: false,
      meta: { runs: t.runs, role: "runs" },
    }));
  }

  /** The highlighted runs drawn again on top, thick: one trace per run. */
  function highlightTraces(base) {
    const out = [];
    for (const t of base) {
      const runs = (t.meta && t.meta.runs) || [];
      if (!runs.some((id) => highlighted.has(id))) continue;
      for (const id of runs) {
        if (!highlighted.has(id)) continue;
        const x = [];
        const y = [];
        t.customdata.forEach((d, i) => { if (d === id && t.x[i] !== null) { x.push(t.x[i]); y.push(t.y[i]); } });
        out.push({
          type: "scatter", mode: "lines", x, y, line: { color: t.line.color, width: 3 }, hoverinfo: "skip",
          showlegend: false, meta: { run: id, role: "highlight" },
        });
      }
    }
    return out;
  }

  function groupColor(i) { return PALETTE[i % PALETTE.length]; }

  function groupTraces(key) {
    const traces = [];
    doc.groups.forEach((g, i) => {
      const s = key.groups[i];
      if (!s || !s.step.length) return;
      const c = groupColor(i);
      const label = T.plotText(`${g.label} (${g.size} run${g.size === 1 ? "" : "s"})`);
      const y = state.smooth ? Charts.ema(s.center, state.smooth) : s.center;
      if (state.band !== "none") {
        const edge = { type: "scatter", mode: "lines", x: s.step, line: { width: 0, color: c }, hoverinfo: "skip", showlegend: false, legendgroup: label };
        traces.push({ ...edge, y: s.lo, meta: { group: i, role: "band-lo" } });
        traces.push({ ...edge, y: s.hi, fill: "tonexty", fillcolor: Charts.withAlpha(c, 0.18), meta: { group: i, role: "band-hi" } });
      }
      traces.push({
        type: "scatter", mode: s.step.length < 2 ? "markers" : "lines", x: s.step, y, name: label,
        line: { color: c, width: 2 }, marker: { color: c, size: 5 }, legendgroup: label, showlegend: false,
        customdata: s.lo.map((lo, j) => [lo, s.hi[j], s.n[j]]),
        hovertemplate: `<b>${label}</b><br>step %{x}: ${state.agg} %{y}` +
          (state.band === "none" ? "" : "<br>band %{customdata[0]} – %{customdata[1]}") + "<br>%{customdata[2]} runs here<extra></extra>",
        meta: { group: i, role: "center" },
      });
    });
    return traces;
  }

  function axisFor(key) {
    if (state.group || state.x === "step") return Charts.xAxis("step", 0, 0);
    let lo = Infinity;
    let hi = -Infinity;
    for (const p of Object.values(key.series)) {
      for (const t of p.wall_time || []) if (t !== null && t !== undefined) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
    }
    return Charts.xAxis(state.x, lo, hi - lo);
  }

  function panel(key) {
    const chart = h("div", { class: "ws-chart", dataset: { key: key.key } });
    const box = h("div", { class: "ws-panel", dataset: { key: key.key } }, h("h3", { title: key.key }, key.key), chart);
    return [box, chart];
  }

  /** Draws the panels of `keys` (all of `doc`'s by default); `final`: `doc` is complete
   * (a load draws its metrics a request at a time, in order: see load). */
  async function draw({ keys = doc.keys, final = true } = {}) {
    const grid = el("ws-grid");
    grid.style.setProperty("--ws-cols", String(state.cols));
    info();
    renderGroupTable();
    const existing = new Map([...grid.querySelectorAll(".ws-panel")].map((p) => [p.dataset.key, p]));
    const wanted = doc.keys.map((k) => k.key);
    const names = [...existing.keys()];
    const n = Math.min(names.length, wanted.length);
    if (names.slice(0, n).join("\n") !== wanted.slice(0, n).join("\n")) {
      clear(grid);
      existing.clear();
    } else if (final) {
      for (const name of names.slice(wanted.length)) { existing.get(name).remove(); existing.delete(name); }
    }
    const draws = keys.map((key) => {
      let chart;
      if (existing.has(key.key)) {
        chart = existing.get(key.key).querySelector(".ws-chart");
      } else {
        let box;
        [box, chart] = panel(key);
        grid.append(box);
      }
      const axis = axisFor(key);
      const traces = state.group ? groupTraces(key) : runTraces(key, axis);
      // no legend: the group table above the panels is it (label, colour, size)
      const layout = Charts.layout({ axis, height: 260, legend: false, revision: `${key.key}|${state.x}|${state.group}` });
      layout.margin = { l: 56, r: 10, t: 6, b: 36 };
      // Fixed margins: plotly's automargin draws a panel twice (half of each panel's cost).
      layout.xaxis.automargin = false;
      layout.yaxis.automargin = false;
      layout.hovermode = "closest";
      return Plotly.react(chart, traces, layout, { ...Charts.PLOT_CONFIG, responsive: true }).then(() => wireHover(chart));
    });
    if (final && !doc.keys.length) showEmpty(`No run logged ${doc.unknown_keys.join(", ")}.`);
    await Promise.all(draws);
    if (!final) return;
    // The group table beside the grid, or another column count, changes each panel's width:
    // plotly follows a window resize by itself, not a change of its container.
    // (A panel made by this draw already has its width: only older ones are resized.)
    const shape = `${doc.groups.length > 0}|${state.cols}`;
    if (shape !== drawnShape && (drawnShape !== "" || resizeAll)) {
      await Promise.all([...grid.querySelectorAll(".ws-chart")].map((c) => Plotly.Plots.resize(c)));
    }
    drawnShape = shape;
    resizeAll = false;
    applyHighlight();
    colourTable();
    grid.dataset.drawn = "1";
    if (window.performance && performance.mark) performance.mark("workspace-drawn");
  }

  // ------------------------------------------------------------------ groups table

  function renderGroupTable() {
    const box = el("ws-groups");
    box.hidden = !doc.groups.length;
    clear(box);
    if (!doc.groups.length) return;
    const names = new Map(doc.runs.map((r) => [r.id, r]));
    const body = h("tbody", {});
    doc.groups.forEach((g, i) => {
      const members = h("tr", { class: "ws-members", hidden: true },
        h("td", { colspan: 3 }, g.runs.map((id) => {
          const r = names.get(id);
          return h("span", { class: "ws-member" }, h("span", { class: "ws-swatch", style: `background:${runColor(id)}` }),
            h("a", { href: `/runs/${id}` }, r ? r.name : `run ${id}`), " ");
        })));
      const toggle = h("button", { type: "button", class: "btn small ghost", "aria-expanded": "false", onclick: () => {
        members.hidden = !members.hidden;
        toggle.setAttribute("aria-expanded", String(!members.hidden));
        toggle.textContent = members.hidden ? "▸" : "▾";
      } }, "▸");
      body.append(
        h("tr", { class: "ws-group-row", dataset: { group: g.label } },
          h("td", {}, toggle),
          h("td", {}, h("span", { class: "ws-swatch", style: `background:${groupColor(i)}` }), g.label),
          h("td", { class: "num ws-size" }, `${g.size} run${g.size === 1 ? "" : "s"}`)),
        members);
    });
    box.append(h("table", { class: "data-table compact" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, `Group (${state.agg}, band ${state.band})`), h("th", {}, "Size"))), body));
  }

  // ------------------------------------------------------------------ highlight

  function applyHighlight() {
    if (typeof Plotly === "undefined" || !doc || state.group) return;
    const any = highlighted.size > 0;
    for (const chart of el("ws-grid").querySelectorAll(".ws-chart")) {
      if (!chart.data || !chart.layout) continue;
      const base = chart.data.filter((t) => t.meta && t.meta.role === "runs");
      if (!any && base.length === chart.data.length && base.every((t) => (t.opacity ?? 1) === 1)) continue;
      for (const t of base) t.opacity = any ? 0.2 : 1;
      Plotly.react(chart, [...base, ...(any ? highlightTraces(base) : [])], chart.layout);
    }
  }

  function selectedRuns() {
    return new Set([...document.querySelectorAll("#runs-body tr.selected")].map((tr) => Number(tr.dataset.runId)));
  }

  function setHighlight(ids) {
    const same = ids.size === highlighted.size && [...ids].every((i) => highlighted.has(i));
    if (same) return;
    highlighted = ids;
    if (state.shown) applyHighlight();
  }

  function wireHover(chart) {
    if (chart.dataset.wired) return;
    chart.dataset.wired = "1";
    chart.on("plotly_hover", (ev) => {
      const point = ev.points && ev.points[0];
      const run = point && (typeof point.customdata === "number" ? point.customdata : point.data.meta && point.data.meta.run);
      for (const tr of document.querySelectorAll("#runs-body tr.ws-hover")) tr.classList.remove("ws-hover");
      const tr = run && document.querySelector(`#runs-body tr[data-run-id="${run}"]`);
      if (tr) tr.classList.add("ws-hover");
    });
    chart.on("plotly_unhover", () => {
      for (const tr of document.querySelectorAll("#runs-body tr.ws-hover")) tr.classList.remove("ws-hover");
    });
  }

  /** A swatch of each drawn run's colour in its table row (the same colour as its lines). */
  function colourTable() {
    if (!state.shown || !doc) return;
    const drawn = new Set(doc.runs.map((r) => r.id));
    for (const tr of document.querySelectorAll("#runs-body tr[data-run-id]")) {
      const id = Number(tr.dataset.runId);
      const cell = tr.querySelector("td.name");
      if (!cell) continue;
      let swatch = cell.querySelector(".ws-swatch");
      if (!drawn.has(id)) { if (swatch) swatch.remove(); continue; }
      if (!swatch) { swatch = h("span", { class: "ws-swatch", "aria-hidden": "true" }); cell.prepend(swatch); }
      swatch.style.background = runColor(id);
    }
  }

  const body = el("runs-body");
  if (body) {
    body.addEventListener("mouseover", (ev) => {
      const tr = ev.target.closest("tr[data-run-id]");
      if (tr) setHighlight(new Set([Number(tr.dataset.runId)]));
    });
    body.addEventListener("mouseleave", () => setHighlight(selectedRuns()));
    body.addEventListener("change", () => setHighlight(selectedRuns()));
    // runs.js re-renders the table after every load: follow its query, re-colour its rows
    new MutationObserver(async () => {
      colourTable();
      if (!state.shown || doc === null) return;
      if ((tableQuery().project || "") !== columnsFor) await loadColumns(); // another project's metrics
      if (seriesUrl(panelKeys()) !== loadedFor) load();
    }).observe(body, { childList: true });
  }

  // ------------------------------------------------------------------ saved views

  function viewState() {
    return { ...tableQuery(), ...wsParams(), ws: "1", ws_view: undefined };
  }

  async function loadViews() {
    const { views } = await api("/api/v1/views");
    const project = tableQuery().project || "";
    const mine = views.filter((v) => v.project === project || v.project === "");
    const select = el("ws-views");
    clear(select).append(h("option", { value: "" }, "(unsaved)"),
      ...mine.map((v) => h("option", { value: `${v.project}\n${v.name}` }, v.project && !project ? `${v.name} (${v.project})` : v.name)));
    const current = mine.find((v) => v.name === state.view && (v.project === project || v.project === ""));
    select.value = current ? `${current.project}\n${current.name}` : "";
    return mine;
  }

  /** `?ws_view=NAME` alone: apply the view saved under NAME (once: its state names it). */
  async function openViewFromUrl() {
    if (!state.view) return false;
    const s = T.params();
    if ([...s.keys()].some((k) => k !== "ws_view" && k !== "project" && k !== "ws")) return false;
    const views = await loadViews();
    const project = s.get("project") || "";
    const found = views.find((v) => v.name === state.view && v.project === project) || views.find((v) => v.name === state.view);
    if (!found) { T.toast(`No saved view named ${state.view}`); return false; }
    applyView(found);
    return true;
  }

  function applyView(view) {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(view.state || {})) {
      if (v === null || v === undefined || k === "ws_view") continue;
      search.set(k, Array.isArray(v) ? v.join(",") : String(v));
    }
    if (view.project && !search.has("project")) search.set("project", view.project);
    search.set("ws", "1");
    search.set("ws_view", view.name);
    location.assign(`${location.pathname}?${search.toString().replace(/%2C/g, ",").replace(/%2F/g, "/")}`);
  }

  el("ws-views").addEventListener("change", async (ev) => {
    if (!ev.target.value) { state.view = ""; writeUrl(); return; }
    const [project, name] = ev.target.value.split("\n");
    const { views } = await api(`/api/v1/views?project=${encodeURIComponent(project)}`);
    const found = views.find((v) => v.name === name);
    if (found) applyView(found);
  });

  el("ws-save").addEventListener("click", async () => {
    const name = el("ws-view-name").value.trim() || state.view;
    if (!name) { T.toast("Name the view first"); el("ws-view-name").focus(); return; }
    const clean = Object.fromEntries(Object.entries(viewState()).filter(([, v]) => v !== undefined));
    try {
      const saved = await api("/api/v1/views", { method: "POST", body: { project: tableQuery().project || "", name, state: clean } });
      state.view = saved.name;
      writeUrl();
      await loadViews();
      T.toast(`Saved the view ${saved.name}`, "ok");
    } catch (exc) {
      T.toast(`The view was not saved: ${exc.message}`);
    }
  });

  el("ws-delete").addEventListener("click", async () => {
    const value = el("ws-views").value;
    if (!value) { T.toast("Choose a saved view to delete"); return; }
    const [project, name] = value.split("\n");
    try {
      await api("/api/v1/views/delete", { method: "POST", body: { project, name } });
      if (state.view === name) state.view = "";
      writeUrl();
      await loadViews();
      T.toast(`Deleted the view ${name}`, "ok");
    } catch (exc) {
      T.toast(`The view was not deleted: ${exc.message}`);
    }
  });

  // ------------------------------------------------------------------ controls

  function syncControls() {
    el("ws-filter").value = state.filter;
    el("ws-cols").value = String(state.cols);
    el("ws-x").value = state.x;
    el("ws-smooth").value = String(state.smooth);
    el("ws-smooth-out").textContent = String(state.smooth);
    el("ws-limit").value = String(state.limit);
    if (el("ws-limit").value !== String(state.limit)) el("ws-limit").append(h("option", {}, String(state.limit)));
    el("ws-limit").value = String(state.limit);
    el("ws-agg").value = state.agg;
    el("ws-band").value = state.band;
    for (const f of root.querySelectorAll(".ws-group-opt")) f.hidden = !state.group;
    el("ws-filter").classList.toggle("invalid", filterRegex() === undefined);
    el("view-table").classList.toggle("active", !state.shown);
    el("view-workspace").classList.toggle("active", state.shown);
    el("view-table").setAttribute("aria-selected", String(!state.shown));
    el("view-workspace").setAttribute("aria-selected", String(state.shown));
    root.hidden = !state.shown;
  }

  /** A setting changed: URL, controls, then the panels (see load). */
  function changed({ fetch = true } = {}) {
    writeUrl();
    syncControls();
    renderPicker();
    if (fetch) load();
    else if (doc && state.shown) draw();
  }

  el("ws-filter").addEventListener("change", (ev) => { state.filter = ev.target.value.trim(); state.keys = null; changed(); });
  el("ws-cols").addEventListener("change", (ev) => { state.cols = Number(ev.target.value); changed(); });
  el("ws-x").addEventListener("change", (ev) => { state.x = ev.target.value; changed(); });
  el("ws-smooth").addEventListener("input", (ev) => { el("ws-smooth-out").textContent = ev.target.value; });
  el("ws-smooth").addEventListener("change", (ev) => { state.smooth = Number(ev.target.value); changed({ fetch: false }); });
  el("ws-limit").addEventListener("change", (ev) => { state.limit = Number(ev.target.value); changed(); });
  el("ws-group").addEventListener("change", (ev) => { state.group = ev.target.value; changed(); });
  el("ws-agg").addEventListener("change", (ev) => { state.agg = ev.target.value; changed(); });
  el("ws-band").addEventListener("change", (ev) => { state.band = ev.target.value; changed(); });
  el("ws-pick").addEventListener("click", () => {
    const picker = el("ws-picker");
    picker.hidden = !picker.hidden;
    el("ws-pick").setAttribute("aria-expanded", String(!picker.hidden));
  });
  el("view-table").addEventListener("click", () => {
    state.shown = false;
    if (refresher) { refresher.stop(); refresher = null; polling(false); }
    for (const swatch of document.querySelectorAll("#runs-body .ws-swatch")) swatch.remove();
    changed({ fetch: false });
  });
  el("view-workspace").addEventListener("click", async () => {
    state.shown = true;
    resizeAll = true; // sized while hidden, if at all
    drawnShape = "-";
    changed({ fetch: false });
    await start();
  });

  /** The metric and config keys of the table's project (panels, picker, group-by menu). */
  async function loadColumns() {
    const project = tableQuery().project || "";
    columnsFor = project;
    try {
      const columns = await T.shared(`/api/v1/runs/columns${project ? `?project=${encodeURIComponent(project)}` : ""}`);
      allKeys = columns.metrics;
      configKeys = columns.config;
    } catch (exc) {
      T.toast(exc.message);
    }
    renderPicker();
    renderGroupOptions();
  }

  let started = false;
  async function start() {
    if (!state.shown) return;
    if (!started) {
      started = true;
      await loadColumns();
      loadViews().catch((exc) => T.toast(exc.message));
    }
    await load();
  }

  (async () => {
    if (await openViewFromUrl().catch(() => false)) return;
    syncControls();
    await start();
  })();
})();
