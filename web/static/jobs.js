/* The queue page: jobs (position, priority, worker, attempts, pending reason; cancel; clone
 * & edit), workers (GPUs, jobs, heartbeat age) and schedules (add, pause/resume, delete).
 * Refreshes every 3 s. ?clone_run=<id> or ?clone_job=<id> opens the clone editor; ?job=<id>
 * highlights a job. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const REFRESH_MS = 3000;
  const ACTIVE = new Set(["queued", "running"]);
  let statuses = "queued,running";
  const highlight = new Set();
  let differing = new Set(); // config keys that differ between the jobs listed
  let listed = 0;

  // -------------------------------------------------------------------- jobs

  function shorten(text, n) {
    return text.length > n ? `${text.slice(0, n - 1)}…` : text;
  }

  function resources(job) {
    const r = job.resources || {};
    const parts = [];
    if (r.gpus) parts.push(`${r.gpus} GPU${r.gpus > 1 ? "s" : ""}`);
    if (r.gpu_memory_bytes) parts.push(`≥ ${T.fmtBytes(r.gpu_memory_bytes)} free`);
    if (job.nproc_per_node) parts.push(`${job.nproc_per_node} procs`);
    return parts.join(", ") || "CPU";
  }

  function jobActions(job) {
    const buttons = [];
    if (ACTIVE.has(job.status) && !job.cancel_requested) {
      buttons.push(h("button", { type: "button", class: "btn small danger", onclick: () => cancelJob(job) }, "Cancel"));
    }
    buttons.push(h("button", { type: "button", class: "btn small", onclick: () => openClone("job", job.id) }, "Clone & edit"));
    return h("td", { class: "actions" }, buttons);
  }

  /** The script with its arguments, and the config keys that differ between the `count` items
   *  listed (the server's differing_config_keys, the compare view's rule) as key=value pairs:
   *  what sets the jobs apart, not a truncated whole config. The whole config is in the
   *  tooltip. */
  function commandCell(argv, config, types, differing, count) {
    const full = (argv || []).join(" ");
    const all = T.configPairs(config, types);
    // One item listed: nothing to tell it from, so its config (shortened) is what it is.
    const pairs = count > 1 ? T.configPairs(config, types, "", differing) : all;
    const tip = all.join("\n");
    let shown = null;
    if (pairs.length) shown = h("code", { class: "config", title: tip }, count > 1 ? pairs.join(" ") : shorten(pairs.join(" "), 70));
    else if (all.length) {
      shown = h("span", { class: "config-same muted small", title: tip },
        `${all.length} config key${all.length > 1 ? "s" : ""}, the same in every one listed`);
    }
    return h("td", { class: "cmd" },
      h("code", { class: "command", title: full }, shorten(T.commandSummary(argv), 70)),
      shown ? h("div", {}, shown) : null);
  }

  function jobRow(job) {
    // A requeued job keeps its last attempt's failure until it ends again: not shown while active.
    const done = !ACTIVE.has(job.status);
    const status = [T.statusBadge(job.status, done ? job.failure_class : null, done ? job.failure_hint : null)];
    if (job.cancel_requested && ACTIVE.has(job.status)) status.push(h("span", { class: "muted small" }, " stopping"));
    const where = [];
    if (job.worker) where.push(`on ${job.worker}`);
    if (job.external_id) where.push(`Slurm job ${job.external_id}`);
    if (T.attemptText(job)) where.push(T.attemptText(job));
    return h("tr", { id: `job-${job.id}`, class: highlight.has(job.id) ? "highlight" : null, dataset: { jobId: job.id, status: job.status } },
      h("td", {}, h("a", { href: `/jobs/${job.id}`, class: "job-link", title: "the job's page: spec, attempts, logs" }, h("strong", {}, `#${job.id}`)),
        h("div", { class: "muted small" }, job.project)),
      h("td", { class: "num" }, job.position ?? ""),
      h("td", {}, status, h("div", { class: "muted small worker" }, where.join(" · "))),
      h("td", { class: "num" }, job.priority),
      commandCell(job.argv, job.config, job.config_types, differing, listed),
      h("td", {}, resources(job)),
      h("td", { class: "reason" }, job.pending_reason || ""),
      h("td", { class: "nowrap", title: T.fmtTime(job.created_at) }, T.fmtAge(job.created_at)),
      h("td", {}, job.run_id ? h("a", { href: `/runs/${job.run_id}` }, `#${job.run_id}`) : ""),
      jobActions(job));
  }

  const FINISHED = ["succeeded", "failed", "cancelled", "timed_out", "crashed", "pruned"];

  /** What an empty tab says: what this tab would hold, and what the other tabs hold. */
  function emptyText(counts) {
    const list = (names) => names.filter((s) => counts[s]).map((s) => `${counts[s]} ${s.replace("_", " ")}`).join(", ");
    const finished = list(FINISHED);
    if (statuses === "queued,running") {
      return `No queued or running jobs. ${finished ? `Finished: ${finished} (see the Finished tab).` : "Submit one with `tracker submit train.py`."}`;
    }
    if (statuses) {
      const active = list(["queued", "running"]);
      return `No finished jobs yet.${active ? ` Active: ${active} (see the Active tab).` : ""}`;
    }
    return "No jobs yet. Submit one with `tracker submit train.py`, or clone a run from its page.";
  }

  async function loadJobs() {
    const params = new URLSearchParams({ limit: 200 });
    if (statuses) params.set("status", statuses);
    const doc = await api(`/api/v1/jobs?${params}`);
    differing = new Set(doc.differing_config_keys || []);
    listed = doc.jobs.length;
    clear(document.querySelector("#jobs-table tbody")).append(...doc.jobs.map(jobRow));
    el("jobs-empty").hidden = doc.jobs.length > 0;
    el("jobs-table").hidden = doc.jobs.length === 0;
    el("jobs-empty").textContent = emptyText(doc.counts || {});
    const counts = Object.entries(doc.counts || {}).sort();
    clear(el("job-counts")).append(...counts.map(([s, n]) => h("span", { class: `count-chip status-${s}` }, `${n} ${s}`)));
  }

  async function cancelJob(job) {
    if (!window.confirm(`Cancel job #${job.id}?`)) return;
    try {
      const doc = await api(`/api/v1/jobs/${job.id}/cancel`, { method: "POST", body: {} });
      T.toast(`Job #${job.id}: ${doc.result.replace("_", " ")}`, "ok");
    } catch (exc) {
      T.toast(exc.message);
    }
    refresh();
  }

  // ------------------------------------------------------------------ workers

  function gpuList(worker) {
    if (worker.executor && worker.executor !== "local") {
      return h("span", { class: "muted", title: "a dispatcher: the cluster scheduler hands out the GPUs" },
        `${worker.executor} dispatcher`);
    }
    if (!worker.gpus || !worker.gpus.length) return h("span", { class: "muted" }, "CPU only");
    return h("ul", { class: "gpu-list" }, worker.gpus.map((g) => h("li", {},
      h("strong", {}, `${g.index}`), ` ${g.name || "GPU"}`,
      g.total_bytes ? h("span", { class: "muted" }, ` · ${T.fmtBytes(g.total_bytes)}`) : null,
      g.free_bytes !== undefined ? h("span", { class: "muted" }, ` · ${T.fmtBytes(g.free_bytes)} free`) : null)));
  }

  async function loadWorkers() {
    const all = el("workers-all").checked ? "1" : "0";
    const doc = await api(`/api/v1/workers?all=${all}`);
    const body = clear(document.querySelector("#workers-table tbody"));
    for (const w of doc.workers) {
      const jobs = w.running_jobs.flatMap((id, i) => [i ? ", " : "", h("a", { href: `/jobs/${id}`, title: `job ${id}` }, `#${id}`)]);
      body.append(h("tr", { dataset: { workerId: w.id } },
        h("td", {}, h("strong", {}, w.host), h("span", { class: "muted" }, ` pid ${w.pid}`),
          h("div", { class: "muted small" }, w.id)),
        h("td", {}, h("span", { class: `badge worker-${w.status}` }, w.status)),
        h("td", {}, gpuList(w)),
        h("td", { class: "worker-jobs" },
          h("span", { title: "jobs running / jobs this worker runs at once" }, `${w.running_jobs.length}/${w.max_jobs} busy`),
          jobs.length ? h("div", { class: "muted small" }, "jobs ", jobs) : null),
        h("td", { class: w.status === "lost" ? "bad nowrap" : "nowrap", title: T.fmtTime(w.heartbeat_at) }, T.fmtAge(w.heartbeat_at)),
        h("td", { class: "nowrap" }, T.fmtTime(w.started_at))));
    }
    el("workers-empty").hidden = doc.workers.length > 0;
    el("workers-table").hidden = doc.workers.length === 0;
  }

  // ---------------------------------------------------------------- schedules

  /** A schedule's time as its cron reads it: "2026-12-04 05:00 UTC", in the schedule's own
   *  time zone (the API's ISO 8601 with offset); the browser's local time in the tooltip. */
  function zonedCell(iso, zone, name) {
    if (!iso) return h("td", { class: `nowrap ${name}` }, "");
    const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}):\d{2}(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$/.exec(iso);
    if (!m) return h("td", { class: `nowrap ${name}` }, iso);
    const offset = m[3] === "Z" ? "+00:00" : m[3];
    const label = zone === "UTC" || zone === "Etc/UTC" ? "UTC" : `${zone} (UTC${offset})`;
    const local = T.fmtTime(Date.parse(iso) / 1000);
    return h("td", { class: `nowrap ${name}`, title: `${iso}\nyour local time: ${local}` }, `${m[1]} ${m[2]} ${label}`);
  }

  async function loadSchedules() {
    const doc = await api("/api/v1/schedules");
    const body = clear(document.querySelector("#schedules-table tbody"));
    for (const s of doc.schedules) {
      const spec = s.spec || {};
      body.append(h("tr", { dataset: { scheduleId: s.id } },
        h("td", {}, s.name || `schedule ${s.id}`),
        h("td", {}, h("code", {}, s.cron)),
        h("td", {}, s.timezone),
        commandCell(spec.argv, spec.config, null, new Set(doc.differing_config_keys || []), doc.schedules.length),
        zonedCell(s.paused ? null : s.next_fire, s.timezone, "next-fire"),
        zonedCell(s.last_fire, s.timezone, "last-fire"),
        zonedCell(s.created, s.timezone, "created"),
        h("td", {}, h("span", { class: `badge ${s.paused ? "status-killed" : "status-running"}` }, s.paused ? "paused" : "active")),
        h("td", { class: "actions" },
          h("button", { type: "button", class: "btn small", onclick: () => pauseSchedule(s) }, s.paused ? "Resume" : "Pause"),
          h("button", { type: "button", class: "btn small danger", onclick: () => deleteSchedule(s) }, "Delete"))));
    }
    el("schedules-empty").hidden = doc.schedules.length > 0;
    el("schedules-table").hidden = doc.schedules.length === 0;
  }

  async function pauseSchedule(s) {
    try {
      await api(`/api/v1/schedules/${s.id}`, { method: "PATCH", body: { paused: !s.paused } });
    } catch (exc) {
      T.toast(exc.message);
    }
    loadSchedules();
  }

  async function deleteSchedule(s) {
    if (!window.confirm(`Delete schedule ${s.name || s.id}? Jobs it already queued stay.`)) return;
    try {
      await api(`/api/v1/schedules/${s.id}`, { method: "DELETE", body: {} });
    } catch (exc) {
      T.toast(exc.message);
    }
    loadSchedules();
  }

  el("schedule-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const form = new FormData(ev.target);
    const body = { cron: form.get("cron").trim(), timezone: form.get("timezone").trim() || "UTC" };
    body[form.get("source")] = Number(form.get("source_id"));
    if (form.get("name").trim()) body.name = form.get("name").trim();
    const error = el("schedule-error");
    try {
      await api("/api/v1/schedules", { method: "POST", body });
      error.hidden = true;
      ev.target.reset();
      T.toast("Schedule added", "ok");
    } catch (exc) {
      error.textContent = exc.field ? `${exc.field}: ${exc.message}` : exc.message;
      error.hidden = false;
    }
    loadSchedules();
  });

  // -------------------------------------------------------------------- wiring

  function openClone(kind, id) {
    CloneEditor.open({
      kind, id,
      onDone: (ids) => {
        ids.forEach((i) => highlight.add(i));
        const params = T.params();
        params.delete("clone_run");
        params.delete("clone_job");
        history.replaceState(null, "", `${location.pathname}${params.toString() ? `?${params}` : ""}`);
        if (statuses && !statuses.includes("queued")) selectStatus("queued,running");
        refresh();
      },
    }).catch((exc) => T.toast(exc.message));
  }

  function selectStatus(value) {
    statuses = value;
    for (const b of document.querySelectorAll(".card .segmented .seg[data-status]")) {
      b.classList.toggle("active", b.dataset.status === value);
    }
  }

  for (const b of document.querySelectorAll(".seg[data-status]")) {
    b.addEventListener("click", () => { selectStatus(b.dataset.status); loadJobs(); });
  }
  el("workers-all").addEventListener("change", loadWorkers);

  async function refresh() {
    await Promise.all([loadJobs(), loadWorkers(), loadSchedules()]);
  }

  async function start() {
    CloneEditor.init();
    const params = T.params();
    const focus = Number(params.get("job"));
    if (focus) {
      highlight.add(focus);
      selectStatus("");
    }
    try {
      await refresh();
    } catch (exc) {
      T.toast(exc.message);
    }
    if (focus && el(`job-${focus}`)) el(`job-${focus}`).scrollIntoView({ block: "center" });
    if (params.get("clone_run")) openClone("run", Number(params.get("clone_run")));
    else if (params.get("clone_job")) openClone("job", Number(params.get("clone_job")));
    T.poll(refresh, REFRESH_MS);
  }

  start();
})();
