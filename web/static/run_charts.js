/* The run page's charts: every metric key, grouped by prefix (train/, val/, ...), plus the
 * sys/ group with a GPU memory chart (allocated, reserved, peak per device and rank) and a
 * CPU/RSS chart.
 *
 * Data flow: GET /api/v1/runs/<id>/metrics lists the keys and their last steps; a chart
 * fetches its series when it scrolls into view, and every other chart is fetched in the
 * background right after (a few at a time), so no card below the fold stays blank (a
 * full-page screenshot, a printout, a quick scroll); zooming re-queries the visible step window
 * (full resolution once it fits); a live update asks only for the steps after the last one
 * drawn (?lo=last+1) and appends them. */
"use strict";

const RunCharts = (() => {
  const GPU_KEY = /^sys\/(?:rank(\d+)\/)?gpu(\d+)\/(allocated_bytes|reserved_bytes|peak_allocated_bytes|nvml_used_bytes)$/;
  const STEP_GPU_KEY = /^sys\/step\/gpu_(allocated_bytes|peak_allocated_bytes)$/;
  const CPU_KEYS = ["sys/cpu_percent", "sys/rss_bytes"];
  const GIB = 1024 ** 3;
  const MAX_LIVE_BUCKETS = 3000; // past this, re-bucket the whole series instead of appending
  const BUCKETS = 1000;
  const KIND_DASH = {
    allocated_bytes: "solid", reserved_bytes: "dash", peak_allocated_bytes: "dot", nvml_used_bytes: "dashdot",
  };
  const KIND_LABEL = {
    allocated_bytes: "allocated", reserved_bytes: "reserved", peak_allocated_bytes: "peak", nvml_used_bytes: "used (NVML)",
  };

  function groupOf(key) {
    const slash = key.indexOf("/");
    return slash > 0 ? key.slice(0, slash) : "other";
  }

  /** Split the run's metric keys into the chart cards to build. */
  function plan(keys) {
    const gpu = keys.filter((k) => GPU_KEY.test(k) || STEP_GPU_KEY.test(k));
    const cpu = CPU_KEYS.filter((k) => keys.includes(k));
    const taken = new Set([...gpu, ...cpu]);
    const groups = new Map();
    for (const key of keys) {
      if (taken.has(key)) continue;
      const group = groupOf(key);
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(key);
    }
    const order = [...groups.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    return { gpu, cpu, groups: order.map((name) => [name, groups.get(name).sort()]) };
  }

  function rank(group) {
    const known = ["train", "val", "eval", "test"];
    if (group === "sys") return 100;
    const i = known.indexOf(group);
    return i < 0 ? 50 : i;
  }

  function gpuLabel(key) {
    const m = GPU_KEY.exec(key);
    if (m) {
      const where = m[1] === undefined ? `gpu${m[2]}` : `rank${m[1]} gpu${m[2]}`;
      return { label: `${where} ${KIND_LABEL[m[3]]}`, device: `${m[1] || 0}:${m[2]}`, kind: m[3] };
    }
    const s = STEP_GPU_KEY.exec(key);
    return { label: `per step ${KIND_LABEL[s[1]]}`, device: "step", kind: s[1] };
  }

  class Chart {
    constructor(view, kind, keys, title) {
      this.view = view;
      this.kind = kind; // "metric" | "gpu" | "cpu"
      this.keys = keys;
      this.payloads = new Map();
      this.zoom = null; // [lo, hi] while zoomed in
      this.loaded = false;
      this.loading = false;
      this.plot = T.h("div", { class: "chart", dataset: { keys: keys.join(",") } },
        T.h("p", { class: "chart-loading muted" }, "loading…"));
      this.flag = T.h("span", { class: "nonfinite-flag", hidden: true });
      const heading = T.h("h3", { title: keys.join(", ") }, title, this.flag);
      this.card = T.h("div", { class: "chart-card", dataset: { key: keys[0], kind } },
        heading, this.plot);
    }

    lastStep(key) {
      const p = this.payloads.get(key);
      return p && p.last_step.length ? p.last_step[p.last_step.length - 1] : -1;
    }

    async load(window = this.zoom) {
      this.loading = true;
      try {
        const params = new URLSearchParams({ key: this.keys.join(","), max_buckets: BUCKETS });
        if (window) { params.set("lo", window[0]); params.set("hi", window[1]); }
        const doc = await T.api(`/api/v1/runs/${this.view.runId}/series?${params}`);
        doc.series.forEach((p, i) => this.payloads.set(this.keys[i], p));
        this.loaded = true;
        this.draw();
      } catch (exc) {
        this.failed = true; // the background fill does not retry it; scrolling to it does
        const placeholder = this.plot.querySelector(".chart-loading");
        if (placeholder) placeholder.textContent = `could not load: ${exc.message}`;
        throw exc;
      } finally {
        this.loading = false;
      }
    }

    /** Fetch the steps after the last one drawn and append them (not while zoomed in). */
    async extend(summaries) {
      if (!this.loaded || this.zoom || this.loading) return;
      const grown = this.keys.filter((k) => (summaries.get(k) ?? -1) > this.lastStep(k));
      if (!grown.length) return;
      const bucketCount = Math.max(...this.keys.map((k) => (this.payloads.get(k)?.last_step.length) || 0));
      if (bucketCount > MAX_LIVE_BUCKETS) { await this.load(null); return; }
      const byLo = new Map();
      for (const key of grown) {
        const lo = this.lastStep(key) + 1;
        if (!byLo.has(lo)) byLo.set(lo, []);
        byLo.get(lo).push(key);
      }
      this.loading = true;
      try {
        for (const [lo, keys] of byLo) {
          const params = new URLSearchParams({ key: keys.join(","), lo, max_buckets: BUCKETS });
          const doc = await T.api(`/api/v1/runs/${this.view.runId}/series?${params}`);
          doc.series.forEach((p, i) => this.payloads.set(keys[i], Charts.merge(this.payloads.get(keys[i]), p)));
        }
      } finally {
        this.loading = false;
      }
      this.draw();
    }

    axis() {
      const first = [...this.payloads.values()].find((p) => p.wall_time.length);
      const t0 = this.view.startTime() ?? (first ? first.wall_time[0] : 0);
      const end = first ? Charts.lastTime(first) ?? t0 : t0;
      return Charts.xAxis(this.view.options.axis, t0, end - t0);
    }

    draw() {
      if (!this.loaded) return;
      const axis = this.axis();
      const opts = this.view.options;
      const revision = `${opts.axis}:${opts.logY}`;
      let traces;
      let lay;
      const payloads = this.keys.map((k) => this.payloads.get(k)).filter(Boolean);
      if (this.kind === "metric") {
        const key = this.keys[0];
        const p = this.shown(key, axis) || Charts.emptyPayload(key);
        const ext = Charts.extent([p]);
        const unit = T.isBytesKey(key) && ext ? Charts.bytesUnit(Math.max(Math.abs(ext[0]), Math.abs(ext[1]))) : null;
        traces = Charts.seriesTraces(p, { axis, c: Charts.color(0, 1), smoothing: opts.smoothing, unit });
        const bad = p.nan.reduce((n, v, i) => n + v + p.posinf[i] + p.neginf[i], 0);
        this.flag.hidden = bad === 0;
        this.flag.textContent = `${bad} NaN/Inf`;
        const auto = !opts.logY && Charts.autoLogY(ext); // a range that hides its history
        const logY = opts.logY || auto;
        this.plot.dataset.autoLogY = auto ? "1" : "";
        const title = auto ? `${unit ? unit.name + ", " : ""}log (${Charts.AUTO_LOG_DECADES}+ decades)` : unit ? unit.name : "";
        lay = Charts.layout({ axis, logY, revision: `${revision}:${auto}`, yTitle: title });
        const drawn = unit && ext ? [ext[0] / unit.factor, ext[1] / unit.factor] : ext;
        Object.assign(lay.yaxis, Charts.yRange(drawn, { logY, zero: Boolean(unit) }));
      } else if (this.kind === "gpu") {
        traces = this.gpuTraces(axis);
        lay = Charts.layout({ axis, logY: opts.logY, height: 320, yTitle: "GiB", legend: true, revision });
        const ext = Charts.extent(payloads);
        Object.assign(lay.yaxis, Charts.yRange(ext && [ext[0] / GIB, ext[1] / GIB], { logY: opts.logY, zero: true }));
      } else {
        traces = this.cpuTraces(axis);
        lay = Charts.layout({ axis, height: 320, yTitle: "CPU %", legend: true, revision });
        const rss = this.payloads.get("sys/rss_bytes");
        const rssExt = rss ? Charts.extent([rss]) : null;
        const cpu = this.payloads.get("sys/cpu_percent");
        Object.assign(lay.yaxis, Charts.yRange(cpu ? Charts.extent([cpu]) : null, { zero: true }));
        const unit = this.rssUnit();
        lay.yaxis2 = {
          title: { text: `RSS (${unit.name})`, font: { size: 11 } }, overlaying: "y", side: "right", showgrid: false, zeroline: false,
          ...Charts.yRange(rssExt && [rssExt[0] / unit.factor, rssExt[1] / unit.factor], { zero: true }),
        };
        lay.margin.r = 58;
      }
      Object.assign(lay.xaxis, Charts.stepTicks(axis, payloads));
      this.plot.dataset.traces = String(traces.length);
      this.plot.dataset.points = String(traces.reduce((n, t) => Math.max(n, t.x.length), 0));
      const placeholder = this.plot.querySelector(".chart-loading");
      if (placeholder) placeholder.remove();
      Plotly.react(this.plot, traces, lay, Charts.PLOT_CONFIG).then(() => this.listen());
    }

    /** The payload of ``key`` as drawn on ``axis``: in wall-time order on a time axis. */
    shown(key, axis) {
      const p = this.payloads.get(key);
      return p && axis.mode !== "step" ? Charts.inTimeOrder(p) : p;
    }

    gpuTraces(axis) {
      const devices = [...new Set(this.keys.map((k) => gpuLabel(k).device))];
      return this.keys.map((key) => {
        const p = this.shown(key, axis);
        const { label, device, kind } = gpuLabel(key);
        // The bucket's max: a short allocation peak must not vanish in a wide bucket.
        return {
          type: "scatter", mode: p.last_step.length < Charts.MARKERS_BELOW ? "lines+markers" : "lines",
          marker: { size: 5 }, name: T.plotText(label), x: Charts.xValues(p, axis),
          y: p.max.map((v) => (v === null ? null : v / GIB)),
          line: { color: Charts.color(devices.indexOf(device), devices.length), dash: KIND_DASH[kind], width: 1.6 },
          hovertemplate: `${T.plotText(label)}: %{y:.3f} GiB<extra></extra>`,
        };
      });
    }

    /** RSS in the unit its largest value reaches (MiB for a small process, GiB else). */
    rssUnit() {
      const rss = this.payloads.get("sys/rss_bytes");
      const ext = rss ? Charts.extent([rss]) : null;
      return Charts.bytesUnit(ext ? Math.max(Math.abs(ext[0]), Math.abs(ext[1])) : GIB);
    }

    cpuTraces(axis) {
      const unit = this.rssUnit();
      return this.keys.map((key, i) => {
        const p = this.shown(key, axis);
        const rss = key === "sys/rss_bytes";
        return {
          type: "scatter", mode: p.last_step.length < Charts.MARKERS_BELOW ? "lines+markers" : "lines",
          marker: { size: 5 }, name: rss ? "RSS" : "CPU", yaxis: rss ? "y2" : "y",
          x: Charts.xValues(p, axis), y: rss ? p.max.map((v) => (v === null ? null : v / unit.factor)) : p.last,
          line: { color: Charts.color(i, 2), width: 1.6 },
          hovertemplate: rss ? `RSS %{y:.3f} ${unit.name}<extra></extra>` : "CPU %{y:.1f} %<extra></extra>",
        };
      });
    }

    listen() {
      if (this.listening) return;
      this.listening = true;
      this.plot.on("plotly_relayout", (ev) => this.relayout(ev));
    }

    /** Zoom: re-query the visible step window; a double-click (autorange) goes back to all. */
    relayout(ev) {
      if (ev["xaxis.autorange"]) {
        this.zoom = null;
        this.load(null);
        return;
      }
      const r0 = ev["xaxis.range[0]"] ?? (ev["xaxis.range"] || [])[0];
      const r1 = ev["xaxis.range[1]"] ?? (ev["xaxis.range"] || [])[1];
      if (r0 === undefined || r1 === undefined) return;
      const p = this.payloads.get(this.keys[0]);
      const window = p && Charts.stepWindow(p, this.axis(), [r0, r1]);
      if (!window) return;
      this.zoom = window;
      this.plot.dataset.zoom = window.join("-");
      this.load(window);
    }
  }

  /** All charts of one run page. */
  class View {
    constructor(runId, root, options) {
      this.runId = runId;
      this.root = root;
      this.options = options; // {axis, smoothing, logY, filter}
      this.charts = new Map(); // first key -> Chart
      this.known = new Set();
      this.run = null;
      this.observer = new IntersectionObserver((entries) => this.onVisible(entries), { rootMargin: "400px" });
      this.backfilling = false;
    }

    /** Fetch every chart not drawn yet, a few at a time, after the visible ones started. */
    async backfill() {
      if (this.backfilling) return;
      this.backfilling = true;
      try {
        for (;;) {
          const next = [...this.charts.values()].filter((c) => !c.loaded && !c.loading && !c.failed).slice(0, 3);
          if (!next.length) break;
          await Promise.all(next.map((c) => c.load().catch((exc) => T.toast(`${c.keys[0]}: ${exc.message}`))));
        }
      } finally {
        this.backfilling = false;
      }
    }

    startTime() {
      return this.run ? this.run.started_at || this.run.created_at : null;
    }

    /** Build cards for keys not seen yet; returns whether anything was added. */
    addKeys(keys) {
      const fresh = keys.filter((k) => !this.known.has(k));
      if (!fresh.length) return false;
      fresh.forEach((k) => this.known.add(k));
      const layout = plan([...this.known].sort());
      for (const [group, groupKeys] of layout.groups) {
        for (const key of groupKeys) {
          if (!this.charts.has(key)) this.place(group, new Chart(this, "metric", [key], key));
        }
      }
      this.placeSystem("gpu", layout.gpu, "GPU memory");
      this.placeSystem("cpu", layout.cpu, "CPU and RSS");
      this.applyFilter();
      setTimeout(() => this.backfill(), 0); // after the observer's first, visible, loads
      return true;
    }

    placeSystem(kind, keys, title) {
      if (!keys.length) return;
      const existing = this.charts.get(`#${kind}`);
      if (existing && existing.keys.length === keys.length) return;
      if (existing) {
        this.observer.unobserve(existing.card);
        existing.card.remove();
      }
      const chart = new Chart(this, kind, keys, title);
      this.charts.set(`#${kind}`, chart);
      const grid = this.groupGrid("sys");
      const gpu = this.charts.get("#gpu");
      if (kind === "cpu" && gpu && gpu.card.parentNode === grid) gpu.card.after(chart.card);
      else grid.prepend(chart.card);
      this.observer.observe(chart.card);
    }

    place(group, chart) {
      this.charts.set(chart.keys[0], chart);
      const grid = this.groupGrid(group);
      const after = [...grid.children].find((c) => c.dataset.kind === "metric" && c.dataset.key > chart.keys[0]);
      grid.insertBefore(chart.card, after || null);
      this.observer.observe(chart.card);
    }

    groupGrid(group) {
      let section = this.root.querySelector(`section[data-group="${CSS.escape(group)}"]`);
      if (!section) {
        section = T.h("section", { class: "chart-group", dataset: { group } },
          T.h("h2", {}, group === "other" ? "other metrics" : `${group}/`),
          T.h("div", { class: "chart-grid" }));
        const later = [...this.root.children].find((s) => rank(s.dataset.group) > rank(group) ||
          (rank(s.dataset.group) === rank(group) && s.dataset.group > group));
        this.root.insertBefore(section, later || null);
      }
      return section.querySelector(".chart-grid");
    }

    onVisible(entries) {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        const chart = [...this.charts.values()].find((c) => c.card === entry.target);
        if (chart && !chart.loaded && !chart.loading) {
          chart.load().catch((exc) => T.toast(`${chart.keys[0]}: ${exc.message}`));
        }
      }
    }

    /** A live tick: new keys get cards; drawn charts fetch only their new steps. */
    async update(summaries) {
      const byKey = new Map(summaries.map((s) => [s.key, s.last_step]));
      this.addKeys([...byKey.keys()]);
      await Promise.all([...this.charts.values()].map((c) => c.extend(byKey)));
    }

    redraw() {
      for (const chart of this.charts.values()) chart.draw();
    }

    applyFilter() {
      const text = (this.options.filter || "").toLowerCase();
      for (const chart of this.charts.values()) {
        chart.card.hidden = Boolean(text) && !chart.keys.some((k) => k.toLowerCase().includes(text));
      }
      for (const section of this.root.querySelectorAll("section.chart-group")) {
        section.hidden = ![...section.querySelectorAll(".chart-card")].some((c) => !c.hidden);
      }
    }
  }

  return { View, plan };
})();
