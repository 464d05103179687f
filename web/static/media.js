/* The run page's Media tab: images, figures and histograms logged with log_image,
 * log_figure and log_histogram (stored as artifacts under media/<kind>/<key>/<step>.<ext>),
 * and images MLflow's log_image(image, key=..., step=...) stores under images/.
 *
 * - Images and figures: a card per key with a step slider (like TensorBoard's images): the
 *   step and caption shown, one file fetched at a time -- the one the slider rests on (after a
 *   short pause while it is dragged), and only once the card scrolls into view, so a key with
 *   thousands of steps costs one listing and one image.
 * - Figures: plotly JSON drawn interactively by the vendored plotly.js; PNG as an image.
 * - Histograms: a heatmap per key over steps (histograms.js).
 * Every string from the run (keys, captions, paths) goes in as text, never as HTML. */
"use strict";

const RunMedia = (() => {
  const { h, api, clear } = T;
  const SETTLE_MS = 120; // while the slider is dragged, fetch only where it rests
  const KINDS = ["images", "figures", "histograms"];

  function artifactUrl(runId, path) {
    return `/api/v1/runs/${runId}/artifacts/${String(path).split("/").map(encodeURIComponent).join("/")}`;
  }

  /** GET /media: {kind: {key: [steps]}} (a {media: ...} wrapper accepted). */
  async function keys(runId) {
    const doc = await api(`/api/v1/runs/${runId}/media`);
    const media = doc.media || doc;
    const out = {};
    for (const kind of KINDS) out[kind] = media[kind] && typeof media[kind] === "object" ? media[kind] : {};
    return out;
  }

  /** The files of one media key, by step (GET /media/<kind>?key=: the key's own files, not
   *  its sub-keys'; also the images MLflow's log_image(key=...) stores under images/). */
  async function files(runId, kind, key) {
    const doc = await api(`/api/v1/runs/${runId}/media/${kind}?key=${encodeURIComponent(key)}`);
    // One file per step: a plotly JSON wins over a PNG of the same step; else the last one
    // (MLflow keeps every image logged at a step).
    const byStep = new Map();
    for (const a of doc.files || []) {
      const had = byStep.get(a.step);
      if (!had || !had.path.endsWith(".json")) byStep.set(a.step, a);
    }
    return [...byStep.values()].sort((a, b) => a.step - b.step);
  }

  /** A card with a step slider over `entries`; `show(entry, body)` renders one of them. */
  class SliderCard {
    constructor(runId, kind, key, show) {
      this.runId = runId;
      this.kind = kind;
      this.key = key;
      this.show = show;
      this.entries = null;
      this.index = -1;
      this.timer = null;
      this.slider = h("input", { type: "range", min: 0, max: 0, value: 0, step: 1, class: "media-slider",
        "aria-label": `step of ${key}`, disabled: true });
      this.stepLabel = h("span", { class: "media-step" });
      this.caption = h("p", { class: "media-caption" });
      this.body = h("div", { class: "media-body" }, h("p", { class: "muted" }, "loading…"));
      this.prev = h("button", { type: "button", class: "btn small", "aria-label": "previous step", disabled: true }, "‹");
      this.next = h("button", { type: "button", class: "btn small", "aria-label": "next step", disabled: true }, "›");
      this.card = h("div", { class: "chart-card media-card", dataset: { key, kind } },
        h("h3", { title: key }, key),
        h("div", { class: "media-controls" }, this.prev, this.slider, this.next, this.stepLabel),
        this.body, this.caption);
      this.slider.addEventListener("input", () => this.settle());
      this.slider.addEventListener("change", () => this.select(Number(this.slider.value)));
      this.prev.addEventListener("click", () => this.move(-1));
      this.next.addEventListener("click", () => this.move(1));
    }

    async open() {
      if (this.entries) return;
      this.entries = [];
      try {
        this.entries = await files(this.runId, this.kind, this.key);
      } catch (exc) {
        clear(this.body).append(h("p", { class: "query-error" }, exc.message));
        return;
      }
      const n = this.entries.length;
      if (!n) { clear(this.body).append(h("p", { class: "empty" }, "No files for this key.")); return; }
      this.slider.max = String(n - 1);
      this.slider.disabled = n < 2;
      this.slider.value = String(n - 1);
      this.card.dataset.steps = String(n);
      this.select(n - 1); // the latest step first, like TensorBoard
    }

    move(delta) {
      if (!this.entries || !this.entries.length) return;
      const i = Math.min(this.entries.length - 1, Math.max(0, this.index + delta));
      this.slider.value = String(i);
      this.select(i);
    }

    /** While dragging: the step label follows at once, the file once the slider rests. */
    settle() {
      const i = Number(this.slider.value);
      this.label(i);
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.select(i), SETTLE_MS);
    }

    label(i) {
      const e = this.entries[i];
      this.stepLabel.textContent = `step ${e.step} · ${i + 1}/${this.entries.length}`;
      const caption = e.meta && typeof e.meta.caption === "string" ? e.meta.caption : "";
      this.caption.textContent = caption;
      this.caption.hidden = !caption;
    }

    select(i) {
      clearTimeout(this.timer);
      if (i === this.index) return;
      this.index = i;
      this.label(i);
      this.prev.disabled = i <= 0;
      this.next.disabled = i >= this.entries.length - 1;
      const e = this.entries[i];
      this.card.dataset.step = String(e.step);
      Promise.resolve(this.show(e, this.body, this)).catch((exc) => {
        clear(this.body).append(h("p", { class: "query-error" }, `${e.path}: ${exc.message}`));
      });
    }
  }

  function showImage(runId) {
    return (entry, body, card) => {
      let img = body.querySelector("img.media-image");
      if (!img) {
        img = h("img", { class: "media-image", alt: card.key });
        img.addEventListener("load", () => { card.card.dataset.loaded = img.dataset.step; });
        clear(body).append(img);
      }
      img.dataset.step = String(entry.step);
      img.src = artifactUrl(runId, entry.path);
      img.title = `${entry.path} (${T.fmtBytes(entry.size)})`;
    };
  }

  function showFigure(runId) {
    return async (entry, body, card) => {
      const url = artifactUrl(runId, entry.path);
      if (!entry.path.endsWith(".json")) {
        const old = body.querySelector(".media-plot");
        if (old) Plotly.purge(old);
        return showImage(runId)(entry, body, card);
      }
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const fig = JSON.parse(await response.text());
      if (card.index !== card.entries.indexOf(entry)) return; // the slider moved on meanwhile
      let plot = body.querySelector(".media-plot");
      if (!plot) { plot = h("div", { class: "media-plot", dataset: { ownColours: "" } }); clear(body).append(plot); }
      await T.plotlyFor(fig.data); // a trace type outside the partial bundle loads the full one
      const layout = Object.assign({ height: 360, margin: { l: 50, r: 20, t: 30, b: 40 } }, fig.layout || {});
      await Plotly.react(plot, Array.isArray(fig.data) ? fig.data : [], layout, { responsive: true, displaylogo: false });
      plot.dataset.step = String(entry.step);
      card.card.dataset.loaded = String(entry.step);
    };
  }

  class HistogramCard {
    constructor(runId, key) {
      this.runId = runId;
      this.key = key;
      this.plot = h("div", { class: "chart histogram-chart" }, h("p", { class: "muted" }, "loading…"));
      this.logColor = h("input", { type: "checkbox" });
      this.note = h("p", { class: "muted small histogram-note", hidden: true });
      this.card = h("div", { class: "chart-card media-card histogram-card", dataset: { key, kind: "histograms" } },
        h("h3", { title: key }, key, h("label", { class: "inline small muted" }, this.logColor, " log colour")),
        this.plot, this.note);
      this.doc = null;
      this.logColor.addEventListener("change", () => this.draw());
    }

    async open() {
      if (this.doc) return;
      try {
        this.doc = await Histograms.load(this.runId, this.key);
      } catch (exc) {
        clear(this.plot).append(h("p", { class: "query-error" }, exc.message));
        return;
      }
      await this.draw();
      const shown = Math.min(this.doc.steps.length, Histograms.MAX_ROWS);
      if (shown < this.doc.total) {
        this.note.textContent = `${shown} of ${this.doc.total} steps shown, spread evenly`;
        this.note.hidden = false;
      }
    }

    async draw() {
      if (this.doc) await Histograms.draw(this.plot, this.doc, { logColor: this.logColor.checked });
    }
  }

  let opened = false;

  /** Build the tab once: a section per kind, a card per key; cards load when seen. */
  async function open(runId) {
    if (opened) return;
    opened = true;
    const root = document.getElementById("media-root");
    for (const plot of root.querySelectorAll(".js-plotly-plot")) Plotly.purge(plot);
    clear(root);
    let media;
    try {
      media = await keys(runId);
    } catch (exc) {
      opened = false;
      root.append(h("p", { class: "query-error" }, exc.message));
      return;
    }
    const seen = new IntersectionObserver((records) => {
      for (const r of records) {
        if (!r.isIntersecting) continue;
        seen.unobserve(r.target);
        r.target.mediaCard.open().catch((exc) => T.toast(exc.message));
      }
    }, { rootMargin: "300px" });
    const reload = h("button", { type: "button", class: "btn small", id: "media-reload", title: "look for new keys and steps (a live run adds more)" }, "Reload");
    reload.addEventListener("click", () => {
      seen.disconnect();
      opened = false;
      open(runId).catch((exc) => T.toast(exc.message));
    });
    root.append(h("div", { class: "media-tools" }, reload));
    const titles = { images: "Images", figures: "Figures", histograms: "Histograms" };
    let total = 0;
    for (const kind of KINDS) {
      const names = Object.keys(media[kind]).sort();
      if (!names.length) continue;
      total += names.length;
      const grid = h("div", { class: "chart-grid media-grid" });
      for (const key of names) {
        const card = kind === "histograms" ? new HistogramCard(runId, key)
          : new SliderCard(runId, kind, key, kind === "images" ? showImage(runId) : showFigure(runId));
        card.card.mediaCard = card;
        grid.append(card.card);
        seen.observe(card.card);
      }
      root.append(h("section", { class: "chart-group media-group", dataset: { kind } },
        h("h2", {}, titles[kind], h("span", { class: "muted" }, ` ${names.length}`)), grid));
    }
    if (!total) root.append(h("p", { class: "empty" }, "This run has no images, figures or histograms."));
  }

  /** The number of media keys, for the tab's count. */
  async function count(runId) {
    const media = await keys(runId);
    return KINDS.reduce((n, kind) => n + Object.keys(media[kind]).length, 0);
  }

  return { open, count, artifactUrl, files };
})();
