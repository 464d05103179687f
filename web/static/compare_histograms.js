/* Compare's Histograms card: one histogram key of two of the compared runs, side by side, on
 * the same value bins and the same colour scale (histograms.js). Shown only when at least
 * one compared run logged a histogram; the two runs default to the first two that have the
 * key, and the right picker never offers the left one's run. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const ids = (el("main").dataset.runIds || "").split(",").filter(Boolean).map(Number);
  const CONCURRENT = 6;
  const names = new Map();
  const keysOf = new Map(); // run id -> Set(histogram keys)
  const cache = new Map(); // "run|key" -> normalized doc

  async function histogramKeys(runId) {
    try {
      const doc = await api(`/api/v1/runs/${runId}/media`);
      const media = doc.media || doc;
      return new Set(Object.keys(media.histograms || {}));
    } catch (_exc) {
      return new Set();
    }
  }

  async function loadKeys() {
    for (let i = 0; i < ids.length; i += CONCURRENT) {
      const chunk = ids.slice(i, i + CONCURRENT);
      const sets = await Promise.all(chunk.map(histogramKeys));
      chunk.forEach((id, j) => keysOf.set(id, sets[j]));
    }
  }

  async function loadNames() {
    const params = new URLSearchParams({ q: `id in (${ids.join(", ")})`, limit: 500 });
    const doc = await api(`/api/v1/runs?${params}`);
    for (const r of doc.runs) names.set(r.id, r.name);
  }

  const label = (id) => `${names.get(id) || "run"} #${id}`;

  function option(id, key, having) {
    return h("option", { value: id }, having.includes(id) ? label(id) : `${label(id)} (no ${key})`);
  }

  /** The left picker offers every compared run (those with `key` first); the right one every
   *  run but the left one's: a run side by side with itself compares nothing. */
  function fillRuns(key) {
    const having = ids.filter((id) => keysOf.get(id).has(key));
    const ordered = [...having, ...ids.filter((id) => !having.includes(id))];
    const a = el("hist-run-a");
    const keepA = Number(a.value);
    clear(a).append(...ordered.map((id) => option(id, key, having)));
    a.value = String(having.includes(keepA) ? keepA : ordered[0]);
    fillRight(key);
  }

  function fillRight(key) {
    const having = ids.filter((id) => keysOf.get(id).has(key));
    const left = Number(el("hist-run-a").value);
    const ordered = [...having, ...ids.filter((id) => !having.includes(id))].filter((id) => id !== left);
    const b = el("hist-run-b");
    const keepB = Number(b.value);
    clear(b).append(...ordered.map((id) => option(id, key, having)));
    b.value = String(ordered.includes(keepB) && (having.includes(keepB) || !having.some((id) => id !== left)) ? keepB : ordered[0]);
  }

  async function doc(runId, key) {
    const id = `${runId}|${key}`;
    if (!cache.has(id)) {
      cache.set(id, keysOf.get(runId).has(key) ? await Histograms.load(runId, key) : { steps: [], edges: [], counts: [] });
    }
    return cache.get(id);
  }

  async function draw() {
    const key = el("hist-key").value;
    const a = Number(el("hist-run-a").value);
    const b = Number(el("hist-run-b").value);
    const docs = await Promise.all([doc(a, key), doc(b, key)]);
    const grid = Histograms.grid(docs.filter((d) => d.steps.length));
    const zmax = grid ? Histograms.zmax(docs.filter((d) => d.steps.length), grid) : undefined;
    const logColor = el("hist-log").checked;
    await Promise.all([[el("hist-chart-a"), a, docs[0]], [el("hist-chart-b"), b, docs[1]]].map(([target, id, d]) => {
      target.dataset.run = String(id);
      return Histograms.draw(target, d, { grid: grid || undefined, zmax, logColor, title: `${label(id)} · ${key}`, height: 360 });
    }));
  }

  const safely = (fn) => () => fn().catch((exc) => T.toast(exc.message));

  async function start() {
    if (ids.length < 2) return;
    await Promise.all([loadKeys(), loadNames()]);
    const all = [...new Set([...keysOf.values()].flatMap((s) => [...s]))].sort();
    if (!all.length) return;
    el("compare-histograms").hidden = false;
    const keySelect = el("hist-key");
    clear(keySelect).append(...all.map((k) => h("option", { value: k }, k)));
    // The key most compared runs have.
    const count = (k) => ids.filter((id) => keysOf.get(id).has(k)).length;
    keySelect.value = [...all].sort((x, y) => count(y) - count(x) || x.localeCompare(y))[0];
    fillRuns(keySelect.value);
    keySelect.addEventListener("change", () => { fillRuns(keySelect.value); safely(draw)(); });
    el("hist-run-a").addEventListener("change", () => { fillRight(keySelect.value); safely(draw)(); });
    for (const id of ["hist-run-b", "hist-log"]) el(id).addEventListener("change", safely(draw));
    await draw();
  }

  safely(start)();
})();
