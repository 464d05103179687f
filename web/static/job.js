/* The job page (/jobs/<id>): the job's spec, its code snapshot, every attempt (where it ran:
 * a local worker or a Slurm job; its times, exit code, failure class and hint) and each
 * attempt's own output, its run and the jobs cloned from it; cancel and clone & edit.
 * Reads GET /api/v1/jobs/<id> (every 2 s while the job is queued or running),
 * /api/v1/jobs/<id>/logs?attempt=N (followed while that attempt runs) and, once,
 * /api/v1/snapshots/<id>. Every text goes in as a text node. */
"use strict";

(() => {
  const { h, api, clear } = T;
  const el = (id) => document.getElementById(id);
  const jobId = Number(document.getElementById("main").dataset.jobId);
  const LIVE_MS = 2000;
  const ACTIVE = new Set(["queued", "running"]);
  const DIFF_LINES_SHOWN = 2000; // a longer diff: the rest is on the run's Code tab
  let job = null;
  let poller = null;

  /** One fact of a <dl class="facts"> (the run page's layout), or none when it has no value. */
  const fact = (label, ...value) => {
    const shown = value.filter((v) => v !== null && v !== undefined && v !== "");
    return shown.length ? [h("div", { class: "fact" }, h("dt", {}, label), h("dd", {}, ...shown))] : [];
  };

  // --------------------------------------------------------------------- head

  function renderHead(j) {
    document.title = `Job ${j.id} · tracker`;
    el("job-project").textContent = j.project;
    el("job-status").replaceChildren(T.statusBadge(j.status, ACTIVE.has(j.status) ? null : j.failure_class,
      ACTIVE.has(j.status) ? null : j.failure_hint));
    el("job-live").hidden = !ACTIVE.has(j.status);
    const runLink = el("job-run-link");
    runLink.hidden = !j.run_id;
    if (j.run_id) {
      runLink.href = `/runs/${j.run_id}`;
      runLink.textContent = j.run ? `Run ${j.run_id} · ${j.run.status}` : `Run ${j.run_id}`;
    }
    el("job-cancel").hidden = !ACTIVE.has(j.status) || j.cancel_requested;
    const failure = el("job-failure");
    const failed = !ACTIVE.has(j.status) && (j.failure_class || j.failure_hint);
    failure.hidden = !failed;
    failure.classList.toggle("neutral", j.status === "cancelled" || j.status === "pruned");
    if (failed) {
      T.append(clear(failure), [
        h("strong", {}, j.failure_class || j.status),
        j.failure_hint ? h("span", { class: "hint" }, ` ${j.failure_hint}`) : null,
      ]);
    }
    const where = [];
    if (j.worker) where.push(j.worker);
    if (j.external_id) where.push(`Slurm job ${j.external_id}`);
    const facts = [
      ...fact("Created", T.fmtTime(j.created_at)),
      ...fact("Started", T.fmtTime(j.started_at)),
      ...fact("Ended", j.ended_at ? T.fmtTime(j.ended_at) : (j.status === "running" ? "still running" : "")),
      ...fact("Attempt", T.attemptText(j)),
      ...fact("Queue position", j.position ? String(j.position) : ""),
      ...fact("Worker", where.join(" · ")),
      ...fact("Exit code", j.exit_code === null || j.exit_code === undefined ? "" : String(j.exit_code)),
      ...fact("Pending reason", j.status === "queued" ? (j.pending_reason || "") : ""),
      ...fact("Stopping", j.cancel_requested && ACTIVE.has(j.status) ? "cancel requested: the worker stops it" : ""),
    ];
    clear(el("job-facts")).append(...facts);
  }

  // --------------------------------------------------------------------- spec

  function specRow(key, ...value) {
    const shown = value.filter((v) => v !== null && v !== undefined && v !== "");
    if (!shown.length) return null;
    return h("tr", { dataset: { key } }, h("th", { scope: "row" }, key), h("td", {}, ...shown));
  }

  function renderSpec(j) {
    const r = j.resources || {};
    const rows = [
      specRow("Command", h("code", { class: "command" }, (j.argv || []).join(" "))),
      specRow("Working directory", j.cwd ? h("code", {}, j.cwd) : ""),
      specRow("Config", ...T.configPairs(j.config || {}, j.config_types).map((p) => h("code", { class: "config-pair" }, p))),
      specRow("Priority", String(j.priority)),
      specRow("GPUs", String(r.gpus || 0), r.gpu_memory_bytes ? h("span", { class: "muted" }, ` · ≥ ${T.fmtBytes(r.gpu_memory_bytes)} free each`) : null),
      specRow("Processes per node", j.nproc_per_node ? String(j.nproc_per_node) : ""),
      specRow("CPUs", r.cpus ? String(r.cpus) : ""),
      specRow("Memory", r.memory_bytes ? T.fmtBytes(r.memory_bytes) : ""),
      specRow("Slurm options", (r.sbatch || []).length ? h("code", {}, r.sbatch.join(" ")) : ""),
      specRow("Retries", `${j.max_retries}`, h("span", { class: "muted" },
        j.retry_on_failure ? " · also after a failure of the script" : " · after a crash, timeout or lost node")),
      specRow("Timeout", j.timeout_s ? T.fmtDuration(j.timeout_s) : "none"),
      specRow("Fail on", j.fail_on ? h("code", {}, j.fail_on) : ""),
      specRow("Environment", (j.env_keys || []).length ? h("span", { title: "values are never shown" }, j.env_keys.join(", ")) : ""),
      specRow("Schedule", j.schedule_id ? `${j.schedule_name || `schedule ${j.schedule_id}`}` : ""),
      specRow("Cloned from", j.parent_job_id ? h("a", { href: `/jobs/${j.parent_job_id}` }, `Job ${j.parent_job_id}`) : ""),
      specRow("Not before", j.status === "queued" && j.not_before ? T.fmtTime(j.not_before) : ""),
    ];
    T.append(clear(document.querySelector("#job-spec tbody")), rows);
  }

  // --------------------------------------------------------------------- code

  async function renderCode(j) {
    const root = el("job-code");
    const links = el("job-code-links");
    if (!j.snapshot_id) {
      clear(links);
      clear(root).append(h("p", { class: "muted" },
        "No code snapshot: this job runs the files on the worker's host (submitted with --no-snapshot, or before snapshots)."));
      return;
    }
    let s;
    try {
      s = await api(`/api/v1/snapshots/${j.snapshot_id}`);
    } catch (exc) {
      clear(root).append(h("p", { class: "query-error" }, `Code snapshot ${j.snapshot_id} could not be read: ${exc.message}`));
      return;
    }
    clear(links).append(
      j.run_id ? h("a", { href: `/runs/${j.run_id}#code` }, "files on the run's Code tab") : null,
      j.run_id ? " · " : null,
      h("a", { href: `/api/v1/snapshots/${s.id}` }, `snapshot ${s.id} (JSON)`));
    const diff = typeof s.git_diff === "string" ? s.git_diff : "";
    const changed = diff ? diff.split("\n").filter((l) => /^[+-](?![+-]{2})/.test(l)).length : 0;
    const facts = h("dl", { class: "facts code-facts" },
      ...fact("Commit", s.git_commit ? h("code", { id: "job-commit", title: s.git_commit }, s.git_commit.slice(0, 10)) : h("span", { class: "muted" }, "none")),
      ...fact("Uncommitted changes", diff ? h("span", { class: "code-dirty" }, `yes: ${changed} line${changed === 1 ? "" : "s"} changed`)
        : h("span", { class: "muted" }, s.git_commit ? "none" : "unknown: not a git work tree")),
      ...fact("Files", h("span", { id: "job-files" }, String(s.files))),
      ...fact("Size", T.fmtBytes(s.bytes)),
      ...fact("Project root", s.root_name ? h("code", {}, s.root_name) : ""));
    const parts = [facts];
    if (diff) parts.push(h("details", { class: "job-diff" }, h("summary", {}, "Uncommitted diff"), T.diffView(diff, "job-diff", DIFF_LINES_SHOWN, "count")));
    clear(root).append(...parts);
  }

  // ----------------------------------------------------------------- attempts

  function ranOn(a) {
    const parts = [];
    if (a.executor === "slurm" || a.external_id) {
      parts.push(h("span", { class: "badge executor" }, a.executor || "cluster"));
      if (a.external_id) parts.push(" ", h("span", { class: "slurm-id" }, `Slurm job ${a.external_id}`));
    } else if (a.executor) {
      parts.push(h("span", { class: "badge executor" }, a.executor === "local" ? "local worker" : a.executor));
    }
    if (a.worker) parts.push(h("div", { class: "muted small", title: "the worker or dispatcher that held the lease" }, a.worker));
    return parts;
  }

  function renderAttempts(j) {
    const body = clear(document.querySelector("#job-attempts tbody"));
    for (const a of j.attempts) {
      const live = a.status === "running";
      const duration = a.ended_at ? a.ended_at - a.started_at : (live ? Date.now() / 1000 - a.started_at : null);
      body.append(h("tr", { id: `attempt-${a.attempt}`, dataset: { attempt: a.attempt, status: a.status } },
        h("td", {}, h("strong", {}, `#${a.attempt}`)),
        h("td", { class: "attempt-status" }, T.statusBadge(a.status, a.failure_class, a.failure_hint),
          a.failure_hint ? h("div", { class: "muted small hint" }, a.failure_hint) : null),
        h("td", { class: "ran-on" }, ...ranOn(a)),
        h("td", { class: "nowrap" }, T.fmtTime(a.started_at)),
        h("td", { class: "nowrap" }, a.ended_at ? T.fmtTime(a.ended_at) : (live ? "running" : "")),
        h("td", { class: "num nowrap" }, T.fmtDuration(duration)),
        h("td", { class: "num exit-code" }, a.exit_code === null || a.exit_code === undefined ? "" : String(a.exit_code)),
        h("td", {}, a.resume_checkpoint ? h("code", { title: a.resume_checkpoint }, a.resume_checkpoint.split("/").pop()) : ""),
        h("td", {}, h("button", { type: "button", class: "btn small", onclick: () => Logs.show(a.attempt) }, "Logs"))));
    }
    el("job-no-attempts").hidden = j.attempts.length > 0;
    el("job-attempts").hidden = j.attempts.length === 0;
    const failedBefore = j.attempts.filter((a) => a.status !== "running" && a.status !== "succeeded").length;
    el("job-attempts-summary").textContent = j.attempts.length
      ? `${j.attempts.length} attempt${j.attempts.length > 1 ? "s" : ""}${failedBefore ? `, ${failedBefore} not succeeded` : ""}` : "";
  }

  function renderChildren(j) {
    const children = j.children || [];
    el("job-children-card").hidden = children.length === 0;
    clear(el("job-children")).append(...children.map((c) => h("li", {},
      h("a", { href: `/jobs/${c.id}` }, `Job ${c.id}`), " ", T.statusBadge(c.status),
      c.run_id ? h("span", {}, " · ", h("a", { href: `/runs/${c.run_id}` }, `run ${c.run_id}`)) : null,
      h("span", { class: "muted small" }, ` · ${T.fmtAge(c.created_at)}`))));
  }

  // --------------------------------------------------------------------- logs

  /** One attempt's output, oldest first from its newest 500 chunks, then followed while the
   *  attempt runs. Picking another attempt or stream starts over. */
  const Logs = (() => {
    const view = el("job-log");
    const pick = el("job-log-attempt");
    const stream = el("job-log-stream");
    const follow = el("job-log-follow");
    let attempt = null;
    let after = 0;
    let chosenByHand = false;

    function options(j) {
      const have = [...pick.options].map((o) => Number(o.value));
      const want = j.attempts.map((a) => a.attempt);
      if (have.join() !== want.join()) {
        clear(pick).append(...want.map((n) => h("option", { value: String(n) }, `#${n}`)));
      }
      if (!want.length) {
        attempt = null;
        el("job-log-note").textContent = "no output yet";
        return;
      }
      // The newest attempt is followed unless the reader picked one.
      const target = chosenByHand && want.includes(attempt) ? attempt : want[want.length - 1];
      if (target !== attempt) { attempt = target; restart(); }
      pick.value = String(attempt);
    }

    function restart() {
      after = 0;
      clear(view);
    }

    async function refresh() {
      if (attempt === null) return;
      const params = new URLSearchParams({ attempt, after, limit: 500 });
      if (stream.value) params.set("stream", stream.value);
      if (!after) params.set("tail", "1");
      const asked = attempt;
      const doc = await api(`/api/v1/jobs/${jobId}/logs?${params}`);
      if (asked !== attempt) return; // the reader switched attempts meanwhile
      for (const c of doc.chunks) view.append(h("span", { class: `log-${c.stream}` }, c.text));
      while (view.childNodes.length > 5000) view.removeChild(view.firstChild);
      if (doc.chunks.length && follow.checked) view.scrollTop = view.scrollHeight;
      after = doc.next_after;
      const a = job.attempts.find((x) => x.attempt === attempt);
      el("job-log-note").textContent = !view.childNodes.length ? "no output from this attempt"
        : (a && a.status === "running" ? "following attempt " + attempt : `attempt ${attempt}`);
    }

    function show(n) {
      chosenByHand = true;
      attempt = n;
      pick.value = String(n);
      restart();
      refresh().catch((exc) => T.toast(exc.message));
      el("job-logs-card").scrollIntoView({ block: "start" });
    }

    pick.addEventListener("change", () => show(Number(pick.value)));
    stream.addEventListener("change", () => { restart(); refresh().catch((exc) => T.toast(exc.message)); });
    return { options, refresh, show };
  })();

  // ------------------------------------------------------------------ actions

  el("job-cancel").addEventListener("click", async () => {
    if (!window.confirm(`Cancel job ${jobId}?`)) return;
    try {
      const doc = await api(`/api/v1/jobs/${jobId}/cancel`, { method: "POST", body: {} });
      T.toast(`Job ${jobId}: ${doc.result.replace("_", " ")}`, "ok");
    } catch (exc) {
      T.toast(exc.message);
    }
    await load();
    if (poller) poller.now();
  });

  // ------------------------------------------------------------------- wiring

  let codeShown = false;

  async function load() {
    const j = await api(`/api/v1/jobs/${jobId}`);
    const wasActive = job !== null && ACTIVE.has(job.status);
    job = j;
    renderHead(j);
    renderSpec(j);
    renderAttempts(j);
    renderChildren(j);
    Logs.options(j);
    await Logs.refresh();
    if (!codeShown) {
      codeShown = true;
      renderCode(j);
    }
    return ACTIVE.has(j.status) || wasActive; // one more read after it ends: the last output
  }

  async function start() {
    try {
      if (!(await load())) return;
    } catch (exc) {
      if (exc.status === 404) {
        el("job-missing").textContent = `Job ${jobId} does not exist. See the queue for the jobs there are.`;
        el("job-missing").hidden = false;
        return;
      }
      T.toast(exc.message);
    }
    poller = T.poll(load, LIVE_MS);
  }

  start();
})();
