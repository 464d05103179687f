"""``tracker dispatcher``: hand queued jobs to a cluster scheduler (Slurm) and follow them.

The dispatcher is the cluster executor of the one job loop
(:class:`tracker.runner.job_loop.JobLoop`: the same claim, lease, fencing, heartbeat, verdict
and record as the local worker), but instead of running a job it submits it through an
:class:`~tracker.runner.executor.Executor` and then mirrors what the scheduler says: the
pending reason onto the job row (the Queue page shows it), the output files into the job's
logs (``tracker jobs logs --follow`` works as for a local job), and the end through the
failure classifier into ``queue.finish`` with the retry policy. A cancel in the tracker
becomes ``scancel``; a job Slurm preempted or requeued ends its attempt as ``preempted`` (the
scheduler's copy is cancelled) and the retry resumes from the last
verified checkpoint (``TRACKER_RESUME_CHECKPOINT``), exactly like a retried local job.

Stateless: everything is in the store and in the scheduler. At start (and on every poll) the
dispatcher lists the scheduler's jobs whose tag (Slurm comment) names one of ours, and adopts
those whose lease token still holds the job and whose owner is gone -- it said so (stopped) or
missed a whole lease renewal (:func:`tracker.store.queue.adopt`); a live dispatcher's jobs are
left to it, asked about again when its lease could lapse. It reads adopted jobs' output files
from where the store's logs end. A tagged job whose token lost its lease (the reaper
crashed the attempt meanwhile) is cancelled, never adopted. So killing and restarting the
dispatcher loses nothing and submits nothing twice; a dispatcher down for longer than the lease
lets the reaper (in any worker or ``tracker scheduler``) crash and retry its jobs.
"""

from __future__ import annotations

import codecs
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from tracker.entities import ClaimedJob, Failure
from tracker.errors import StoreUnavailable
from tracker.rules.failure import EXIT_CODE, KILLED_BY_SIGNAL, NODE_FAIL, classify
from tracker.rules.slurm import STARTER_PATH
from tracker.runner import verdict
from tracker.runner.distributed import wrap_argv
from tracker.runner.executor import Executor, ExecutorError, ExternalJob, SubmitRequest
from tracker.runner.housekeeping import HousekeepingOptions
from tracker.runner.job_loop import JobLoop
from tracker.runner.retry import backoff_delay
from tracker.store import Store, logs, queue, workers
from tracker.store.tokens import installation_secret

log = logging.getLogger(__name__)

READ_CHUNK = 1024 * 1024  # bytes read from one output file per tick
TAIL_CHARS = 16 * 1024  # output kept for the failure classifier
STORE_ID = "store_id"  # installation_secrets row: a random id naming this store


@dataclass(frozen=True)
class DispatcherOptions:
    max_jobs: int = 100  # attempts handed to the scheduler at once
    lease_s: float = 300.0  # jobs outlive the dispatcher in Slurm: give restarts time
    poll_interval: float = 5.0
    dispatcher_id: str | None = None
    housekeeping: bool = True
    housekeeping_options: HousekeepingOptions = field(default_factory=HousekeepingOptions)
    log_limit: int = 10_000_000
    job_uri: str | None = None
    once: bool = False  # stop once the first claimed job has ended (tests)
    exit_when_idle: bool = False
    project_root: str | None = None  # relative job directories resolve here (default: cwd)
    # jobs with a code snapshot run from a fresh copy under it: on the shared file system
    snapshot_dir: str | None = None
    # A submission the scheduler could not take (controller unreachable) goes back to the
    # queue, tried again after this delay, doubled after each such failure in a row.
    submit_retry_s: float = 5.0
    submit_retry_max_s: float = 300.0


