/* "Clone & edit": open a run's or job's config in an editor (a typed form per key, or raw
 * JSON), optionally sweep keys over comma-separated values, and queue copies of its job with
 * the same command (POST /api/v1/{runs|jobs}/<id>/clone). The dashboard never takes a
 * command line: the copies keep the submitted job's argv, cwd and env. A run that no job ran
 * (reported over the API, or by a script run by hand) cannot be cloned: its recorded command
 * is shown on its page, never launched.
 *
 * "Sweep that learns" turns the sweep values into a search space for Optuna instead of a
 * grid: each key's text is sent as a `-c` override (`loguniform(1e-5,1e-1)`, `64,128`), with
 * the method, metric, goal, budget and pruner, to POST /api/v1/sweeps; the page then opens
 * the new sweep (/sweeps/<id>). */
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
  let types = {}; // the config's types tree (see typeAt)
  let mode = "form";
  const LEARN_FIELDS = ["method", "metric", "goal", "trials", "parallel", "prune", "name"];

  /** Whether the editor makes a sweep that learns (POST /api/v1/sweeps) instead of a grid. */
  function learning() {
    return el("clone-learn-on").checked;
  }

  function typeOf(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "list";
    if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
    if (typeof value === "object") return "object";
    return typeof value; // string, boolean
  }

  /** The type of the leaf at `path` in a types tree (the server's `config_types`, or
   * jsonTypes of the JSON text); falls back to what the parsed value looks like. JSON
   * parsing turns 0.0 into 0, so only the types tree knows that a key is a float. */
  function typeAt(types, path, value) {
    let node = types;
    for (const part of path) node = node && typeof node === "object" ? node[part] : undefined;
    const guess = typeOf(value);
    if (node === "float" && guess === "int") return "float";
    return typeof node === "string" && node === guess ? node : guess;
  }

  /** The types tree of a JSON text that JSON.parse accepted: the shape of the value with a
   * type at each leaf; a number written with "." or an exponent is a float (as Python reads
   * it), else an int. */
  function jsonTypes(text) {
    let i = 0;
    const space = () => { while (i < text.length && " \t\n\r".includes(text[i])) i += 1; };
    const token = (re) => { re.lastIndex = i; const m = re.exec(text); i = re.lastIndex; return m; };
    const STRING = /"(?:[^"\\]|\\.)*"/y;
    const SCALAR = /-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null/y;
    function value() {
      space();
      if (text[i] === "{") {
        i += 1;
        const out = {};
        space();
        if (text[i] === "}") { i += 1; return "object"; }
        for (;;) {
          space();
          const key = JSON.parse(token(STRING)[0]);
          space();
          i += 1; // ':'
          out[key] = value();
          space();
          if (text[i++] === "}") return out;
        }
      }
      if (text[i] === "[") {
        i += 1;
        space();
        if (text[i] === "]") { i += 1; return "list"; }
        for (;;) { value(); space(); if (text[i++] === "]") return "list"; }
      }
      if (text[i] === '"') { token(STRING); return "string"; }
      const m = token(SCALAR);
      if (m[0] === "true" || m[0] === "false") return "boolean";
      if (m[0] === "null") return "null";
      return m[1] || m[2] ? "float" : "int";
    }
    return value();
  }

  /** A number as its type writes it: a float keeps its point (0.0, 3.0), as Python would. */
  function numberText(value, type) {
    const text = JSON.stringify(value);
    return type === "float" && Number.isInteger(value) && !/[.eE]/.test(text) ? `${text}.0` : text;
  }

  /** JSON text of `value` with the number types of `types` kept (floats written with a
   * point); a string type on a list applies to its items. Indented by `step` when given. */
  function typedJson(value, types, step = "", indent = "") {
    if (typeof value === "number") return numberText(value, types);
    const inner = indent + step;
    const nl = step ? "\n" : "";
    const sep = step ? ": " : ":";
    if (Array.isArray(value)) {
      if (!value.length) return "[]";
      const itemType = typeof types === "string" ? types : undefined;
      if (value.every((v) => v === null || typeof v !== "object")) {
        // A list of plain values stays on one line: [0.1, 0.01] reads as a sweep.
        return `[${value.map((v) => typedJson(v, itemType)).join(step ? ", " : ",")}]`;
      }
      const items = value.map((v) => inner + typedJson(v, itemType, step, inner));
      return `[${nl}${items.join(`,${nl}`)}${nl}${indent}]`;
    }
    if (value && typeof value === "object") {
      const entries = Object.entries(value);
      if (!entries.length) return "{}";
      const items = entries.map(([k, v]) => `${inner}${JSON.stringify(k)}${sep}` +
        typedJson(v, types && typeof types === "object" ? types[k] : undefined, step, inner));
      return `{${nl}${items.join(`,${nl}`)}${nl}${indent}}`;
    }
    return JSON.stringify(value);
  }

  /** A value as the form shows it: floats keep their point. */
  function formText(value, type) {
    if (type === "list" || type === "object") return JSON.stringify(value);
    if (value === null) return "null";
    if (typeof value === "number") return numberText(value, type);
    return String(value);
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
    const text = formText(value, field.type);
    return h("input", { type: "text", value: text, name: field.key, "aria-label": field.key,
      spellcheck: "false", class: `t-${field.type}`, oninput: () => summarize() });
  }

  function buildForm(config, configTypes, sweeps) {
    types = configTypes || {};
    const oldSweeps = sweeps || new Map(fields.map((f) => [f.key, f.sweep ? f.sweep.value : ""]));
    fields = leaves(config).map(({ key, path, value }) => ({ key, path, type: typeAt(types, path, value) }));
    const body = clear(el("clone-rows"));
    for (const [i, field] of fields.entries()) {
      const value = leaves(config)[i].value;
      field.input = inputFor(field, value);
      const sweepable = !["list", "object"].includes(field.type);
      field.sweep = sweepable ? h("input", { type: "text", placeholder: SWEEP_HINTS[field.type], name: `sweep:${field.key}`,
        "aria-label": `sweep ${field.key}`, value: oldSweeps.get(field.key) || "", oninput: () => summarize() }) : null;
      body.append(h("tr", { dataset: { key: field.key } },
        h("th", { scope: "row" }, h("code", {}, field.key), h("span", { class: "type" }, field.type)),
        h("td", {}, field.input), h("td", {}, field.sweep || h("span", { class: "muted" }, "–"))));
    }
    if (!fields.length) body.append(h("tr", {}, h("td", { colspan: 3, class: "muted" }, "empty config: use the JSON editor to add keys")));
  }

  // ------------------------------------------------- refused fields, shown where they are

  /** An Error that names the input it is about (`input`: an element of the form). */
  function refused(message, input) {
    const exc = new Error(message);
    exc.input = input;
    return exc;
  }

  /** `fn()`, with the input named on any Error it throws. */
  function within(input, fn) {
    try {
      return fn();
    } catch (exc) {
      if (exc instanceof Error && !exc.input) exc.input = input;
      throw exc;
    }
  }

  /** Clear the marks of an earlier refusal; then mark `input` (red, aria-invalid, the
   *  message right under it) and, when `scroll`, bring it into view and focus it. */
  function markRefused(input, message, scroll) {
    for (const old of document.querySelectorAll("#clone-form .clone-field-error")) old.remove();
    for (const old of document.querySelectorAll("#clone-form [aria-invalid]")) {
      old.removeAttribute("aria-invalid");
      old.removeAttribute("aria-describedby");
      old.classList.remove("invalid");
    }
    if (!input) return;
    input.classList.add("invalid");
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", "clone-field-error");
    input.after(h("p", { id: "clone-field-error", class: "clone-field-error form-error" }, message));
    if (scroll) {
      input.scrollIntoView({ block: "center" });
      input.focus({ preventScroll: true });
    }
  }

  /** The form's input a server refusal names (its `field`: `priority`, a config key
   *  `config.<key>` or the key itself, `grid`), or null. */
  function inputForField(name) {
    if (!name) return null;
    if (name === "priority") return el("clone-priority");
    if (learning() && LEARN_FIELDS.includes(name)) return el(`clone-learn-${name}`);
    if (learning() && name === "overrides") return mode === "json" ? el("clone-sweep-json") : (fields.find((f) => f.sweep) || {}).sweep || null;
    if (mode === "json") return name === "grid" ? el("clone-sweep-json") : name.startsWith("config") ? el("clone-json") : null;
    const key = name.startsWith("config.") ? name.slice("config.".length) : name.replace(/^grid\./, "");
    const field = fields.find((f) => f.key === key);
    if (field) return name.startsWith("grid") ? field.sweep : field.input;
    return null;
  }

  /** The edited config and the sweep grid, validated, with their JSON texts (floats keep
   * their point); throws Error with a clear message naming the key and the rule. */
  function collect() {
    if (mode === "json") {
      const configText = el("clone-json").value.trim() || "{}";
      let config;
      try { config = JSON.parse(configText); } catch (exc) {
        throw refused(`config JSON: ${exc.message}`, el("clone-json"));
      }
      if (!config || typeof config !== "object" || Array.isArray(config)) throw refused("config JSON must be an object", el("clone-json"));
      const gridText = el("clone-sweep-json").value.trim() || "{}";
      let grid;
      try { grid = JSON.parse(gridText); } catch (exc) {
        throw refused(`sweep JSON: ${exc.message}`, el("clone-sweep-json"));
      }
      if (!grid || typeof grid !== "object" || Array.isArray(grid)) throw refused("sweep JSON must be an object: {\"key\": [values]}", el("clone-sweep-json"));
      if (learning()) return { config, grid: {}, configText, gridText: "{}", overrides: jsonOverrides(grid) };
      for (const [key, values] of Object.entries(grid)) {
        if (!Array.isArray(values) || !values.length) throw refused(`sweep ${key}: expected a non-empty list of values`, el("clone-sweep-json"));
      }
      return { config, grid, configText, gridText, overrides: [] };
    }
    const config = {};
    const configTypes = {};
    for (const field of fields) {
      setPath(config, field.path, within(field.input, () => parseValue(field, field.input.value)));
      setPath(configTypes, field.path, field.type);
    }
    const grid = learning() ? {} : collectGrid();
    const gridTypes = Object.fromEntries(fields.filter((f) => grid[f.key]).map((f) => [f.key, f.type]));
    return {
      config, grid, configTypes, gridTypes,
      configText: typedJson(config, configTypes), gridText: typedJson(grid, gridTypes),
      overrides: learning() ? formOverrides() : [],
    };
  }

  /** A sweep that learns searches each key's sweep text as written, a `-c` override of
   *  `tracker sweep` (`lr=loguniform(1e-5,1e-1)`, `width=64,128`): the server parses it. */
  function formOverrides() {
    return fields.filter((f) => f.sweep && f.sweep.value.trim()).map((f) => `${f.key}=${f.sweep.value.trim()}`);
  }

  /** The sweep JSON as overrides: `{"lr": "loguniform(1e-5,1e-1)"}` (a text: as written) or
   *  `{"width": [64, 128]}` (a list: its choices, each written as JSON). */
  function jsonOverrides(grid) {
    return Object.entries(grid).map(([key, value]) => {
      if (typeof value === "string") return `${key}=${value}`;
      if (Array.isArray(value) && value.length) return `${key}=${value.map((v) => JSON.stringify(v)).join(",")}`;
      throw refused(`sweep ${key}: expected a distribution such as "loguniform(1e-5,1e-1)" or a non-empty list of values`, el("clone-sweep-json"));
    });
  }

  /** The settings of a sweep that learns, as POST /api/v1/sweeps takes them. */
  function learnSettings() {
    const out = {};
    for (const name of LEARN_FIELDS) {
      const input = el(`clone-learn-${name}`);
      const value = input.value.trim();
      if (name === "trials" || name === "parallel") {
        if (!/^\d+$/.test(value)) throw refused(`${name}: expected a whole number`, input);
        out[name] = Number(value);
      } else if (value || name === "metric") {
        out[name] = value;
      }
    }
    return out;
  }

  function collectGrid() {
    const grid = {};
    for (const field of fields) {
      if (!field.sweep || !field.sweep.value.trim()) continue;
      const parts = field.sweep.value.split(",").map((s) => s.trim()).filter(Boolean);
      grid[field.key] = within(field.sweep, () => parts.map((p) => parseValue(field, p)));
    }
    return grid;
  }

  function jobCount(grid) {
    return Object.values(grid).reduce((n, values) => n * values.length, 1);
  }

  /** Validate the form; a refusal is shown in the footer and at its field (brought into
   *  view when `scroll`: on submit, where the field may be far above the button). */
  function summarize(scroll = false) {
    const error = el("clone-error");
    try {
      const { grid, overrides } = collect();
      if (learning()) {
        const settings = learnSettings();
        el("clone-summary").textContent = `a sweep that learns: up to ${settings.trials} trials, ${settings.method}, ` +
          `${overrides.length} key${overrides.length === 1 ? "" : "s"} searched`;
        error.hidden = true;
        markRefused(null);
        el("clone-submit").disabled = !source || !source.argv;
        return true;
      }
      const n = jobCount(grid);
      const sweep = Object.entries(grid).map(([k, v]) => `${k} × ${v.length}`).join(", ");
      el("clone-summary").textContent = n === 1 ? "1 job" : `${n} jobs (${sweep})`;
      error.hidden = true;
      markRefused(null);
      el("clone-submit").disabled = !source || !source.argv || n > MAX_JOBS;
      if (n > MAX_JOBS) throw new Error(`a sweep makes at most ${MAX_JOBS} jobs, this one ${n}`);
      return true;
    } catch (exc) {
      error.textContent = exc.message;
      error.hidden = false;
      markRefused(exc.input || null, exc.message, scroll);
      return false;
    }
  }

  /** Switch between the form and the JSON editor; both hold the same spec: the config and
   * the sweep (in JSON, `{"key": [values]}`). */
  function setMode(next) {
    if (next === mode) return;
    let dropped = [];
    if (next === "json") {
      let spec;
      try { spec = collect(); } catch (exc) { summarize(); return; }
      el("clone-json").value = typedJson(spec.config, spec.configTypes, "  ");
      el("clone-sweep-json").value = Object.keys(spec.grid).length ? typedJson(spec.grid, spec.gridTypes, "  ") : "";
      if (learning() && spec.overrides.length) {
        const texts = Object.fromEntries(spec.overrides.map((o) => [o.slice(0, o.indexOf("=")), o.slice(o.indexOf("=") + 1)]));
        el("clone-sweep-json").value = JSON.stringify(texts, null, 2);
      }
    } else {
      let spec;
      try { spec = collect(); } catch (exc) {
        el("clone-error").textContent = exc.message;
        el("clone-error").hidden = false;
        return;
      }
      const configTypes = jsonTypes(spec.configText);
      buildForm(spec.config, typeof configTypes === "object" ? configTypes : {}, new Map());
      const texts = new Map(spec.overrides.map((o) => [o.slice(0, o.indexOf("=")), o.slice(o.indexOf("=") + 1)]));
      for (const field of fields) {
        const values = spec.grid[field.key];
        if (field.sweep && values) field.sweep.value = values.map((v) => formText(v, field.type)).join(", ");
        if (field.sweep && texts.has(field.key)) field.sweep.value = texts.get(field.key);
      }
      dropped = [...Object.keys(spec.grid), ...texts.keys()].filter((k) => !fields.some((f) => f.key === k && f.sweep));
    }
    mode = next;
    for (const b of document.querySelectorAll("#clone-form .seg")) b.classList.toggle("active", b.dataset.mode === mode);
    el("clone-form-editor").hidden = mode !== "form";
    el("clone-json-editor").hidden = mode !== "json";
    if (summarize() && dropped.length) {
      el("clone-error").textContent = `sweep ${dropped.join(", ")}: not a key of the config, left out (add the key to the config first)`;
      el("clone-error").hidden = false;
    }
  }

  /** Open the editor on a run ({kind: "run", id}) or a job ({kind: "job", id}). */
  async function open({ kind, id, onDone }) {
    const doc = await api(`/api/v1/${kind}s/${id}`);
    const argv = kind === "run" ? (doc.job ? doc.job.argv : null) : doc.argv;
    source = { kind, id, onDone, argv };
    const config = doc.config;
    const configTypes = doc.config_types || {};
    el("clone-title").textContent = kind === "run" ? `Clone run ${doc.name} #${id}` : `Clone job #${id}`;
    el("clone-command").textContent = argv ? argv.join(" ")
      : `run ${id} was not submitted as a job: only submitted jobs can be cloned; use \`tracker submit\``;
    // The copies run the same code snapshot as their source (tracker.store.clone).
    const snapshot = (kind === "run" ? doc.job : doc)?.snapshot_id;
    el("clone-code").hidden = !snapshot;
    el("clone-code").textContent = snapshot ? `Same code: the copies run code snapshot #${snapshot}, as submitted.` : "";
    el("clone-priority").value = String(kind === "job" ? doc.priority : (doc.job ? doc.job.priority : 0));
    mode = "form";
    fields = [];
    buildForm(config || {}, configTypes, new Map());
    el("clone-json").value = typedJson(config || {}, configTypes, "  ");
    el("clone-sweep-json").value = "";
    el("clone-form-editor").hidden = false;
    el("clone-json-editor").hidden = true;
    for (const b of document.querySelectorAll("#clone-form .seg")) b.classList.toggle("active", b.dataset.mode === "form");
    el("clone-error").hidden = true;
    markRefused(null);
    el("clone-submit").disabled = !argv;
    el("clone-learn-on").checked = false;
    setLearning();
    summarize();
    el("clone-dialog").showModal();
  }

  async function submit(ev) {
    ev.preventDefault();
    if (!summarize(true)) return;
    const { grid, configText, gridText, overrides } = collect();
    const priority = Number(el("clone-priority").value || 0);
    if (!Number.isInteger(priority)) {
      el("clone-error").textContent = "priority: expected an integer";
      el("clone-error").hidden = false;
      markRefused(el("clone-priority"), "priority: expected an integer", true);
      return;
    }
    if (learning()) {
      submitLearning(configText, priority, overrides);
      return;
    }
    // Written by hand so that floats keep their point: {"wd": 0.0} stays a float.
    let text = `{"config":${configText},"priority":${JSON.stringify(priority)}`;
    if (Object.keys(grid).length) text += `,"grid":${gridText}`;
    text += "}";
    const button = el("clone-submit");
    button.disabled = true;
    try {
      const doc = await api(`/api/v1/${source.kind}s/${source.id}/clone`, { method: "POST", text });
      el("clone-dialog").close();
      T.toast(`Queued ${doc.job_ids.length === 1 ? "job" : "jobs"} ${doc.job_ids.map((i) => `#${i}`).join(", ")}`, "ok");
      if (source.onDone) source.onDone(doc.job_ids);
    } catch (exc) {
      showRefusal(exc);
    } finally {
      button.disabled = false;
    }
  }

  /** The server's refusal under the form, and on the input of the field it names. */
  function showRefusal(exc) {
    const message = exc.field ? `${exc.field}: ${exc.message}` : exc.message;
    el("clone-error").textContent = message;
    el("clone-error").hidden = false;
    markRefused(inputForField(exc.field), message, true);
  }

  /** POST /api/v1/sweeps: the source, its edited config and priority, the searched
   *  overrides and the settings; then open the new sweep's page. */
  async function submitLearning(configText, priority, overrides) {
    const button = el("clone-submit");
    let settings;
    try {
      settings = learnSettings();
    } catch (exc) {
      el("clone-error").textContent = exc.message;
      el("clone-error").hidden = false;
      markRefused(exc.input || null, exc.message, true);
      return;
    }
    const rest = JSON.stringify({ overrides, ...settings }).slice(1);
    const text = `{"${source.kind}_id":${source.id},"config":${configText},"priority":${priority},${rest}`;
    button.disabled = true;
    try {
      const doc = await api("/api/v1/sweeps", { method: "POST", text });
      el("clone-dialog").close();
      T.toast(`Sweep #${doc.id} started: ${doc.name}`, "ok");
      window.location.assign(`/sweeps/${doc.id}`);
    } catch (exc) {
      showRefusal(exc);
    } finally {
      button.disabled = false;
    }
  }

  /** Show the sweep's settings while "Sweep that learns" is on; the sweep column then takes
   *  distributions, and the button starts a sweep. */
  function setLearning() {
    const on = learning();
    el("clone-learn-fields").hidden = !on;
    el("clone-submit").textContent = on ? "Start sweep" : "Enqueue";
    for (const field of fields) {
      if (field.sweep) field.sweep.placeholder = on ? "e.g. loguniform(1e-5,1e-1) or 32, 64" : SWEEP_HINTS[field.type];
    }
  }

  function init() {
    el("clone-learn-on").addEventListener("change", () => { setLearning(); summarize(); });
    for (const name of LEARN_FIELDS) el(`clone-learn-${name}`).addEventListener("input", () => summarize());
    el("clone-form").addEventListener("submit", submit);
    el("clone-close").addEventListener("click", () => el("clone-dialog").close());
    el("clone-cancel").addEventListener("click", () => el("clone-dialog").close());
    el("clone-json").addEventListener("input", () => summarize());
    el("clone-sweep-json").addEventListener("input", () => summarize());
    el("clone-priority").addEventListener("input", () => summarize());
    for (const b of document.querySelectorAll("#clone-form .seg")) b.addEventListener("click", () => setMode(b.dataset.mode));
  }

  return { open, init, parseValue, leaves, jsonTypes, typedJson };
})();
