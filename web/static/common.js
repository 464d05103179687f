/* Shared helpers for every dashboard page: the JSON API client, DOM building, formatting.
 * No framework, no build step. The Content-Security-Policy allows only scripts from this
 * origin, so nothing here uses eval or inline handlers. */
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

  wireSignOut(); // common.js loads at the end of <body>: the top bar is there

  return {
    ApiError, api, h, append, clear, fmtValue, fmtConfig, fmtTime, fmtDuration, fmtAge,
    fmtBytes, isBytesKey, fmtMetric, commandSummary, configPairs, runDuration, attemptText, statusBadge, toast, poll, params, listParam, runLink, plotText,
  };
})();
