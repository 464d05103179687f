/* Shared helpers for every dashboard page: the JSON API client, DOM building, formatting.
 * No framework, no build step. The Content-Security-Policy allows only scripts from this
 * origin, so nothing here uses eval or inline handlers.
 *
 * Loading: every page script is `defer` (base.html) and runs in document order: this file
 * first, then plotly.js where a page loads it, then the page's own scripts. A page script
 * may use `T` and `Plotly` at its top level; a script added to a template must be `defer`
 * too (tests/browser/test_pages_http.py checks every template). */
"use strict";

const T = (() => {
  /** An error answered by the API in its one envelope: {"error": {code, message, field}}. */
  class ApiError extends Error {
    constructor(status, error) {
      super(error.message || `HTTP ${status}`);
      this.status = status;
      this.code = error.code || "http_error";
      this.field = error.field || null;
    }
  }

  /** fetch a JSON endpoint; state changes send a JSON body (the server refuses anything else). */
  /*  `text`: a body already written as JSON (the clone editor writes 0.0 as 0.0, which
   *  JSON.stringify cannot). */
  async function api(path, { method = "GET", body, text: bodyText, signal } = {}) {
    const init = { method, signal, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET") {
      init.headers["Content-Type"] = "application/json";
      init.body = bodyText !== undefined ? bodyText : JSON.stringify(body === undefined ? {} : body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (exc) {
      if (exc.name === "AbortError") throw exc;
      setConnection(false);
      throw new ApiError(0, { code: "network", message: "the dashboard server cannot be reached" });
    }
    setConnection(true);
    if (response.status === 401) {
      window.location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
    }
    const text = await response.text();
    let doc = null;
    try {
      doc = text ? JSON.parse(text) : {};
    } catch (_exc) {
      throw new ApiError(response.status, { code: "bad_response", message: `HTTP ${response.status}: not JSON` });
    }
    if (!response.ok) throw new ApiError(response.status, (doc && doc.error) || {});
    return doc;
  }

  /** GET ``path`` once for every caller that asks while it is in flight or within
   *  SHARED_MS of its answer: the scripts of one page asking for the same thing as they
   *  load make one request, whichever order they start in. A failure is not kept. */
  const SHARED_MS = 5000;
  const sharedAnswers = new Map();
  function shared(path) {
    let answer = sharedAnswers.get(path);
    if (!answer) {
      answer = api(path);
      sharedAnswers.set(path, answer);
      const forget = () => sharedAnswers.delete(path);
      answer.then(() => setTimeout(forget, SHARED_MS), forget);
    }
    return answer;
  }

  /** The top bar's "Sign out" (base.html; absent with --no-auth): POST /logout with a JSON
   *  body, like every state change (the server checks its origin), then the sign-in page. */
  function wireSignOut() {
    const button = document.getElementById("sign-out");
    if (!button) return;
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await api("/logout", { method: "POST", body: {} });
        window.location.assign("/login?signed_out=1");
      } catch (exc) {
        button.disabled = false;
        if (exc.status !== 401) toast(`Sign-out failed: ${exc.message}`);
      }
    });
  }

  function setConnection(ok) {
    const el = document.getElementById("conn-status");
    if (!el) return;
    el.textContent = ok ? "" : "offline: retrying";
    el.classList.toggle("bad", !ok);
  }

  /** Build an element: h("a", {href: "/x", class: "btn"}, "text", child, ...). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "dataset") Object.assign(el.dataset, value);
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else if (value === true) el.setAttribute(key, "");
      else el.setAttribute(key, String(value));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  // ------------------------------------------------------------------ formatting

  /** Metric values: finite numbers, or the strings "NaN", "Infinity", "-Infinity" -- the JSON
   *  wire form of NaN and ±Inf whose contract is the docstring of tracker/rules/jsonvalues.py. */
  function fmtValue(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") {
      if (value === "Infinity") return "+Inf";
      if (value === "-Infinity") return "-Inf";
      return value;
    }
    if (typeof value !== "number") return JSON.stringify(value);
    if (Number.isInteger(value) && Math.abs(value) < 1e9) return String(value);
    const abs = Math.abs(value);
    if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) return value.toExponential(3).replace(/\.?0+e/, "e");
    return String(Number(value.toPrecision(4)));
  }

  /** Config values as the user wrote them (strings unquoted, objects as compact JSON). */
  function fmtConfig(value) {
    if (value === null) return "null";
    if (value === undefined) return "";
    if (typeof value === "number") return fmtValue(value);
    if (typeof value === "string") return value;
    return JSON.stringify(value);
  }

  const pad = (n) => String(n).padStart(2, "0");

  function fmtTime(seconds) {
    if (seconds === null || seconds === undefined) return "";
    const d = new Date(seconds * 1000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "";
    if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)}s`;
    const s = Math.round(seconds);
    const d = Math.floor(s / 86400);
    const hh = Math.floor((s % 86400) / 3600);
    const mm = Math.floor((s % 3600) / 60);
    if (d) return `${d}d ${hh}h`;
    if (hh) return `${hh}h ${pad(mm)}m`;
    return `${mm}m ${pad(s % 60)}s`;
  }

  /** "attempt 2/2": this attempt and the attempts allowed so far (its retries plus one, more
   *  once requeued by hand: the server's attempts_allowed, never below the attempt). A queued
   *  job that already ran waits for its next attempt. Empty before the first attempt of a job
   *  that may run only once. */
  function attemptText(job) {
    const allowed = job.attempts_allowed ?? Math.max(job.max_retries + 1, job.attempt);
    if (!job.attempt) return allowed > 1 ? `up to ${allowed} attempts` : "";
    const byHand = allowed > job.max_retries + 1 ? " (requeued by hand)" : "";
    if (job.status === "queued") return `waiting for attempt ${job.attempt + 1}/${allowed}${byHand}`;
    return `attempt ${job.attempt}/${allowed}${byHand}`;
  }

  /** A run's duration; a running run's grows with the clock between refreshes. */
  function runDuration(run) {
    if (run.status === "running" && run.started_at) return Math.max(0, Date.now() / 1000 - run.started_at);
    return run.duration;
  }

  function fmtAge(seconds) {
    if (seconds === null || seconds === undefined) return "";
    const age = Math.max(0, Date.now() / 1000 - seconds);
    return `${fmtDuration(age)} ago`;
  }

  function fmtBytes(bytes) {
    if (bytes === null || bytes === undefined) return "";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = bytes;
    let i = 0;
    while (Math.abs(value) >= 1024 && i < units.length - 1) {
      value /= 1024;
      i += 1;
    }
    return `${i ? value.toFixed(value < 10 ? 2 : 1) : value} ${units[i]}`;
  }

  /** A metric key whose values are byte counts (sys/rss_bytes, sys/gpu0/allocated_bytes). */
  function isBytesKey(key) {
    return /(^|[/_.])bytes$/.test(String(key || ""));
  }

  /** A metric value as the key means it: byte counts with units, the rest as fmtValue. */
  function fmtMetric(key, value) {
    if (typeof value === "number" && isBytesKey(key)) return fmtBytes(value);
    return fmtValue(value);
  }

  const PYTHON = /(^|\/)python[\d.]*$/;

  /**
   * What a job runs, in a few words: the script (or `-m module`) and its arguments, without
   * the interpreter's path (`/home/me/proj/.venv/bin/python train.py --epochs 3` is
   * `train.py --epochs 3`). An absolute script path keeps its last two parts.
   */
  function commandSummary(argv) {
    const args = (argv || []).map(String);
    let i = 0;
    if (args.length && PYTHON.test(args[0])) {
      i = 1;
      while (i < args.length && args[i].startsWith("-") && args[i] !== "-m" && args[i] !== "-c") i += 1;
    }
    const rest = args.slice(i);
    if (rest.length && rest[0] !== "-m" && rest[0].startsWith("/")) {
      const parts = rest[0].split("/").filter(Boolean);
      if (parts.length > 2) rest[0] = `…/${parts.slice(-2).join("/")}`;
    }
    return rest.join(" ") || args.join(" ");
  }

  /** A config as `key=value` pairs with dotted keys (`lr=0.001 model.width=96`); with the
   *  server's `config_types`, a float keeps its point (`wd=0.0`); `only` (a Set of dotted
   *  keys): just those keys. */
  function configPairs(config, types, prefix = "", only = null) {
    const out = [];
    for (const [key, value] of Object.entries(config || {})) {
      const type = types && typeof types === "object" ? types[key] : undefined;
      if (value && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length) {
        out.push(...configPairs(value, type, `${prefix}${key}.`, only));
      } else if (only && !only.has(`${prefix}${key}`)) {
        continue;
      } else if (type === "float" && Number.isInteger(value) && !/e/i.test(String(value))) {
        out.push(`${prefix}${key}=${value}.0`);
      } else {
        out.push(`${prefix}${key}=${fmtConfig(value)}`);
      }
    }
    return out;
  }

  const STATUS_TITLES = {
    running: "running now",
    finished: "finished normally",
    succeeded: "finished normally",
    failed: "failed",
    crashed: "lost: no heartbeat from the process or its worker",
    queued: "waiting in the queue",
    killed: "stopped (SIGTERM, Ctrl-C or cancelled)",
    cancelled: "cancelled",
    timed_out: "stopped at its time limit",
    pruned: "stopped early by its sweep's pruner: it was doing worse than the other trials at this step",
  };

  /** A status badge; a failure class and hint are shown in it and in its tooltip. */
  function statusBadge(status, failureClass, hint) {
    const label = failureClass && status !== "finished" && failureClass !== status
      ? `${status} · ${failureClass}` : status;
    const title = [STATUS_TITLES[status] || status, hint].filter(Boolean).join(": ");
    // A run stopped on purpose (a cancelled job, Ctrl-C) is not a failure: neutral style.
    const cancelled = failureClass === "cancelled" ? " cancelled" : "";
    return h("span", { class: `badge status-${status}${cancelled}`, title, dataset: { status } }, label);
  }

  function toast(message, kind = "error") {
    const el = document.getElementById("toast");
    if (!el) return;
    el.textContent = message;
    el.className = `toast ${kind}`;
    el.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { el.hidden = true; }, kind === "error" ? 8000 : 4000);
  }

  /**
   * Call `fn` every `ms` while the page is visible; never two calls at once.
   * Returns {stop(), now()}. `fn` may return false to stop polling.
   */
  function poll(fn, ms) {
    let timer = null;
    let stopped = false;
    let busy = false;
    async function tick() {
      timer = null;
      if (stopped || busy) return;
      if (document.hidden) { schedule(); return; }
      busy = true;
      let keepGoing = true;
      try {
        keepGoing = (await fn()) !== false;
      } catch (exc) {
        if (!(exc instanceof ApiError) || exc.status !== 0) console.error(exc);
      } finally {
        busy = false;
      }
      if (keepGoing) schedule(); else stopped = true;
    }
    function schedule() {
      if (!stopped && timer === null) timer = setTimeout(tick, ms);
    }
    schedule();
    return {
      stop() { stopped = true; if (timer !== null) clearTimeout(timer); },
      now() { if (timer !== null) { clearTimeout(timer); timer = null; } tick(); },
    };
  }

  /** Query-string helpers: list values are comma-separated. */
  function params() {
    return new URLSearchParams(window.location.search);
  }

  function listParam(search, name) {
    if (!search.has(name)) return null;
    return search.getAll(name).flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean);
  }

  function runLink(run) {
    return h("a", { href: `/runs/${run.id}`, class: "run-link" }, run.name || `run ${run.id}`);
  }

  const PLOT_ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };

  /**
   * Text for plotly: it renders names, titles, hover text and tick labels as its own
   * pseudo-HTML (<a href>, <b>, <br>...), so every user string handed to it (run names,
   * metric and config keys, config values) goes through here and shows as written.
   */
  function plotText(text) {
    return String(text).replace(/[&<>]/g, (ch) => PLOT_ENTITIES[ch]);
  }

  // ------------------------------------------------------------------ theme

  /* theme.js applied the stored choice before the first paint (<html data-theme>); this
   * wires the top bar's picker, follows the system while the choice is "system", and
   * re-themes every plotly chart when the theme changes. */
  const THEME_KEY = "tracker.theme";
  const systemDark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function themeChoice() {
    return document.documentElement.dataset.themeChoice || "system";
  }

  function applyTheme(choice) {
    const root = document.documentElement;
    const dark = choice === "dark" || (choice === "system" && Boolean(systemDark && systemDark.matches));
    const before = root.dataset.theme;
    root.dataset.themeChoice = choice;
    root.dataset.theme = dark ? "dark" : "light";
    if (before !== root.dataset.theme) {
      themePlots();
      document.dispatchEvent(new CustomEvent("tracker:theme", { detail: { theme: root.dataset.theme } }));
    }
  }

  /** Choose "light", "dark" or "system"; remembered in this browser. */
  function setTheme(choice) {
    const value = choice === "light" || choice === "dark" ? choice : "system";
    try {
      if (value === "system") localStorage.removeItem(THEME_KEY);
      else localStorage.setItem(THEME_KEY, value);
    } catch (_exc) { /* storage disabled: the choice lasts for this page */ }
    applyTheme(value);
  }

  function wireTheme() {
    const select = document.getElementById("theme-select");
    if (select) {
      select.value = themeChoice();
      select.addEventListener("change", () => setTheme(select.value));
    }
    if (systemDark && systemDark.addEventListener) {
      systemDark.addEventListener("change", () => { if (themeChoice() === "system") applyTheme("system"); });
    }
  }

  /** The chart colours of the current theme, from app.css's --plot-* variables. */
  function plotTheme() {
    const css = getComputedStyle(document.documentElement);
    const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
    return { bg: v("--plot-bg", "#ffffff"), text: v("--plot-text", "#475569"), grid: v("--plot-grid", "#eef2f7"), line: v("--plot-line", "#cbd5e1") };
  }

  /** The layout keys (as Plotly.relayout takes them) that put `layout`'s plot in the theme. */
  function plotThemeUpdate(layout) {
    const c = plotTheme();
    const update = { paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: c.bg, "font.color": c.text };
    const axes = new Set(["xaxis", "yaxis", ...Object.keys(layout || {}).filter((k) => /^[xy]axis\d*$/.test(k))]);
    for (const axis of axes) {
      update[`${axis}.gridcolor`] = c.grid;
      update[`${axis}.linecolor`] = c.line;
      update[`${axis}.zerolinecolor`] = c.line;
    }
    return update;
  }

  /** Re-theme every chart on the page; a logged figure (inside [data-own-colours]) keeps its own. */
  function themePlots() {
    if (typeof Plotly === "undefined") return;
    for (const plot of document.querySelectorAll(".js-plotly-plot")) {
      if (plot.closest("[data-own-colours]")) continue;
      Plotly.relayout(plot, plotThemeUpdate(plot.layout)).catch((exc) => console.error(exc));
    }
  }

  // ------------------------------------------------------------------ plotly trace types

  /* The pages load a partial plotly.js bundle (scatter, heatmap, bar, histogram, box, violin,
   * pie, contour: web/static/vendor/README.md). A logged figure may use any trace type:
   * `plotlyFor(data)` loads the full bundle once when one of its types is not in the
   * partial one; it then replaces window.Plotly for every later call. */
  let knownTraces = null;
  let fullPlotly = null;

  async function plotlyFor(data) {
    const types = new Set((Array.isArray(data) ? data : []).map((t) => (t && t.type) || "scatter"));
    if (!knownTraces) knownTraces = new Set(Object.keys(Plotly.PlotSchema.get().traces));
    if ([...types].every((t) => knownTraces.has(t))) return;
    if (!fullPlotly) {
      fullPlotly = new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = document.body.dataset.plotlyFull;
        script.addEventListener("load", resolve);
        script.addEventListener("error", () => {
          fullPlotly = null;
          reject(new Error("the full plotly.js could not be loaded"));
        });
        document.head.append(script);
      });
    }
    await fullPlotly;
    knownTraces = null;
  }

  /** A unified diff as a <pre> with id ``id``: its first ``colouredLines`` lines as
   *  spans coloured by kind (file header, hunk, added, removed), the rest as ``rest``
   *  says: "plain" (one text node) or "count" (a muted "... N more lines"). */
  function diffView(diff, id, colouredLines, rest) {
    const kind = (line) => {
      if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ")) return "diff-file";
      if (line.startsWith("@@")) return "diff-hunk";
      if (line.startsWith("+")) return "diff-add";
      if (line.startsWith("-")) return "diff-del";
      return null;
    };
    const pre = h("pre", { id, class: "code-diff", tabindex: "0" });
    const lines = diff.split("\n");
    lines.slice(0, colouredLines).forEach((line, i) => {
      const text = i < lines.length - 1 ? `${line}\n` : line;
      const cls = kind(line);
      pre.append(cls ? h("span", { class: cls }, text) : document.createTextNode(text));
    });
    const more = lines.length - colouredLines;
    if (more > 0 && rest === "plain") pre.append(document.createTextNode(lines.slice(colouredLines).join("\n")));
    else if (more > 0) pre.append(h("span", { class: "muted" }, `… ${more} more lines`));
    return pre;
  }

  wireSignOut(); // deferred: the page is parsed, the top bar is there
  wireTheme();

  return {
    ApiError, api, shared, h, append, clear, fmtValue, fmtConfig, fmtTime, fmtDuration, fmtAge,
    fmtBytes, isBytesKey, fmtMetric, commandSummary, configPairs, runDuration, attemptText, statusBadge, toast, poll, params, listParam, runLink, plotText, diffView,
    setTheme, themeChoice, plotTheme, plotThemeUpdate, themePlots, plotlyFor,
  };
})();