class OutputFile:
    """Follows one output file from a byte offset; decodes UTF-8 across reads (a character
    split between two reads is completed by the next) and hands out whole lines."""

    def __init__(self, path: str, stream: str, offset: int = 0) -> None:
        self.path = path
        self.stream = stream
        self.offset = offset
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self.tail = ""

    def read(self, final: bool = False) -> list[logs.Line]:
        """New complete lines (with ``final``, the unterminated rest too)."""
        data = b""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(READ_CHUNK)
        except FileNotFoundError:
            pass  # not created yet (pending) or on a node's local disk
        self.offset += len(data)
        text = self._partial + self._decoder.decode(data, final=final)
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith(("\n", "\r")) and not final:
            self._partial = lines.pop()
        else:
            self._partial = ""
        now = time.time()
        got = "".join(lines)
        self.tail = (self.tail + got)[-TAIL_CHARS:]
        return [(self.stream, now, line) for line in lines]

    def unread(self, lines: list[logs.Line]) -> None:
        """Put back lines the store could not take (they are read again next tick)."""
        self._partial = "".join(t for _, _, t in lines) + self._partial


@dataclass
class Tracked:
    """One attempt handed to the scheduler."""

    claim: ClaimedJob
    external_id: str
    files: tuple[OutputFile, OutputFile]
    budget: logs.LogBudget
    reason: str | None = None
    cancelled: bool = False


