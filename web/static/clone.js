/* "Clone & edit": open a run's or job's config in an editor (a typed form per key, or raw
 * JSON), optionally sweep keys over comma-separated values, and queue copies of its job with
 * the same command (POST /api/v1/{runs|jobs}/<id>/clone). The dashboard never takes a
 * command line: the copies keep the submitted job's argv, cwd and env. A run that no job ran
 * (reported over the API, or by a script run by hand) cannot be cloned: its recorded command
 * is shown on its page, never launched. */
"use strict";

const CloneEditor = (() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const MAX_JOBS = 1000; // MAX_CONFIGS in tracker/rules/sweep.py: the server's cap too
  const SWEEP_HINTS = {
    int: "e.g. 32, 64, 128", float: "e.g. 0.1, 0.01", boolean: "true, false", string: "e.g. a, b", null: "e.g. 1, 2",
  };
  let source = null; // {kind, id, onDone, argv}: argv null when there is no job to copy
  let fields = []; // [{key, path, type, input, sweep}]
  let mode = "form";

  function typeOf(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "list";
    if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
    if (typeof value === "object") return "object";
    return typeof value; // string, boolean
  }

  /** Leaves of a nested config with their paths (a key may itself contain dots). */
  function leaves(obj, path = [], out = []) {
    for (const [key, value] of Object.entries(obj || {})) {
      const here = [...path, key];
      if (value && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length) {
        leaves(value, here, out);
      } else {
        out.push({ key: here.join("."), path: here, value });
      }
    }
    return out;
  }

  /** Set a nested key in place. Mirrors the one rule for dotted keys, set_path in
   * tracker/rules/sweep.py (the CLI's -c and the server's grid use it): a missing or null
   * intermediate becomes an object; any other non-object value there is an error; no part
   * may be empty. */
  function setPath(obj, path, value) {
    const key = path.join(".");
    if (!path.length || path.some((part) => part === "")) {
      throw new Error(`key '${key}': a dotted key must not have an empty part`);
    }
    let node = obj;
    for (const [depth, part] of path.slice(0, -1).entries()) {
      const child = node[part];
      if (child === undefined || child === null) {
        node[part] = {};
      } else if (typeof child !== "object" || Array.isArray(child)) {
        const prefix = path.slice(0, depth + 1).join(".");
        throw new Error(`key '${key}': cannot set it because '${prefix}' is ${JSON.stringify(child)}, not a mapping`);
      }
      node = node[part];
    }
    node[path[path.length - 1]] = value;
  }

  /** Parse the text of a field as its type; throws Error naming the key and the rule. */
  function parseValue(field, text) {
    const t = text.trim();
    switch (field.type) {
      case "int":
        if (!/^[-+]?\d+$/.test(t)) throw new Error(`${field.key}: expected an integer, got ${JSON.stringify(text)}`);
        return Number(t);
      case "float": {
        const v = Number(t);
        if (t === "" || !Number.isFinite(v)) throw new Error(`${field.key}: expected a number, got ${JSON.stringify(text)}`);
        return v;
      }
      case "boolean":
        if (!["true", "false"].includes(t.toLowerCase())) throw new Error(`${field.key}: expected true or false`);
        return t.toLowerCase() === "true";
      case "string":
        return text;
      case "null":
        if (t === "" || t === "null") return null;
        try { return JSON.parse(t); } catch (_exc) { return text; }
      default: {
        let v;
        try { v = JSON.parse(t); } catch (_exc) {
          throw new Error(`${field.key}: expected JSON (${field.type === "list" ? "[...]" : "{...}"})`);
        }
        const ok = field.type === "list" ? Array.isArray(v) : v !== null && typeof v === "object" && !Array.isArray(v);
        if (!ok) throw new Error(`${field.key}: expected a JSON ${field.type === "list" ? "list" : "object"}`);
        return v;
      }
    }
  }

  function inputFor(field, value) {
    if (field.type === "boolean") {
      const select = h("select", { "aria-label": field.key, name: field.key },
        h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
      select.value = String(value);
      return select;
    }
    const text = ["list", "object"].includes(field.type) ? JSON.stringify(value)
      : value === null ? "null" : String(value);
    return h("input", { type: "text", value: text, name: field.key, "aria-label": field.key,
      spellcheck: "false", class: `t-${field.type}`, oninput: summarize });
  }

  function buildForm(config) {
    const oldSweeps = new Map(fields.map((f) => [f.key, f.sweep ? f.sweep.value : ""]));
    fields = leaves(config).map(({ key, path, value }) => ({ key, path, type: typeOf(value) }));
    const body = clear(el("clone-rows"));
    for (const [i, field] of fields.entries()) {
      const value = leaves(config)[i].value;
      field.input = inputFor(field, value);
      const sweepable = !["list", "object"].includes(field.type);
      field.sweep = sweepable ? h("input", { type: "text", placeholder: SWEEP_HINTS[field.type], name: `sweep:${field.key}`,
        "aria-label": `sweep ${field.key}`, value: oldSweeps.get(field.key) || "", oninput: summarize }) : null;
      body.append(h("tr", { dataset: { key: field.key } },
        h("th", { scope: "row" }, h("code", {}, field.key), h("span", { class: "type" }, field.type)),
        h("td", {}, field.input), h("td", {}, field.sweep || h("span", { class: "muted" }, "–"))));
    }
    if (!fields.length) body.append(h("tr", {}, h("td", { colspan: 3, class: "muted" }, "empty config: use the JSON editor to add keys")));
  }

  /** The edited config and the sweep grid, validated; throws Error with a clear message. */
  function collect() {
    if (mode === "json") {
      let config;
      try { config = JSON.parse(el("clone-json").value || "{}"); } catch (exc) {
        throw new Error(`config JSON: ${exc.message}`);
      }
      if (!config || typeof config !== "object" || Array.isArray(config)) throw new Error("config JSON must be an object");
      return { config, grid: collectGrid(true) };
    }
    const config = {};
    for (const field of fields) setPath(config, field.path, parseValue(field, field.input.value));
    return { config, grid: collectGrid(false) };
  }

  function collectGrid(fromJsonMode) {
    const grid = {};
    for (const field of fields) {
      if (!field.sweep || !field.sweep.value.trim()) continue;
      if (fromJsonMode) continue;
      const parts = field.sweep.value.split(",").map((s) => s.trim()).filter(Boolean);
      grid[field.key] = parts.map((p) => parseValue(field, p));
    }
    return grid;
  }

  function jobCount(grid) {
    return Object.values(grid).reduce((n, values) => n * values.length, 1);
  }

  function summarize() {
    const error = el("clone-error");
    try {
      const { grid } = collect();
      const n = jobCount(grid);
      const sweep = Object.entries(grid).map(([k, v]) => `${k} × ${v.length}`).join(", ");
      el("clone-summary").textContent = n === 1 ? "1 job" : `${n} jobs (${sweep})`;
      error.hidden = true;
      el("clone-submit").disabled = !source || !source.argv || n > MAX_JOBS;
      if (n > MAX_JOBS) throw new Error(`a sweep makes at most ${MAX_JOBS} jobs, this one ${n}`);
      return true;
    } catch (exc) {
      error.textContent = exc.message;
      error.hidden = false;
      return false;
    }
  }

  function setMode(next) {
    if (next === mode) return;
    if (next === "json") {
      let config;
      try { ({ config } = collect()); } catch (exc) { summarize(); return; }
      el("clone-json").value = JSON.stringify(config, null, 2);
    } else {
      let config;
      try { config = JSON.parse(el("clone-json").value || "{}"); } catch (exc) {
        el("clone-error").textContent = `config JSON: ${exc.message}`;
        el("clone-error").hidden = false;
        return;
      }
      buildForm(config);
    }
    mode = next;
    for (const b of document.querySelectorAll("#clone-form .seg")) b.classList.toggle("active", b.dataset.mode === mode);
    el("clone-form-editor").hidden = mode !== "form";
    el("clone-json-editor").hidden = mode !== "json";
    summarize();
  }

  /** Open the editor on a run ({kind: "run", id}) or a job ({kind: "job", id}). */
  async function open({ kind, id, onDone }) {
    const doc = await api(`/api/v1/${kind}s/${id}`);
    const argv = kind === "run" ? (doc.job ? doc.job.argv : null) : doc.argv;
    source = { kind, id, onDone, argv };
    const config = doc.config;
    el("clone-title").textContent = kind === "run" ? `Clone run ${doc.name} #${id}` : `Clone job #${id}`;
    el("clone-command").textContent = argv ? argv.join(" ")
      : `run ${id} was not submitted as a job: only submitted jobs can be cloned; use \`tracker submit\``;
    el("clone-priority").value = String(kind === "job" ? doc.priority : (doc.job ? doc.job.priority : 0));
    mode = "form";
    fields = [];
    buildForm(config || {});
    el("clone-json").value = JSON.stringify(config || {}, null, 2);
    el("clone-form-editor").hidden = false;
    el("clone-json-editor").hidden = true;
    for (const b of document.querySelectorAll("#clone-form .seg")) b.classList.toggle("active", b.dataset.mode === "form");
    el("clone-error").hidden = true;
    el("clone-submit").disabled = !argv;
    summarize();
    el("clone-dialog").showModal();
  }

  async function submit(ev) {
    ev.preventDefault();
    if (!summarize()) return;
    const { config, grid } = collect();
    const priority = Number(el("clone-priority").value || 0);
    if (!Number.isInteger(priority)) {
      el("clone-error").textContent = "priority: expected an integer";
      el("clone-error").hidden = false;
      return;
    }
    const body = { config, priority };
    if (Object.keys(grid).length) body.grid = grid;
    const button = el("clone-submit");
    button.disabled = true;
    try {
      const doc = await api(`/api/v1/${source.kind}s/${source.id}/clone`, { method: "POST", body });
      el("clone-dialog").close();
      T.toast(`Queued ${doc.job_ids.length === 1 ? "job" : "jobs"} ${doc.job_ids.map((i) => `#${i}`).join(", ")}`, "ok");
      if (source.onDone) source.onDone(doc.job_ids);
    } catch (exc) {
      el("clone-error").textContent = exc.field ? `${exc.field}: ${exc.message}` : exc.message;
      el("clone-error").hidden = false;
    } finally {
      button.disabled = false;
    }
  }

  function init() {
    el("clone-form").addEventListener("submit", submit);
    el("clone-close").addEventListener("click", () => el("clone-dialog").close());
    el("clone-cancel").addEventListener("click", () => el("clone-dialog").close());
    el("clone-json").addEventListener("input", summarize);
    for (const b of document.querySelectorAll("#clone-form .seg")) b.addEventListener("click", () => setMode(b.dataset.mode));
  }

  return { open, init, parseValue, leaves };
})();
