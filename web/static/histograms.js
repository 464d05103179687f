/* Histograms over steps as a heatmap (x = value bins, y = step, colour = count), W&B's
 * histogram panel. Used by the run page's Media tab (media.js) and by Compare.
 *
 * API: GET /api/v1/runs/<id>/histograms/<key> -> {steps: [...], edges: [[...]], counts: [[...]]}
 * (one edges/counts pair per step). Each step's histogram has its own edges (a tensor's range
 * changes as it trains), so every step is re-binned onto one common grid (its counts spread
 * over the grid's bins in proportion to the overlap) before drawing; Compare puts both runs on
 * the same grid and colour scale. More than MAX_ROWS steps are thinned evenly (the last step
 * always kept). */
"use strict";

const Histograms = (() => {
  const { h, api, clear } = T;
  const GRID_BINS = 64;
  const MAX_ROWS = 1000;
  const FEW_ROWS = 8; // up to this many steps, the step axis has a tick at each one

  function keyPath(key) {
    return String(key).split("/").map(encodeURIComponent).join("/");
  }

  async function load(runId, key) {
    const doc = await api(`/api/v1/runs/${runId}/histograms/${keyPath(key)}`);
    return normalize(doc);
  }

  /** The server's answer as parallel lists; rows without usable edges are dropped. */
  function normalize(doc) {
    const steps = [];
    const edges = [];
    const counts = [];
    const n = (doc.steps || []).length;
    for (let i = 0; i < n; i += 1) {
      const e = (doc.edges || [])[i];
      const c = (doc.counts || [])[i];
      if (!Array.isArray(e) || !Array.isArray(c) || e.length !== c.length + 1) continue;
      if (!e.every(Number.isFinite) || !c.every(Number.isFinite)) continue;
      steps.push(doc.steps[i]);
      edges.push(e);
      counts.push(c);
    }
    // The server sends at most 1,000 steps of a longer series, spread evenly.
    return { steps, edges, counts, total: Math.max(doc.total_steps || 0, steps.length) };
  }

  /** One grid (lo, hi, bins) covering every histogram of every document given. */
  function grid(docs, bins = GRID_BINS) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const doc of docs) {
      for (const e of doc.edges) {
        lo = Math.min(lo, e[0]);
        hi = Math.max(hi, e[e.length - 1]);
      }
    }
    if (!Number.isFinite(lo)) return null;
    if (hi <= lo) { lo -= 0.5; hi += 0.5; }
    return { lo, hi, bins };
  }

  /** One step's counts spread over the grid's bins by overlap (a zero-width bin goes whole
   *  into the grid bin holding its value). */
  function rebin(edges, counts, g) {
    const out = new Array(g.bins).fill(0);
    const width = (g.hi - g.lo) / g.bins;
    const index = (v) => Math.min(g.bins - 1, Math.max(0, Math.floor((v - g.lo) / width)));
    for (let i = 0; i < counts.length; i += 1) {
      const c = counts[i];
      if (!c) continue;
      const a = edges[i];
      const b = edges[i + 1];
      if (!(b > a)) { out[index(a)] += c; continue; }
      for (let j = index(a); j <= index(b); j += 1) {
        const x0 = g.lo + j * width;
        const overlap = Math.min(b, x0 + width) - Math.max(a, x0);
        if (overlap > 0) out[j] += (c * overlap) / (b - a);
      }
    }
    return out;
  }

  /** The rows to draw: every step, or MAX_ROWS of them evenly spread (last kept). */
  function thin(n) {
    if (n <= MAX_ROWS) return [...Array(n).keys()];
    const picked = new Set();
    for (let i = 0; i < MAX_ROWS; i += 1) picked.add(Math.round((i * (n - 1)) / (MAX_ROWS - 1)));
    return [...picked].sort((a, b) => a - b);
  }

  /** Heatmap rows for one run on grid g: {x (bin centres), y (steps), z}. */
  function matrix(doc, g) {
    const width = (g.hi - g.lo) / g.bins;
    const x = [...Array(g.bins).keys()].map((j) => g.lo + (j + 0.5) * width);
    const rows = thin(doc.steps.length);
    return {
      x,
      y: rows.map((i) => doc.steps[i]),
      z: rows.map((i) => rebin(doc.edges[i], doc.counts[i], g)),
      thinned: rows.length < doc.steps.length,
    };
  }

  /**
   * Draw `doc` into `target` as a heatmap. opts: grid (shared with another plot), zmax (shared
   * colour scale), title, logColor (colour = log10(1 + count)). Sets data-steps and data-bins
   * on the target for tests and returns the matrix.
   */
  async function draw(target, doc, opts = {}) {
    if (!doc.steps.length) {
      Plotly.purge(target);
      clear(target).append(h("p", { class: "empty" }, "No histogram data for this key."));
      target.dataset.steps = "0";
      return null;
    }
    const g = opts.grid || grid([doc]);
    const m = matrix(doc, g);
    const z = opts.logColor ? m.z.map((row) => row.map((c) => Math.log10(1 + c))) : m.z;
    const trace = {
      type: "heatmap", x: m.x, y: m.y, z,
      colorscale: "Viridis", zmin: 0,
      customdata: m.z,
      hovertemplate: "value %{x:.4g}<br>step %{y}<br>count %{customdata:.4g}<extra></extra>",
      colorbar: { title: { text: opts.logColor ? "log10(1+count)" : "count", side: "right" }, thickness: 12 },
    };
    if (opts.zmax !== undefined) trace.zmax = opts.logColor ? Math.log10(1 + opts.zmax) : opts.zmax;
    const theme = T.plotTheme(); // light or dark (app.css)
    const layout = {
      height: opts.height || 320,
      margin: { l: 60, r: 10, t: opts.title ? 30 : 10, b: 40 },
      title: opts.title ? { text: T.plotText(opts.title), font: { size: 12 } } : undefined,
      xaxis: { title: { text: "value" }, zeroline: false, gridcolor: theme.grid },
      // A few rows: a tick at each step (plotly's own ticks would fall between steps, e.g.
      // 22.6 .. 23.4 for one step); more rows get plotly's ticks, which are whole numbers.
      yaxis: { title: { text: "step" }, zeroline: false, gridcolor: theme.grid, tickvals: m.y.length <= FEW_ROWS ? m.y : undefined },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: theme.bg, font: { color: theme.text },
    };
    for (const note of target.querySelectorAll(":scope > p")) note.remove(); // "loading…", "no data"
    await Plotly.react(target, [trace], layout, { responsive: true, displaylogo: false });
    target.dataset.steps = String(m.y.length);
    target.dataset.bins = String(g.bins);
    target.dataset.thinned = m.thinned || doc.total > doc.steps.length ? "1" : "";
    return m;
  }

  /** The largest re-binned count of the docs on grid g (for a shared colour scale). */
  function zmax(docs, g) {
    let top = 0;
    for (const doc of docs) for (const row of matrix(doc, g).z) for (const c of row) top = Math.max(top, c);
    return top;
  }

  return { MAX_ROWS, load, normalize, grid, rebin, matrix, draw, zmax, keyPath };
})();