class Dispatcher(JobLoop):
    """``Dispatcher(store, executor, options).run()``; returns the process exit status."""

    noun = "dispatcher"
    claim_throttled = False  # it claims once per tick; the tick is the poll interval

    def __init__(self, store: Store, executor: Executor, options: DispatcherOptions) -> None:
        host = socket.gethostname()
        super().__init__(
            store,
            options,
            options.dispatcher_id or f"{executor.name}-{host}-{os.getpid()}-{uuid.uuid4().hex[:4]}",
        )
        self.options: DispatcherOptions = options
        self.executor = executor
        self.interpreter = executor.interpreter
        self.tracked: dict[int, Tracked] = {}
        self._judged: set[str] = set()  # scheduler job ids found not to be ours to adopt
        self._recheck: dict[str, float] = {}  # scheduler job ids a live owner follows
        self._namespace: str | None = None
        self._unreachable = 0  # transient submission failures in a row
        self._external: list[ExternalJob] | None = None  # this tick's listing (None: failed)

    @property
    def namespace(self) -> str:
        """This store's id in the scheduler's job tags (a random id kept in the store)."""
        if self._namespace is None:
            self._namespace = store_namespace(self.store)
        return self._namespace

    # ------------------------------------------------------------------ the loop's hooks

    def register(self) -> None:
        workers.register_worker(
            self.store, self.id, host=self.host, pid=os.getpid(), gpus=[],
            max_jobs=self.options.max_jobs, executor=self.executor.name,
        )  # fmt: skip
        log.info("dispatcher %s started (executor %s)", self.id, self.executor.name)

    def before_loop(self) -> None:
        self.adopt()  # before the reaper runs: our own attempts first

    def after_loop(self) -> None:
        if self.tracked:
            log.info("%d job(s) left to %s; a restart adopts them", len(self.tracked),
                     self.executor.name)  # fmt: skip

    def held_claims(self) -> list[ClaimedJob]:
        return [t.claim for t in self.tracked.values()]

    def has_room(self) -> bool:
        # no claims while the scheduler does not answer: they could not be submitted
        return self._external is not None and super().has_room()

    def claim_fit(self) -> dict[str, Any]:
        return {"max_gpus": 1 << 20}  # the scheduler places GPUs

    def should_exit(self) -> bool:
        if self._stopping:
            return True  # the scheduler keeps running the jobs; a restart adopts them
        if self.options.once and self._ended >= 1:
            return True
        return self.options.exit_when_idle and self._idle and not self.busy()

    def tick(self) -> None:
        """One pass: list the scheduler's jobs, then the loop's pass (adoption and
        following are this executor's ``follow``; claims submit)."""
        try:
            self._external = self.executor.jobs()
        except ExecutorError as exc:
            log.warning("listing the scheduler's jobs failed, will retry: %s", exc.message)
            self._external = None  # live logs keep arriving while the scheduler does not answer
        super().tick()

    def lose(self, job_id: int) -> None:
        t = self.tracked.get(job_id)
        if t is not None:
            self._drop_lost(t)

    def cancel(self, job_id: int) -> None:
        t = self.tracked.get(job_id)
        if t is None or t.cancelled:
            return
        t.cancelled = True
        log.warning("job %s: cancel requested; scancel %s", job_id, t.external_id)
        self._cancel(t.external_id)

    # ----------------------------------------------------------------- adoption

    def adopt(self) -> None:
        """Take over the scheduler's jobs tagged with a lease that still holds (see module)."""
        try:
            self._adopt_from(self.executor.jobs())
        except (ExecutorError, StoreUnavailable) as exc:
            log.warning("adopting running jobs failed, will retry: %s", exc.message)

    def _adopt_from(self, external: list[ExternalJob]) -> None:
        mine = {t.external_id for t in self.tracked.values()}
        listed = {e.external_id for e in external}
        self._judged &= listed  # forgotten by the scheduler
        self._recheck = {k: v for k, v in self._recheck.items() if k in listed}
        now = self.store.now()  # the clock recheck_at is stamped with
        for ext in external:
            if ext.namespace != self.namespace:
                continue  # another tracker's job in the same account
            if ext.external_id in mine or ext.external_id in self._judged:
                continue
            job_id, attempt, token = ext.job_id, ext.attempt, ext.token
            if job_id in self.tracked:
                continue  # a stale copy of an attempt we follow under another id
            if self._recheck.get(ext.external_id, 0.0) > now:
                continue  # another live dispatcher follows it
            claim = queue.adopt(self.store, job_id, token, self.id, lease_s=self.options.lease_s)
            if isinstance(claim, queue.LiveOwner):
                self._recheck[ext.external_id] = claim.recheck_at
                continue
            self._recheck.pop(ext.external_id, None)
            if claim is None or claim.attempt != attempt:
                self._judged.add(ext.external_id)
                if ext.phase != "ended" or ext.requeued:
                    log.warning(
                        "job %s attempt %s: slurm job %s no longer holds the lease; cancelling",
                        job_id, attempt, ext.external_id,
                    )  # fmt: skip
                    self._cancel(ext.external_id)
                continue
            stored = logs.stored_bytes(self.store, job_id, attempt)
            self._track(claim, ext.external_id, stored, self.log_budget(claim, adopted=True))
            log.info("job %s attempt %s: adopted slurm job %s", job_id, attempt, ext.external_id)

    def _track(
        self, claim: ClaimedJob, external_id: str, stored: dict[str, int], budget: logs.LogBudget
    ) -> Tracked:
        out, err = self.executor.output_paths(claim.job.id, claim.attempt)
        files = (
            OutputFile(out, "stdout", stored.get("stdout", 0)),
            OutputFile(err, "stderr", stored.get("stderr", 0)),
        )
        t = Tracked(claim, external_id, files, budget)
        with self._lock:
            self.tracked[claim.job.id] = t
        try:  # the scheduler's id on the attempt: `tracker jobs show`, the API, the job page
            queue.set_external_id(self.store, claim, external_id)
        except StoreUnavailable as exc:  # only shown to users: the job goes on without it
            log.warning("job %s: %s job id %s not stored (store unavailable: %s)",
                        claim.job.id, self.executor.name, external_id, exc.message)  # fmt: skip
        return t

    # -------------------------------------------------------------------- claims

    def start(self, claim: ClaimedJob, devices: tuple[int, ...]) -> bool:
        """Hand ``claim`` to the scheduler; False when it could not be reached (the job is
        back in the queue) and claiming more now would only fail the same way."""
        launch = self.prepare(claim)
        if launch is None:
            return True
        job = claim.job
        out, err = self.executor.output_paths(job.id, claim.attempt)
        for path in (out, err):  # a rerun attempt number never reads an older file
            if os.path.exists(path):
                os.unlink(path)
        env = self.job_env(launch)
        env[STARTER_PATH] = env.get("PATH", "")  # a template that changes it chose a python
        request = SubmitRequest(
            namespace=self.namespace,
            job_id=job.id,
            attempt=claim.attempt,
            token=claim.lease_token,
            name=f"tracker-{job.id}",
            argv=wrap_argv(launch.argv, job.nproc_per_node),
            cwd=launch.cwd,
            env=env,
            output=out,
            error=err,
            gpus=job.gpus,
            cpus=job.cpus,
            memory_bytes=job.memory_bytes,
            timeout_s=job.timeout_s,
            extra=job.sbatch,
        )
        try:
            submitted = self.executor.submit(request)
        except ExecutorError as exc:
            if exc.transient:
                self._put_back(claim, exc.message)
                return False
            log.error("job %s: submission failed: %s", job.id, exc.message)
            failure = Failure(EXIT_CODE, f"{self.executor.name} refused the job: {exc.message}")
            self.finish(claim, None, failure)
            return True
        self._unreachable = 0
        self._track(claim, submitted.external_id, {}, launch.budget)
        log.info(
            "job %s attempt %s: submitted as %s job %s",
            job.id, claim.attempt, self.executor.name, submitted.external_id,
        )  # fmt: skip
        return True

    def _put_back(self, claim: ClaimedJob, message: str) -> None:
        """The scheduler could not take the job: queue it again, later, same attempt. Had it
        taken the job after all (a reply lost in a timeout), that job carries this claim's
        token, which no longer holds: the next pass finds and cancels it (see ``adopt``)."""
        self._unreachable += 1
        delay = backoff_delay(
            self._unreachable,
            base_delay_s=self.options.submit_retry_s,
            max_delay_s=self.options.submit_retry_max_s,
        )
        retry_at = self.store.now() + delay  # not_before is compared with the store's clock
        stamp = time.strftime("%H:%M:%S", time.localtime(retry_at))
        reason = f"{self.executor.name} could not be reached, trying again at {stamp}: {message}"
        log.warning("job %s attempt %s: %s", claim.job.id, claim.attempt, reason)
        queue.release(self.store, claim, reason=reason, not_before=retry_at)

    # ---------------------------------------------------------------- following

    def follow(self) -> None:
        if self._external is None:  # the scheduler did not answer: output only
            for t in list(self.tracked.values()):
                self._flush(t)
            return
        self._adopt_from(self._external)
        by_id = {e.external_id: e for e in self._external}
        for t in list(self.tracked.values()):
            ext = by_id.get(t.external_id)
            if not self._flush(t):
                continue
            if ext is None:
                ext = self._describe(t)  # no longer listed: ended and forgotten, or a glitch
                if ext is None:
                    self._end(t, None)
                    continue
            if ext.phase == "pending":
                self._set_reason(t, f"{self.executor.name}: {ext.reason or 'pending'}")
            elif ext.phase == "running":
                self._set_reason(t, None)
            else:
                self._end(t, ext)

    def _describe(self, t: Tracked) -> ExternalJob | None:
        c = t.claim
        try:
            found = self.executor.job(t.external_id)
        except ExecutorError as exc:
            log.warning("job %s: scheduler state unknown, will retry: %s", t.claim.job.id, exc)
            return ExternalJob(
                t.external_id, "running", "UNKNOWN", None, self.namespace, c.job.id,
                c.attempt, c.lease_token,
            )  # fmt: skip
        if found is None or found.job_id:
            return found
        # from a history that keeps no tag (Slurm's completion log): it is this attempt
        return replace(
            found, namespace=self.namespace, job_id=c.job.id, attempt=c.attempt,
            token=c.lease_token,
        )  # fmt: skip

    def _set_reason(self, t: Tracked, reason: str | None) -> None:
        if reason == t.reason:
            return
        if queue.set_pending_reason(self.store, t.claim, reason):
            t.reason = reason
        else:
            self._drop_lost(t)

    def _flush(self, t: Tracked, final: bool = False) -> bool:
        """Store new output of both files; False when the lease was lost (then dropped)."""
        for f in t.files:
            lines = f.read(final=final)
            if not lines:
                continue
            try:
                held = logs.append(self.store, t.claim, lines, t.budget)
            except StoreUnavailable:
                f.unread(lines)
                raise
            if not held:
                self._drop_lost(t)
                return False
        return True

    def _end(self, t: Tracked, ext: ExternalJob | None) -> None:
        detail = None
        if (
            ext is not None
            and ext.phase == "ended"
            and not ext.requeued
            and ext.failure != "preempted"
        ):
            detail = self._describe(t)  # scontrol: the exit code squeue does not show
        if detail is not None and detail.phase == "ended":
            ext = detail
        if not self._flush(t, final=True):
            return
        failure = self._failure(t, ext)
        if (failure is not None and failure.cls == "preempted") or (
            ext is not None and ext.requeued
        ):
            self._cancel(t.external_id)  # Slurm would run the old attempt again
        self._judged.add(t.external_id)
        with self._lock:
            self.tracked.pop(t.claim.job.id, None)
        self.finish(t.claim, ext.exit_code if ext is not None else None, failure)

    def _failure(self, t: Tracked, ext: ExternalJob | None) -> Failure | None:
        tail = t.files[0].tail + "\n" + t.files[1].tail  # stderr last: its traceback wins
        if ext is None:
            return Failure(NODE_FAIL, f"{self.executor.name} no longer knows the job; retried.")
        if t.cancelled or ext.failure == "cancelled":
            return classify(None, None, tail, cancelled=True)
        if ext.failure in (None, "exit"):
            found = classify(ext.exit_code, ext.signal, tail)
            if found is not None and found.cls == KILLED_BY_SIGNAL and ext.near_limit:
                # the grace signal before the time limit (--grace-seconds) stopped it
                return self._judge(t, ext, timed_out=True)
            if found is None and ext.failure == "exit":
                return Failure(EXIT_CODE, f"{self.executor.name}: {ext.state} ({ext.reason}).")
            return self._judge(t, ext)
        if ext.failure == "timeout":
            return self._judge(t, ext, timed_out=True)
        return Failure(ext.failure, ext.hint or f"{self.executor.name}: {ext.state}")

    def _judge(self, t: Tracked, ext: ExternalJob, timed_out: bool = False) -> Failure | None:
        """The shared verdict (peak GPU memory, the doctor's final pass) on what Slurm saw."""
        tail = t.files[0].tail + "\n" + t.files[1].tail
        return verdict.judge(
            self.store, t.claim, ext.exit_code, ext.signal, tail, timed_out=timed_out
        )

    def _cancel(self, external_id: str) -> None:
        try:
            self.executor.cancel(external_id)
        except ExecutorError as exc:
            log.warning("cancelling %s failed, will retry: %s", external_id, exc.message)

    def _drop_lost(self, t: Tracked) -> None:
        log.error(
            "job %s: lease lost (the reaper or another dispatcher took it): cancelling %s",
            t.claim.job.id, t.external_id,
        )  # fmt: skip
        self._cancel(t.external_id)
        self._judged.add(t.external_id)
        with self._lock:
            self.tracked.pop(t.claim.job.id, None)


def store_namespace(store: Store) -> str:
    """The id that marks this store's jobs in the scheduler (a random id kept in the store,
    so two trackers sharing one cluster account never touch each other's jobs)."""
    return installation_secret(store, STORE_ID)[:12]


def run_dispatcher(store: Store, executor: Executor, options: DispatcherOptions) -> int:
    """Build and run a dispatcher; the entry point of ``tracker dispatcher``."""
    return Dispatcher(store, executor, options).run()
