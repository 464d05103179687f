/* Parallel coordinates in plain SVG: one axis per config key plus the metric, one line per
 * run coloured by the metric. Plotly's own parcoords needs WebGL, which remote desktops and
 * headless browsers often lack; SVG works everywhere and copes with 200 runs. */
"use strict";

const ParCoords = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
  const MARGIN = { top: 50, right: 86, bottom: 22, left: 70 };

  function svg(tag, attrs, ...children) {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }

  function viridis(t) {
    const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
    const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
    const mix = (a, b) => Math.round(a + (b - a) * (x - i));
    const [p, q] = [VIRIDIS[i], VIRIDIS[i + 1]].map((c) => parseInt(c.slice(1), 16));
    return `rgb(${mix(p >> 16, q >> 16)}, ${mix((p >> 8) & 255, (q >> 8) & 255)}, ${mix(p & 255, q & 255)})`;
  }

  /** Map a dimension's values to [0, 1] (0 at the bottom); numbers spanning decades use log. */
  function scale(dim) {
    if (dim.ticktext) {
      const n = Math.max(1, dim.ticktext.length - 1);
      return {
        at: (v) => (dim.ticktext.length === 1 ? 0.5 : v / n),
        ticks: dim.ticktext.map((label, i) => [i, label]),
      };
    }
    let lo = Math.min(...dim.values);
    let hi = Math.max(...dim.values);
    const log = lo > 0 && hi / lo >= 20;
    const f = log ? Math.log10 : (v) => v;
    if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
    const [a, b] = [f(lo), f(hi)];
    const ticks = [];
    const distinct = [...new Set(dim.values)].sort((x, y) => x - y);
    if (!dim.continuous && distinct.length <= 8) {
      // A few config values (lr 3e-4, 1e-3, 1e-2): label exactly those.
      return { at: (v) => (f(v) - a) / (b - a), ticks: distinct.map((v) => [v, T.fmtValue(v)]) };
    }
    for (let i = 0; i <= 4; i += 1) {
      const t = a + ((b - a) * i) / 4;
      ticks.push([log ? 10 ** t : t, T.fmtValue(Number((log ? 10 ** t : t).toPrecision(3)))]);
    }
    return { at: (v) => (f(v) - a) / (b - a), ticks };
  }

  /**
   * Draw into `container`: dims [{label, values, tickvals?, ticktext?}] (the last one is the
   * metric), names [run label per line]. Lines are coloured by the last dimension.
   */
  function draw(container, dims, names, { height = 380 } = {}) {
    const width = Math.max(360, container.clientWidth || 600);
    const plotW = width - MARGIN.left - MARGIN.right;
    const plotH = height - MARGIN.top - MARGIN.bottom;
    const scales = dims.map((d, i) => scale(i === dims.length - 1 ? { ...d, continuous: true } : d));
    const xs = dims.map((_, i) => MARGIN.left + (dims.length === 1 ? plotW / 2 : (plotW * i) / (dims.length - 1)));
    const y = (d, v) => MARGIN.top + plotH * (1 - scales[d].at(v));
    const metric = dims[dims.length - 1];
    const colorScale = scale({ values: metric.values, continuous: true });
    const root = svg("svg", { class: "parcoords", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
    const lines = svg("g", { class: "pc-lines" });
    names.forEach((name, r) => {
      const points = dims.map((d, i) => `${xs[i].toFixed(1)},${y(i, d.values[r]).toFixed(1)}`);
      const detail = dims.map((d) => `${d.label} = ${d.ticktext ? d.ticktext[d.values[r]] : T.fmtValue(d.values[r])}`);
      lines.append(svg("polyline", {
        points: points.join(" "), fill: "none", stroke: viridis(colorScale.at(metric.values[r])),
        "stroke-width": 2, "stroke-opacity": 0.85,
      }, svg("title", {}, `${name}\n${detail.join("\n")}`)));
    });
    root.append(lines);
    dims.forEach((d, i) => root.append(axis(d, scales[i], xs[i], plotH, i === dims.length - 1)));
    root.append(colorbar(colorScale, width - MARGIN.right + 34, plotH));
    T.clear(container).append(root);
    fitLabels(root, xs);
  }

  const LABEL_ROW = 17; // px between the two rows of staggered labels

  /** Shorter forms of a dotted key, each shorter than the one before: the key; the shortest
   * dotted suffix no other label ends with ("…param_group_0.warmup_steps"); the part that
   * tells it apart alone ("…param_group_0.…"); then that part cut from the left. */
  function shortForms(key, others) {
    const parts = key.split(".");
    const forms = [key];
    let k = parts.length - 1;
    const ends = (o, suffix) => o === suffix || o.endsWith(`.${suffix}`);
    while (k > 0 && others.some((o) => o !== key && ends(o, parts.slice(k).join(".")))) k -= 1;
    if (k > 0) forms.push(`…${parts.slice(k).join(".")}`);
    const part = parts[k];
    const tail = k < parts.length - 1 ? ".…" : "";
    if (k > 0 || tail) forms.push(`${k > 0 ? "…" : ""}${part}${tail}`);
    for (let n = part.length - 1; n >= 2; n -= 1) forms.push(`…${part.slice(-n)}${tail}`);
    return forms;
  }

  /**
   * Axis labels never overlap: when one is wider than the gap between axes they alternate
   * between two rows (twice the room), and any still too wide takes the first of its short
   * forms that fits (shortForms: the part of a dotted key that tells it apart survives);
   * the full key stays in its tooltip. Measured in the page, so it holds for any font.
   */
  function fitLabels(root, xs) {
    const labels = [...root.querySelectorAll(".pc-label")];
    if (labels.length < 2) return;
    const gap = xs[1] - xs[0];
    const keys = labels.map((l) => l.dataset.key);
    const texts = labels.map((l) => l.querySelector(".pc-label-text"));
    const stagger = texts.some((t) => t.getComputedTextLength() > gap - 8);
    const room = stagger ? 2 * gap - 8 : gap - 8;
    labels.forEach((label, i) => {
      if (stagger && i % 2 === 1) label.setAttribute("y", Number(label.getAttribute("y")) - LABEL_ROW);
      const text = texts[i];
      const edge = i === 0 ? 2 * MARGIN.left - 8 : i === labels.length - 1 ? 2 * MARGIN.right - 8 : Infinity;
      const max = Math.min(room, edge);
      for (const form of shortForms(keys[i], keys)) {
        text.textContent = form;
        if (text.getComputedTextLength() <= max) break;
      }
    });
  }

  function axis(dim, sc, x, plotH, isMetric) {
    const g = svg("g", { class: `pc-axis${isMetric ? " metric" : ""}` });
    g.append(svg("line", { x1: x, x2: x, y1: MARGIN.top, y2: MARGIN.top + plotH, stroke: "#94a3b8" }));
    for (const [v, label] of sc.ticks) {
      const ty = MARGIN.top + plotH * (1 - sc.at(v));
      g.append(svg("line", { x1: x - 4, x2: x, y1: ty, y2: ty, stroke: "#94a3b8" }));
      g.append(svg("text", { x: x - 7, y: ty + 3.5, "text-anchor": "end", class: "pc-tick" }, String(label).slice(0, 14)));
    }
    g.append(svg("text", { x, y: MARGIN.top - 10, "text-anchor": "middle", class: "pc-label", "data-key": dim.label },
      svg("tspan", { class: "pc-label-text" }, dim.label), svg("title", {}, dim.label)));
    return g;
  }

  function colorbar(sc, x, plotH) {
    const id = `pc-grad-${Math.random().toString(36).slice(2, 8)}`;
    const grad = svg("linearGradient", { id, x1: 0, y1: 1, x2: 0, y2: 0 });
    VIRIDIS.forEach((c, i) => grad.append(svg("stop", { offset: i / (VIRIDIS.length - 1), "stop-color": c })));
    const g = svg("g", { class: "pc-colorbar" }, svg("defs", {}, grad));
    g.append(svg("rect", { x, y: MARGIN.top, width: 10, height: plotH, fill: `url(#${id})`, rx: 2 }));
    const [lo, hi] = [sc.ticks[0], sc.ticks[sc.ticks.length - 1]];
    g.append(svg("text", { x: x + 14, y: MARGIN.top + 4, class: "pc-tick" }, hi[1]));
    g.append(svg("text", { x: x + 14, y: MARGIN.top + plotH, class: "pc-tick" }, lo[1]));
    return g;
  }

  return { draw, viridis };
})();
