/* Metric charts from the server's downsampled series payload (see web/API.md).
 *
 * Every bucket keeps min, max and last: the band (min..max) shows what a bucket hides, so a
 * one-step spike is always visible; the line is the last value. Buckets holding NaN or +-Inf
 * get a red marker. Smoothing is an exponential moving average over the last values, drawn
 * over the faint raw line. Depends on plotly.js (served from /static/vendor). */
"use strict";

const Charts = (() => {
  const PALETTE = [
    "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed",
    "#db2777", "#0891b2", "#65a30d", "#ea580c", "#4f46e5",
  ];
  const NONFINITE_COLOR = "#dc2626";
  const FIELDS = [
    "first_step", "last_step", "min", "max", "last", "last_kind",
    "count", "nan", "posinf", "neginf", "wall_time",
  ];
  const MARKERS_BELOW = 50; // points: fewer than this, each one gets a marker (lines alone vanish)
  const PLOT_CONFIG = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
  };

  /** One distinct colour per series: a fixed palette, or evenly spread hues for many runs. */
  function color(i, n) {
    if (n <= PALETTE.length) return PALETTE[i % PALETTE.length];
    const hue = Math.round((i * 137.508) % 360); // golden angle: neighbours differ most
    return `hsl(${hue}, 68%, ${i % 3 === 0 ? 38 : i % 3 === 1 ? 46 : 54}%)`;
  }

  function withAlpha(c, alpha) {
    if (c.startsWith("#")) {
      const n = parseInt(c.slice(1), 16);
      return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
    }
    return c.replace(/^hsl\((.*)\)$/, `hsla($1, ${alpha})`);
  }

  /** Debiased exponential moving average (as TensorBoard); null values stay gaps. */
  function ema(values, weight) {
    if (!weight) return values.slice();
    let acc = 0;
    let n = 0;
    return values.map((v) => {
      if (v === null || !Number.isFinite(v)) return null;
      acc = acc * weight + (1 - weight) * v;
      n += 1;
      return acc / (1 - weight ** n);
    });
  }

  function emptyPayload(key) {
    const out = { key, resolution: "full", lo: null, hi: null };
    for (const f of FIELDS) out[f] = [];
    return out;
  }

  /** Append the buckets of `next` that lie after `prev`'s last step (a live update). */
  function merge(prev, next) {
    if (!prev || !prev.last_step.length) return next;
    const end = prev.last_step[prev.last_step.length - 1];
    const start = next.first_step.findIndex((s) => s > end);
    if (start < 0) return prev;
    const out = { ...prev, hi: next.hi };
    for (const f of FIELDS) out[f] = prev[f].concat(next[f].slice(start));
    return out;
  }

  // ------------------------------------------------------------------- x axes

  const pad = (n, w = 2) => String(n).padStart(w, "0");

  /** Local time as the date string plotly shows as it is (plotly's dates carry no zone). */
  function localDate(seconds) {
    const d = new Date(seconds * 1000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  function parseLocalDate(text) {
    if (typeof text === "number") return text / 1000;
    return new Date(String(text).replace(" ", "T")).getTime() / 1000;
  }

  /** How x is shown: {mode: "step"|"wall"|"relative", t0: start time (s), unit: s per unit}. */
  function xAxis(mode, t0, span) {
    if (mode === "wall") return { mode, t0, unit: 1, title: "wall time", type: "date" };
    if (mode === "relative") {
      const [unit, label] = span > 3 * 3600 ? [3600, "h"] : span > 600 ? [60, "min"] : [1, "s"];
      return { mode, t0, unit, title: `time since start (${label})`, type: "linear" };
    }
    return { mode: "step", t0, unit: 1, title: "step", type: "linear" };
  }

  function xValues(payload, axis) {
    const gap = (t) => t === null || t === undefined;
    if (axis.mode === "wall") return payload.wall_time.map((t) => (gap(t) ? null : localDate(t)));
    if (axis.mode === "relative") return payload.wall_time.map((t) => (gap(t) ? null : (t - axis.t0) / axis.unit));
    return payload.last_step;
  }

  /**
   * A payload for a time axis: its buckets in wall-time order, so no line runs back in time.
   * The server sends buckets in step order, and wall time need not grow with the step: an
   * attempt that resumes from a checkpoint logs the steps after it again, later, and steps
   * the earlier attempt logged past the checkpoint keep their earlier times; a host clock
   * can step back. Where the step goes back in time order (a resume: a new segment) the line
   * breaks, at a gap bucket whose fields are all null. Buckets without a wall time are left
   * out. A payload already in order is returned as it is.
   */
  function inTimeOrder(p) {
    const times = p.wall_time;
    const order = [...times.keys()].filter((i) => times[i] !== null && times[i] !== undefined);
    if (order.length === times.length && order.every((v, j) => j === 0 || times[order[j - 1]] <= times[v])) return p;
    order.sort((a, b) => times[a] - times[b] || a - b);
    const out = { ...p };
    for (const f of FIELDS) out[f] = [];
    order.forEach((i, j) => {
      if (j > 0 && p.first_step[i] < p.last_step[order[j - 1]]) for (const f of FIELDS) out[f].push(null);
      for (const f of FIELDS) out[f].push(p[f][i]);
    });
    return out;
  }

  /** The last wall time of a payload (null when it has none): not always its last bucket's. */
  function lastTime(p) {
    const times = p.wall_time.filter((t) => t !== null && t !== undefined);
    return times.length ? Math.max(...times) : null;
  }

  /** The step window [lo, hi] that an x-axis range covers, for re-querying on zoom. */
  function stepWindow(payload, axis, range) {
    if (axis.mode === "step") {
      return [Math.max(0, Math.floor(Number(range[0]))), Math.max(0, Math.ceil(Number(range[1])))];
    }
    const toSeconds = axis.mode === "wall"
      ? parseLocalDate
      : (x) => axis.t0 + Number(x) * axis.unit;
    const [t0, t1] = [toSeconds(range[0]), toSeconds(range[1])];
    // Wall time need not grow with the step (see inTimeOrder): every bucket inside the time
    // window counts, with its neighbours in step order so the line reaches the edges.
    const times = payload.wall_time;
    let lo = null;
    let hi = null;
    for (let i = 0; i < times.length; i += 1) {
      if (times[i] === null || times[i] === undefined || times[i] < t0 || times[i] > t1) continue;
      const first = payload.first_step[Math.max(0, i - 1)];
      const last = payload.last_step[Math.min(times.length - 1, i + 1)];
      lo = lo === null ? first : Math.min(lo, first);
      hi = hi === null ? last : Math.max(hi, last);
    }
    if (lo === null || hi === null || hi < lo) return null;
    return [lo, hi];
  }

  // ------------------------------------------------------------------- traces

  const KIND_NAMES = ["", "NaN", "+Inf", "-Inf"];

  function nonFiniteLabel(p, i) {
    const parts = [];
    if (p.nan[i]) parts.push(`NaN ×${p.nan[i]}`);
    if (p.posinf[i]) parts.push(`+Inf ×${p.posinf[i]}`);
    if (p.neginf[i]) parts.push(`-Inf ×${p.neginf[i]}`);
    const steps = p.first_step[i] === p.last_step[i]
      ? `step ${p.first_step[i]}`
      : `steps ${p.first_step[i]}–${p.last_step[i]}`;
    return `${parts.join(", ")} at ${steps}`;
  }

  /** Red marks along the top edge (a rug on a hidden 0..1 axis) at the buckets holding NaN or
   * +-Inf: a non-finite value has no height of its own, and the marks must not rescale y. */
  function nonFiniteTrace(p, x, name) {
    const xs = [];
    const text = [];
    for (let i = 0; i < x.length; i += 1) {
      if (p.nan[i] + p.posinf[i] + p.neginf[i]) {
        xs.push(x[i]);
        text.push(nonFiniteLabel(p, i));
      }
    }
    if (!xs.length) return null;
    return {
      type: "scatter", mode: "markers", name: T.plotText(`${name}: NaN/Inf`), x: xs, y: xs.map(() => 0.97),
      yaxis: "y3", text, hovertemplate: "%{text}<extra></extra>", showlegend: false,
      marker: { color: NONFINITE_COLOR, symbol: "triangle-down", size: 8, opacity: 0.9 },
      meta: { role: "nonfinite" },
    };
  }

  /**
   * Traces for one series: band (min trace + max trace filled to it), the last-value line,
   * the smoothed line when smoothing > 0, and the NaN/Inf markers when there are any.
   */
  function seriesTraces(p, { axis, c, name: rawName = p.key, smoothing = 0, band = true, legend = false, unit = null }) {
    const x = xValues(p, axis);
    const name = T.plotText(rawName);
    const fmt = (v) => T.fmtMetric(p.key, v);
    const scaled = (ys) => (unit ? ys.map((v) => (v === null ? null : v / unit.factor)) : ys);
    const hover = p.last.map((v, i) => [
      p.min[i] === null ? "–" : fmt(p.min[i]),
      p.max[i] === null ? "–" : fmt(p.max[i]),
      p.first_step[i], p.last_step[i], p.count[i],
      v === null ? KIND_NAMES[p.last_kind[i]] || "–" : fmt(v),
    ]);
    const few = x.length < MARKERS_BELOW;
    const traces = [];
    if (band) {
      // Thin, faint edges: a one-bucket spike is a sliver of band, but its edge line shows.
      const edge = { type: "scatter", mode: "lines", x, line: { width: 0.8, color: withAlpha(c, 0.45) }, hoverinfo: "skip", showlegend: false };
      traces.push({ ...edge, y: scaled(p.min), name: `${name} min`, meta: { role: "band-min" } });
      traces.push({ ...edge, y: scaled(p.max), name: `${name} max`, fill: "tonexty", fillcolor: withAlpha(c, 0.2), meta: { role: "band-max" } });
    }
    traces.push({
      type: "scatter", mode: few ? "lines+markers" : "lines", x, y: scaled(p.last), name, customdata: hover,
      line: { color: c, width: smoothing ? 1 : 1.6 }, opacity: smoothing ? 0.3 : 1,
      marker: { color: c, size: 6 },
      showlegend: legend && !smoothing, legendgroup: name, meta: { role: "last" },
      hovertemplate: `<b>${name}</b> %{customdata[5]}<br>` +
        "min %{customdata[0]} · max %{customdata[1]}<br>steps %{customdata[2]}–%{customdata[3]} (%{customdata[4]} points)<extra></extra>",
    });
    if (smoothing) {
      traces.push({
        type: "scatter", mode: "lines", x, y: scaled(ema(p.last, smoothing)), name: `${name} (smoothed)`,
        line: { color: c, width: 2 }, showlegend: legend, legendgroup: name, hoverinfo: "skip",
        meta: { role: "smoothed" },
      });
    }
    const marks = nonFiniteTrace(p, x, rawName);
    if (marks) traces.push(marks);
    return traces;
  }

  const BYTE_UNITS = [["B", 1], ["KiB", 1024], ["MiB", 1024 ** 2], ["GiB", 1024 ** 3], ["TiB", 1024 ** 4]];

  /** The unit to draw byte counts in: the largest one the biggest value reaches. */
  function bytesUnit(maxAbs) {
    let unit = BYTE_UNITS[0];
    for (const u of BYTE_UNITS) if (maxAbs >= u[1]) unit = u;
    return { name: unit[0], factor: unit[1] };
  }

  /** Finite [min, max] over the buckets of some payloads, or null when there is none. */
  function extent(payloads) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const p of payloads) {
      for (const arr of [p.min, p.max, p.last]) {
        for (const v of arr) {
          if (v === null || !Number.isFinite(v)) continue;
          lo = Math.min(lo, v);
          hi = Math.max(hi, v);
        }
      }
    }
    return lo <= hi ? [lo, hi] : null;
  }

  /**
   * The y axis settings that keep a chart honest: a series that never goes below zero gets an
   * axis that never does either (RSS at -0.3 GiB is nonsense), and a constant series gets a
   * range around its value (plotly draws lr = 1e-3 at "0" on a -1..1 axis otherwise).
   * `ext`: the finite [min, max] in the units drawn.
   */
  function yRange(ext, { logY = false, zero = false } = {}) {
    if (!ext) return {};
    const [lo, hi] = ext;
    if (lo === hi) {
      if (logY && lo > 0) return { range: [Math.log10(lo) - 0.5, Math.log10(lo) + 0.5] };
      if (logY) return {};
      const d = Math.abs(lo) * 0.5 || 1;
      return { range: lo >= 0 && zero ? [0, lo + d] : [lo - d, lo + d] };
    }
    if (logY) return {};
    if (lo >= 0) return { rangemode: zero ? "tozero" : "nonnegative" };
    return {};
  }

  /**
   * Whether a chart draws itself on a log y axis although Log y is off: its values are all
   * positive and span AUTO_LOG_DECADES decades or more, so on a linear axis everything
   * before the largest values is a flat line at zero (a loss that diverged to 1e25 hides
   * where it left its level, and the doctor's marker there sits on nothing visible).
   */
  const AUTO_LOG_DECADES = 6;
  function autoLogY(ext) {
    return Boolean(ext) && ext[0] > 0 && Math.log10(ext[1] / ext[0]) >= AUTO_LOG_DECADES;
  }

  /** Step ticks are whole numbers: a short run (<= 10 steps) gets one tick per step. */
  function stepTicks(axis, payloads) {
    if (axis.mode !== "step") return {};
    let lo = Infinity;
    let hi = -Infinity;
    for (const p of payloads) {
      if (!p.last_step.length) continue;
      lo = Math.min(lo, p.first_step[0]);
      hi = Math.max(hi, p.last_step[p.last_step.length - 1]);
    }
    return { tickformat: "d", ...(hi - lo <= 10 ? { dtick: 1, tick0: 0 } : {}) };
  }

  function layout({ axis, logY = false, height = 260, yTitle = "", legend = false, revision = "" }) {
    const theme = T.plotTheme(); // light or dark (app.css); T.themePlots re-themes on a switch
    return {
      height,
      margin: { l: 58, r: 14, t: 10, b: 40 },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: theme.bg,
      font: { family: "Inter, system-ui, -apple-system, Segoe UI, sans-serif", size: 11, color: theme.text },
      xaxis: {
        title: { text: T.plotText(axis.title), font: { size: 11 } }, type: axis.type, gridcolor: theme.grid,
        zeroline: false, linecolor: theme.line, automargin: true,
      },
      yaxis: {
        title: { text: T.plotText(yTitle), font: { size: 11 } }, type: logY ? "log" : "linear", gridcolor: theme.grid,
        zeroline: false, linecolor: theme.line, exponentformat: "e", automargin: true,
      },
      yaxis3: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      hovermode: "closest",
      showlegend: legend,
      legend: { orientation: "h", y: -0.25, font: { size: 10 } },
      uirevision: revision,
    };
  }

  return {
    PLOT_CONFIG, MARKERS_BELOW, color, withAlpha, ema, emptyPayload, merge, xAxis, xValues, inTimeOrder, lastTime, stepWindow,
    seriesTraces, layout, bytesUnit, extent, yRange, stepTicks, autoLogY, AUTO_LOG_DECADES,
  };
})();
