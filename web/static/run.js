/* The run page: header, charts (run_charts.js), config tree, checkpoints, code, logs, events.
 * While the run is running, one poll every 2 s refreshes the header and appends new metric
 * points; the logs and events tabs follow their cursors (?after=). No page reload. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const main = document.getElementById("main");
  const runId = Number(main.dataset.runId);
  const LIVE_MS = 2000;
  const ACTIVE = new Set(["running", "queued"]);
  const options = { axis: "step", smoothing: 0, logY: false, filter: "" };
  const view = new RunCharts.View(runId, document.getElementById("chart-groups"), options);
  let run = null;
  let livePoll = null;

  // ------------------------------------------------------------------- header

  /** A fact of the header; empty ones are left out. */
  function fact(label, ...value) {
    if (!value.some((v) => v !== "" && v !== null && v !== undefined)) return [];
    return [h("div", { class: `fact${label === "Command" ? " wide" : ""}` }, h("dt", {}, label), h("dd", {}, ...value))];
  }

  /** Duration: the time the run ran (server's running_time: its attempts' running time,
   *  waits in the queue between them not counted), growing with the clock while it runs; the
   *  tooltip says what was counted. */
  function durationFact(r) {
    const t = r.running_time;
    if (!t || (t.seconds === null && t.since === null)) return fact("Duration", T.fmtDuration(T.runDuration(r)));
    const seconds = (t.seconds || 0) + (t.since !== null ? Math.max(0, Date.now() / 1000 - t.since) : 0);
    let title;
    if (t.attempts > 1) title = `Time its ${t.attempts} attempts ran, added up; waits in the queue between them are not counted.`;
    else if (t.attempts === 1) title = "Time its attempt ran, from the worker's start of the process; time in the queue is not counted.";
    else title = "Time from the run's start to its end.";
    if (t.since !== null) title += " Still running: it grows until the run ends.";
    const facts = fact("Duration", h("span", { class: "duration", title }, T.fmtDuration(seconds)));
    facts.forEach((f) => { f.title = title; });
    return facts;
  }

  function renderHeader(r) {
    document.title = `${r.name} · tracker`;
    document.getElementById("run-name").textContent = r.name;
    const project = document.getElementById("run-project");
    clear(project).append(h("a", { href: `/?project=${encodeURIComponent(r.project)}` }, r.project));
    clear(document.getElementById("run-status")).append(T.statusBadge(r.status, r.failure_class, r.failure_hint));
    document.getElementById("live-indicator").hidden = r.status !== "running";
    const failure = document.getElementById("run-failure");
    failure.hidden = !(r.failure_class || r.error);
    // A run stopped on purpose (a cancelled job, Ctrl-C) is not a failure: a neutral box.
    failure.classList.toggle("neutral", ["cancelled", "pruned"].includes(r.failure_class) || (r.status === "killed" && !r.failure_class && !r.error));
    const text = (v) => (typeof v === "string" && v.trim() && v !== "null" ? v : null);
    // T.append skips the missing parts (Element.append would print them as "null").
    T.append(clear(failure), [
      h("strong", {}, text(r.failure_class) || (r.status === "killed" ? "stopped" : "error")),
      text(r.failure_hint) ? h("span", { class: "hint" }, r.failure_hint) : null,
      text(r.error) ? h("code", { class: "error-text" }, r.error) : null,
    ]);
    const ended = r.ended_at ? T.fmtTime(r.ended_at) : (r.status === "running" ? "still running" : "");
    const facts = [
      ...fact("Started", T.fmtTime(r.started_at || r.created_at)),
      ...fact("Ended", ended),
      ...durationFact(r),
      ...fact("Host", r.host || "", r.pid ? h("span", { class: "muted" }, ` pid ${r.pid}`) : null),
      ...fact("Git commit", r.git_commit ? h("code", { title: r.git_commit }, r.git_commit.slice(0, 10)) : ""),
      ...fact("Exit code", r.exit_code === null ? "" : String(r.exit_code)),
      ...fact("Heartbeat", r.status === "running" ? T.fmtAge(r.heartbeat_at) : ""),
      ...fact("Job", r.job ? h("a", { href: `/jobs/${r.job.id}` }, `#${r.job.id}`) : "",
        r.job ? h("span", { class: "muted attempt" }, ` ${r.job.status}${T.attemptText(r.job) ? `, ${T.attemptText(r.job)}` : ""}`
          + (r.job.external_id ? ` · Slurm job ${r.job.external_id}` : "")) : null),
      ...fact("Command", r.command ? h("code", { class: "command" }, r.command.join(" ")) : ""),
    ];
    clear(document.getElementById("run-facts")).append(...facts);
    RunAnnotations.render(r); // name, star, tags and notes, edited in place (run_annotations.js)
    RunProfiles.render(r); // the Profile panel (profiles.js)
    // The Code tab: only a job that carries a code snapshot (`tracker submit`) has one.
    document.querySelector('.tab[data-tab="code"]').hidden = !snapshotId(r);
    const jobLink = document.getElementById("job-link");
    jobLink.hidden = !r.job;
    if (r.job) {
      jobLink.href = `/jobs/${r.job.id}`;
      jobLink.textContent = `Job ${r.job.id} · ${r.job.status}`;
    }
    // Only a submitted job can be cloned: a run reported over the API or by a script run by
    // hand has no job, and its recorded command is shown, never launched.
    renderDeleted(r);
    const cloneLink = document.getElementById("clone-link");
    if (!r.job) {
      cloneLink.removeAttribute("href");
      cloneLink.setAttribute("aria-disabled", "true");
      cloneLink.title = "This run was not submitted as a job: only submitted jobs can be cloned (use `tracker submit`).";
    }
  }

  // ------------------------------------------------------ delete and restore

  /** A deleted run is hidden from the runs table and the MLflow API until restored;
   *  `tracker gc` purges it for good after its grace period. */
  function renderDeleted(r) {
    const deleted = r.deleted_at !== null && r.deleted_at !== undefined;
    document.getElementById("delete-run").hidden = deleted;
    document.getElementById("restore-run").hidden = !deleted;
    const box = document.getElementById("run-deleted");
    box.hidden = !deleted;
    if (deleted) {
      clear(box).append(h("strong", {}, "deleted"),
        h("span", { class: "hint" }, ` on ${T.fmtTime(r.deleted_at)}: hidden from the runs table and searches; ` +
          "restore it, or `tracker gc` purges it after its grace period (30 days by default)."));
    }
  }

  async function changeLifecycle(action) {
    if (action === "delete" && !window.confirm(`Delete run ${run ? run.name : runId}? ` +
      "It is hidden from the runs table until restored.")) return;
    try {
      const fresh = await api(`/api/v1/runs/${runId}/${action}`, { method: "POST", body: {} });
      run = Object.assign(run || {}, fresh);
      renderDeleted(run);
      T.toast(`Run ${runId} ${action === "delete" ? "deleted" : "restored"}`, "ok");
    } catch (exc) {
      T.toast(exc.message);
    }
  }

  document.getElementById("delete-run").addEventListener("click", () => changeLifecycle("delete"));
  RunAnnotations.init(runId, (fresh) => { run = fresh; renderHeader(run); });
  RunProfiles.init(runId);
  document.getElementById("restore-run").addEventListener("click", () => changeLifecycle("restore"));

  // --------------------------------------------------------------------- tabs

  const tabs = [...document.querySelectorAll(".tab")];
  const loaders = {
    config: () => renderConfig(),
    checkpoints: () => loadCheckpoints(),
    media: () => RunMedia.open(runId),
    artifacts: () => RunArtifacts.open(runId),
    code: () => Code.open(),
    logs: () => Logs.open(),
    events: () => Events.refresh(),
  };

  function showTab(name) {
    for (const tab of tabs) {
      const active = tab.dataset.tab === name;
      tab.classList.toggle("active", active);
      tab.setAttribute("aria-selected", String(active));
    }
    for (const panel of document.querySelectorAll(".tab-panel")) panel.hidden = panel.dataset.panel !== name;
    document.getElementById("chart-controls").hidden = name !== "charts";
    if (loaders[name] && run) loaders[name]();
    if (name !== "charts") history.replaceState(null, "", `#${name}`);
    else history.replaceState(null, "", location.pathname + location.search);
  }

  for (const tab of tabs) tab.addEventListener("click", () => showTab(tab.dataset.tab));

  // --------------------------------------------------------------- chart controls

  const smoothing = document.getElementById("smoothing");
  let redrawQueued = false;
  function redrawSoon() {
    if (redrawQueued) return;
    redrawQueued = true;
    requestAnimationFrame(() => { redrawQueued = false; view.redraw(); });
  }
  smoothing.addEventListener("input", () => {
    options.smoothing = Number(smoothing.value);
    document.getElementById("smoothing-value").textContent = smoothing.value;
    redrawSoon();
  });
  document.getElementById("log-y").addEventListener("change", (ev) => { options.logY = ev.target.checked; redrawSoon(); });
  document.getElementById("x-axis").addEventListener("change", (ev) => { options.axis = ev.target.value; redrawSoon(); });
  document.getElementById("metric-filter").addEventListener("input", (ev) => {
    options.filter = ev.target.value.trim();
    view.applyFilter();
  });

  // ------------------------------------------------------------------- config

  function configNode(key, value) {
    if (value && typeof value === "object" && Object.keys(value).length) {
      const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
      const open = entries.length <= 30;
      return h("details", { class: "tree-node", open },
        h("summary", {}, h("span", { class: "tree-key" }, key),
          h("span", { class: "muted" }, Array.isArray(value) ? ` [${entries.length}]` : ` {${entries.length}}`)),
        h("div", { class: "tree-children" }, entries.map(([k, v]) => configNode(k, v))));
    }
    const type = value === null ? "null" : Array.isArray(value) ? "list" : typeof value;
    return h("div", { class: "tree-leaf" }, h("span", { class: "tree-key" }, key), h("span", { class: "muted" }, ": "),
      h("span", { class: `tree-value t-${type}` }, typeof value === "string" ? JSON.stringify(value) : T.fmtConfig(value)));
  }

  function renderConfig() {
    const tree = clear(document.getElementById("config-tree"));
    const entries = Object.entries(run.config || {});
    if (!entries.length) tree.append(h("p", { class: "empty" }, "This run has no config."));
    tree.append(...entries.map(([k, v]) => configNode(k, v)));
  }
  const setAll = (open) => document.querySelectorAll("#config-tree details").forEach((d) => { d.open = open; });
  document.getElementById("expand-all").addEventListener("click", () => setAll(true));
  document.getElementById("collapse-all").addEventListener("click", () => setAll(false));

  // -------------------------------------------------------------- checkpoints

  async function loadCheckpoints() {
    const doc = await api(`/api/v1/runs/${runId}/checkpoints`);
    const body = clear(document.querySelector("#checkpoints-table tbody"));
    document.getElementById("ckpt-count").textContent = doc.checkpoints.length || "";
    document.getElementById("no-checkpoints").hidden = doc.checkpoints.length > 0;
    document.getElementById("checkpoints-table").hidden = !doc.checkpoints.length;
    for (const c of doc.checkpoints) {
      const metrics = Object.entries(c.metrics || {}).map(([k, v]) => `${k} ${T.fmtMetric(k, v)}`).join(", ");
      body.append(h("tr", {},
        h("td", { class: "num" }, c.step),
        h("td", { class: "num" }, T.fmtBytes(c.bytes)),
        h("td", {}, h("span", { class: `badge ckpt-${c.state}` }, c.state)),
        h("td", {}, h("code", { title: c.sha256 }, (c.sha256 || "").slice(0, 12))),
        h("td", {}, metrics),
        h("td", {}, T.fmtTime(c.created_at)),
        h("td", {}, c.state === "ok" ? h("a", { href: c.download_url, class: "btn small", download: "" }, "Download") : ""),
      ));
    }
  }

  // --------------------------------------------------------------------- code

  /** The code snapshot of the run's job, or null (a job run from the worker's files, or a
   *  run started by hand). */
  const snapshotId = (r) => (r && r.job && r.job.snapshot_id) || null;

  /** The Code tab: the snapshot the run's job ran (GET /api/v1/snapshots/<id>, read once,
   *  when the tab opens): its commit, whether the tree had uncommitted changes (the diff,
   *  cut by the server when very long), its files. Every text goes in as a text node. */
  const Code = (() => {
    const FILES_SHOWN = 50; // a longer list is collapsed behind "Show all"
    const DIFF_LINES_COLOURED = 5000; // the rest of a longer diff is one plain text node
    const root = document.getElementById("code-snapshot");
    let shown = null; // the snapshot id loaded or loading

    async function open() {
      const id = snapshotId(run);
      if (!id || shown === id) return;
      shown = id;
      clear(root).append(h("p", { class: "muted" }, "loading…"));
      try {
        render(await api(`/api/v1/snapshots/${id}`));
      } catch (exc) {
        shown = null; // opening the tab again retries
        clear(root).append(h("p", { class: "query-error" }, `Code snapshot ${id} could not be read: ${exc.message}`));
      }
    }

    /** Lines added and removed by a unified diff (file headers not counted). */
    function diffStat(diff) {
      let added = 0;
      let removed = 0;
      for (const line of diff.split("\n")) {
        if (line.startsWith("+") && !line.startsWith("+++")) added += 1;
        else if (line.startsWith("-") && !line.startsWith("---")) removed += 1;
      }
      return { added, removed };
    }

    function fileRow(f) {
      return h("tr", { dataset: { path: f.path } },
        h("td", {}, h("code", {}, f.path)),
        h("td", { class: "num nowrap" }, T.fmtBytes(f.size)),
        h("td", {}, f.executable ? h("span", { class: "badge exec-mark", title: "executable: written with mode 755" }, "exec") : ""));
    }

    function filesView(s) {
      const list = s.file_list || [];
      const body = h("tbody", {}, list.slice(0, FILES_SHOWN).map(fileRow));
      const table = h("table", { id: "code-files", class: "data-table compact" },
        h("thead", {}, h("tr", {}, h("th", {}, "Path"), h("th", { class: "num" }, "Size"), h("th", {}, "Mode"))), body);
      const parts = [h("div", { class: "table-wrap code-files-wrap" }, table)];
      if (list.length > FILES_SHOWN) {
        const more = h("button", { id: "code-show-all", class: "btn small", type: "button" }, `Show all ${list.length} files`);
        more.addEventListener("click", () => {
          body.append(...list.slice(FILES_SHOWN).map(fileRow));
          more.remove();
        });
        parts.push(h("p", { class: "code-more" }, h("span", { class: "muted" }, `${FILES_SHOWN} of ${list.length} files shown `), more));
      }
      return parts;
    }

    function render(s) {
      const diff = typeof s.git_diff === "string" ? s.git_diff : "";
      let changes;
      if (diff) {
        const { added, removed } = diffStat(diff);
        changes = h("span", { class: "code-dirty" }, `yes: +${added} −${removed} lines`);
      } else if (s.git_commit) {
        changes = h("span", { class: "muted" }, "none: the commit as is");
      } else {
        changes = h("span", { class: "muted" }, "unknown: not taken in a git work tree");
      }
      const total = `${s.files} file${s.files === 1 ? "" : "s"} · ${T.fmtBytes(s.bytes)}`;
      const card = h("section", { id: "code-card", class: "card code-card", dataset: { snapshotId: String(s.id) } },
        h("div", { class: "card-head" }, h("h2", {}, "Code"), h("span", { class: "muted" }, total)),
        h("dl", { class: "facts code-facts" },
          ...fact("Commit", s.git_commit ? h("code", { id: "code-commit", title: s.git_commit }, s.git_commit.slice(0, 10)) : h("span", { class: "muted" }, "none")),
          ...fact("Uncommitted changes", changes),
          ...fact("Files", String(s.files)),
          ...fact("Size", T.fmtBytes(s.bytes)),
          ...fact("Project root", s.root_name ? h("code", {}, s.root_name) : ""),
          ...fact("Snapshot", h("span", { title: s.digest || "" }, `#${s.id}`), h("span", { class: "muted" }, ` taken ${T.fmtTime(s.created_at)}`))),
        diff ? h("h3", {}, "Uncommitted changes") : null,
        diff ? T.diffView(diff, "code-diff", DIFF_LINES_COLOURED, "plain") : null,
        h("h3", {}, "Files"),
        ...filesView(s));
      clear(root).append(card);
    }

    return { open };
  })();

  // ------------------------------------------------------------ media, files

  /** The Media and Artifacts tabs' counts (their contents load when opened). */
  function countFiles() {
    RunMedia.count(runId).then((n) => { document.getElementById("media-count").textContent = n || ""; }).catch(() => {});
    RunArtifacts.list(runId).then((rows) => {
      document.getElementById("artifact-count").textContent = rows.length || "";
    }).catch(() => {});
  }

  // ---------------------------------------------------------------- summary

  const SUMMARY_CHUNK = 40; // keys per request: one bucket each (min, max, last of the series)

  /** The final metrics: last, min and max of every key (one bucket per series, from the
   * server's rollups), sys/ keys last; bytes with units. */
  async function loadSummary(keys) {
    const ordered = [...keys].sort((a, b) => (a.startsWith("sys/") - b.startsWith("sys/")) || a.localeCompare(b));
    const rows = [];
    for (let i = 0; i < ordered.length; i += SUMMARY_CHUNK) {
      const chunk = ordered.slice(i, i + SUMMARY_CHUNK);
      const params = new URLSearchParams({ key: chunk.join(","), max_buckets: 1 });
      const doc = await api(`/api/v1/runs/${runId}/series?${params}`);
      doc.series.forEach((p, j) => rows.push([chunk[j], p]));
    }
    const body = clear(document.querySelector("#summary-table tbody"));
    const cell = (key, v, kind) => h("td", { class: `num${v === null && kind ? " nonfinite" : ""}` },
      v === null ? (kind || "–") : T.fmtMetric(key, v));
    for (const [key, p] of rows) {
      if (!p.last_step.length) continue;
      const n = p.last.length - 1;
      body.append(h("tr", { dataset: { key } },
        h("th", { scope: "row" }, h("code", {}, key)),
        cell(key, p.last[n], ["", "NaN", "+Inf", "-Inf"][p.last_kind[n]]),
        cell(key, p.min[n]), cell(key, p.max[n]),
        h("td", { class: "num" }, p.last_step[n])));
    }
    document.getElementById("metric-summary").hidden = body.children.length === 0;
    document.getElementById("summary-count").textContent = `${body.children.length} metrics`;
  }

  // -------------------------------------------------------------------- live

  /** "no metrics yet" only while the run can still log some. */
  function showNoMetrics(r, count) {
    const box = document.getElementById("no-metrics");
    box.hidden = count > 0;
    box.textContent = ACTIVE.has(r.status) ? "This run has no metrics yet." : "No metrics: this run ended without logging any.";
  }

  async function tick() {
    const [fresh, metrics] = await Promise.all([
      api(`/api/v1/runs/${runId}`),
      api(`/api/v1/runs/${runId}/metrics`),
    ]);
    run = fresh;
    view.run = fresh;
    renderHeader(fresh);
    await view.update(metrics.metrics);
    showNoMetrics(fresh, metrics.metrics.length);
    await loadSummary(metrics.metrics.map((m) => m.key));
    if (!document.querySelector('.tab-panel[data-panel="events"]').hidden) await Events.refresh();
    return ACTIVE.has(fresh.status);
  }

  async function start() {
    try {
      run = await api(`/api/v1/runs/${runId}`);
    } catch (exc) {
      clear(main).append(h("section", { class: "page-head" }, h("h1", {}, `Run ${runId}`)),
        h("p", { class: "query-error" }, exc.message));
      return;
    }
    view.run = run;
    renderHeader(run);
    const metrics = await api(`/api/v1/runs/${runId}/metrics`);
    view.addKeys(metrics.metrics.map((m) => m.key));
    showNoMetrics(run, metrics.metrics.length);
    loadSummary(metrics.metrics.map((m) => m.key)).catch((exc) => T.toast(exc.message));
    Events.count();
    countFiles();
    const first = location.hash.slice(1);
    showTab(tabs.some((t) => t.dataset.tab === first && !t.hidden) ? first : "charts");
    if (ACTIVE.has(run.status)) {
      livePoll = T.poll(async () => {
        const live = await tick();
        if (!live) {
          Logs.refresh();
          Events.refresh();
        }
        return live;
      }, LIVE_MS);
    }
  }

  // The logs and events tabs follow a cursor; they poll only while visible and the run is live.
  const Logs = (() => {
    let after = 0;
    let jobId;
    let following = null;
    const viewEl = document.getElementById("log-view");
    const stream = document.getElementById("log-stream");
    const follow = document.getElementById("log-follow");

    function append(chunks) {
      for (const c of chunks) viewEl.append(h("span", { class: `log-${c.stream}` }, c.text));
      while (viewEl.childNodes.length > 5000) viewEl.removeChild(viewEl.firstChild);
      if (follow.checked) viewEl.scrollTop = viewEl.scrollHeight;
    }

    async function refresh() {
      const params = new URLSearchParams({ after, limit: 500 });
      if (stream.value) params.set("stream", stream.value);
      if (!after) params.set("tail", "1");
      const doc = await api(`/api/v1/runs/${runId}/logs?${params}`);
      jobId = doc.job_id;
      document.getElementById("log-job").textContent = jobId
        ? `output of job ${jobId}`
        : "console output of this run, started by hand (teed by the client)";
      append(doc.chunks);
      after = doc.next_after;
      return doc.chunks.length;
    }

    async function open() {
      if (following) return;
      await refresh();
      if (ACTIVE.has(run.status)) {
        following = T.poll(async () => {
          if (document.querySelector('.tab-panel[data-panel="logs"]').hidden) return true;
          await refresh();
          return ACTIVE.has(run.status);
        }, LIVE_MS);
      }
    }

    stream.addEventListener("change", () => {
      after = 0;
      clear(viewEl);
      refresh();
    });
    return { open, refresh };
  })();

  const Events = (() => {
    let after = 0;
    let total = 0;

    async function refresh() {
      const doc = await api(`/api/v1/runs/${runId}/events?after=${after}&limit=500`);
      const body = document.querySelector("#events-table tbody");
      for (const e of doc.events) {
        body.append(h("tr", {},
          h("td", { class: "nowrap" }, T.fmtTime(e.at)),
          h("td", {}, h("span", { class: `badge event-${e.kind}` }, e.kind)),
          h("td", {}, e.message),
          h("td", {}, e.data ? h("code", {}, JSON.stringify(e.data)) : "")));
      }
      total += doc.events.length;
      after = doc.next_after;
      document.getElementById("event-count").textContent = total || "";
      document.getElementById("no-events").hidden = total > 0;
      document.getElementById("events-table").hidden = total === 0;
    }

    return { refresh, count: refresh };
  })();

  start();
})();
