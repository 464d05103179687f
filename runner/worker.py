"""``tracker worker``: claim jobs the host has resources for, run them, and record how they end.

One control loop in the main thread claims jobs, drains their output into the store, polls
for cancel requests (every ``CANCEL_POLL_S``), enforces timeouts and finishes jobs whose
process exited. Lease renewal and the housekeeping (lease reaper, cron schedules) run on the
APScheduler thread (:mod:`tracker.runner.housekeeping`). Lost leases (renewal or any fenced
write matched no row) make the loop SIGKILL that job's process group and write nothing
more about it.

Signals: the first SIGTERM/SIGINT stops claiming, forwards SIGTERM to every job's process
group and gives them ``grace_s`` before SIGKILL; a second one kills them at once. A signal
ignored when the worker started (SIGINT under ``tracker up``) stays ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from tracker.entities import ClaimedJob, Failure
from tracker.errors import StoreUnavailable
from tracker.rules.failure import KILLED_BY_SIGNAL, MISSING_FILE
from tracker.runner import verdict
from tracker.runner.devices import GpuSlots, Nvml, parse_gpus
from tracker.runner.distributed import is_python, wrap_argv
from tracker.runner.execution import Execution, SpawnError
from tracker.runner.housekeeping import Housekeeper, HousekeepingOptions
from tracker.runner.job_env import job_environment, resume_checkpoint
from tracker.runner.project_root import choose_project_root, resolve_job_paths
from tracker.store import Store, logs, queue, workers

log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.5
FLUSH_S = 0.25
FLUSH_CHARS = 64 * 1024
MEMORY_PRESSURE = 0.05  # host memory available below this fraction counts as OOM pressure


@dataclass(frozen=True)
class WorkerOptions:
    gpus: str | None = "auto"
    max_jobs: int = 1
    lease_s: float = 30.0
    poll_interval: float = 0.5
    grace_s: float = 10.0
    once: bool = False
    exit_when_idle: bool = False
    worker_id: str | None = None
    housekeeping: bool = True
    housekeeping_options: HousekeepingOptions = field(default_factory=HousekeepingOptions)
    log_limit: int = 10_000_000
    job_uri: str | None = None
    project_root: str | None = None  # relative job directories resolve here (default: cwd)


@dataclass
class Running:
    """A job this worker holds, and what happened to it so far."""

    claim: ClaimedJob
    devices: tuple[int, ...]
    execution: Execution | None = None
    budget: logs.LogBudget | None = None
    deadline: float | None = None
    next_flush: float = 0.0
    lost: bool = False
    outcome: tuple[int | None, Failure | None] | None = None  # ended; not yet recorded
    cancelled: bool = False
    timed_out: bool = False
    shutdown: bool = False
    started: float = field(default_factory=time.monotonic)


class Worker:
    """Run with ``Worker(store, options).run()``; returns the process exit status."""

    def __init__(self, store: Store, options: WorkerOptions) -> None:
        self.store = store
        self.options = options
        self.host = socket.gethostname()
        self.project_root = os.path.abspath(options.project_root or os.getcwd())
        self.project_root_given = options.project_root is not None
        self.id = options.worker_id or f"{self.host}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        self.nvml = Nvml()
        self.slots = GpuSlots(parse_gpus(options.gpus, self.nvml), self.nvml)
        self.running: dict[int, Running] = {}
        self._lock = threading.Lock()  # guards running-claims snapshots and _lost
        self._lost: set[str] = set()  # lease tokens renewal found lost
        self._wake = threading.Event()
        self._signals = 0
        self._stopping = False
        self._forced = False
        self._idle = False
        self._claimed = 0
        self._next_claim = 0.0
        self._next_poll = 0.0
        self._pressure_at = -1e9
        self._house = Housekeeper()

    # ------------------------------------------------------------------ main loop

    def run(self) -> int:
        workers.register_worker(
            self.store,
            self.id,
            host=self.host,
            pid=os.getpid(),
            gpus=self.slots.devices,
            max_jobs=self.options.max_jobs,
        )
        gpus = ",".join(str(d.index) for d in self.slots.devices) or "none"
        log.info("worker %s started (gpus: %s, max jobs: %s)", self.id, gpus, self.options.max_jobs)
        self._install_signals()
        self._house.every(max(0.2, self.options.lease_s / 3), "lease", self._renew)
        if self.options.housekeeping:
            self._house.add_housekeeping(self.store, self.options.housekeeping_options)
        self._house.start()
        try:
            while not self._should_exit():
                self._handle_signals()
                if not self._stopping:
                    self._fill()
                self._supervise()
                if self._should_exit():
                    break
                self._wake.wait(self._wait_time())
                self._wake.clear()
        finally:
            self._abandon()
            self._house.shutdown()
            self._mark_stopped()
        log.info("worker %s stopped", self.id)
        return 0

    def _should_exit(self) -> bool:
        if self.running:
            # After a second signal, ends the store could not take yet are left to the
            # reaper (the lease expires, the job is crashed and retried).
            return self._forced and all(r.outcome is not None for r in self.running.values())
        if self._stopping:
            return True
        if self.options.once and self._claimed >= 1:
            return True
        return self.options.exit_when_idle and self._idle

    def _wait_time(self) -> float:
        now = time.monotonic()
        waits = [CANCEL_POLL_S]
        if self.running:
            waits.append(FLUSH_S)
        elif not self._stopping:
            waits.append(max(0.0, self._next_claim - now))
        return max(0.005, min(waits))

    # ---------------------------------------------------------------- signals

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            # A signal ignored since start stays ignored (as a shell ignores SIGINT for
            # `worker &`): `tracker up` starts its worker so, to stop it with one SIGTERM.
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        self._wake.set()

    def _handle_signals(self) -> None:
        if self._signals >= 1 and not self._stopping:
            self._stopping = True
            log.warning(
                "worker %s: stopping; SIGTERM sent to %d job(s), %.0f s grace (signal again to "
                "kill now)",
                self.id,
                len(self.running),
                self.options.grace_s,
            )
            for r in self.running.values():
                r.shutdown = True
                if r.execution is not None:
                    r.execution.stop("shutdown", self.options.grace_s)
            self._heartbeat("draining")
        if self._signals >= 2 and not self._forced:
            self._forced = True
            log.warning("worker %s: second signal, killing %d job(s)", self.id, len(self.running))
            for r in self.running.values():
                if r.execution is not None:
                    r.execution.kill("shutdown")

    # ------------------------------------------------------------------ claims

    def _fill(self) -> None:
        while (
            len(self.running) < self.options.max_jobs
            and time.monotonic() >= self._next_claim
            and not (self.options.once and self._claimed >= 1)
            and not self._stopping
        ):
            try:
                got = queue.claim(
                    self.store,
                    self.id,
                    lease_s=self.options.lease_s,
                    host=self.host,
                    max_gpus=len(self.slots.free()),
                    fits=self.slots.place if self.slots.devices else None,
                )
            except StoreUnavailable as exc:
                log.warning("claim failed, the store is unavailable: %s", exc.message)
                got = None
            if got is None:
                self._idle = True
                self._next_claim = time.monotonic() + self.options.poll_interval
                return
            self._idle = False
            self._claimed += 1
            self._start(*got)
            self._handle_signals()

    def _start(self, claim: ClaimedJob, devices: tuple[int, ...]) -> None:
        job = claim.job
        r = Running(claim, devices)
        with self._lock:
            self.running[job.id] = r
        self.slots.take(devices)
        if job.timeout_s:
            r.deadline = r.started + job.timeout_s
        try:
            limit = self.options.log_limit
            # only a retried job has output stored already
            first = claim.attempt == 1
            r.budget = (
                logs.LogBudget(limit) if first else logs.load_budget(self.store, job.id, limit)
            )
            resume = self._resume_checkpoint(claim)
            held = claim.attempt == 1 or queue.set_resume_checkpoint(self.store, claim, resume)
        except StoreUnavailable as exc:
            log.error("job %s: not started, the store is unavailable: %s", job.id, exc.message)
            held = False  # dropped; the reaper crashes and requeues it once the lease expires
        if not held:
            r.lost = True
            return
        try:
            root = choose_project_root(
                self.project_root, self.project_root_given, job.project_root, job.cwd
            )
            local, cwd = resolve_job_paths(job.argv, job.cwd, root, self.host)
            argv = wrap_argv(_local_argv(local), job.nproc_per_node)
            r.execution = Execution(
                argv, cwd=cwd, env=self._job_env(claim, devices, resume), on_exit=self._wake.set
            )
        except SpawnError as exc:
            self._finish(r, None, Failure(MISSING_FILE, f"{exc}. Check the command and path."))
            return
        where = f" on GPU {','.join(map(str, devices))}" if devices else ""
        log.info(
            "job %s attempt %s started%s: pid %s", job.id, claim.attempt, where, r.execution.pid
        )

    def _resume_checkpoint(self, claim: ClaimedJob) -> str | None:
        return resume_checkpoint(self.store, claim)

    def _job_env(
        self, claim: ClaimedJob, devices: Sequence[int], resume: str | None
    ) -> dict[str, str]:
        devices_env = {"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in devices)}
        uri = self.options.job_uri or self.store.absolute_uri()
        return job_environment(claim, uri, resume, devices_env)

    # -------------------------------------------------------------- supervision

    def _supervise(self) -> None:
        now = time.monotonic()
        self._sample_memory(now)
        self._apply_polls(now)
        for r in list(self.running.values()):
            ex = r.execution
            if r.outcome is not None and not r.lost:
                self._record(r)  # the store was unavailable when the job ended
                continue
            if r.lost or ex is None:
                self._drop_lost(r)
                continue
            if r.deadline is not None and now >= r.deadline and not r.timed_out:
                r.timed_out = True
                log.warning("job %s: timed out after %.0f s", r.claim.job.id, r.claim.job.timeout_s)
                ex.stop("timeout", self.options.grace_s)
            ex.tick()
            if now >= r.next_flush or ex.pending_chars() > FLUSH_CHARS or not ex.running():
                self._flush(r)
                r.next_flush = now + FLUSH_S
            if not r.lost and not ex.running():
                ex.cleanup()
                self._flush(r)
                if not r.lost:
                    self._finish(r, ex.returncode, self._failure(r))

    def _apply_polls(self, now: float) -> None:
        with self._lock:
            tokens, self._lost = self._lost, set()
        lost = {r.claim.job.id for r in self.running.values() if r.claim.lease_token in tokens}
        if now >= self._next_poll and self.running:
            self._next_poll = now + CANCEL_POLL_S
            try:
                states = queue.poll(self.store, [r.claim for r in self.running.values()])
            except StoreUnavailable as exc:
                log.warning("poll failed, the store is unavailable: %s", exc.message)
                states = {}
            for job_id, state in states.items():
                r = self.running[job_id]
                if r.outcome is not None:
                    continue
                if not state.held:
                    lost.add(job_id)
                elif state.cancel_requested and not r.cancelled and r.execution is not None:
                    r.cancelled = True
                    log.warning("job %s: cancel requested", job_id)
                    r.execution.stop("cancelled", self.options.grace_s)
        for job_id in lost:
            found = self.running.get(job_id)
            if found is not None and not found.lost:
                self._lose(found)

    def _lose(self, r: Running) -> None:
        r.lost = True
        log.error(
            "job %s: lease lost (another worker or the reaper took it over): killing it, "
            "writing nothing more",
            r.claim.job.id,
        )
        if r.execution is not None:
            r.execution.kill("lost")

    def _drop_lost(self, r: Running) -> None:
        ex = r.execution
        if ex is not None:
            if ex.running():
                ex.kill("lost")
                ex.tick()
                return
            ex.cleanup()
            ex.take_output()  # discarded: the job belongs to someone else now
        self._release(r)

    def _flush(self, r: Running) -> None:
        if r.execution is None or r.lost:
            return
        lines = r.execution.take_output()
        if not lines:
            return
        try:
            held = logs.append(self.store, r.claim, lines, r.budget)
        except StoreUnavailable as exc:
            job_id = r.claim.job.id
            log.warning("job %s: output kept for later, store unavailable: %s", job_id, exc.message)
            r.execution.unread(lines)
            return
        if not held:
            self._lose(r)

    def _sample_memory(self, now: float) -> None:
        vm = psutil.virtual_memory()
        if vm.total and vm.available / vm.total < MEMORY_PRESSURE:
            self._pressure_at = now

    def _failure(self, r: Running) -> Failure | None:
        ex = r.execution
        if ex is None:
            return None
        code = ex.returncode
        if r.shutdown and not r.cancelled and not r.timed_out and code != 0:
            return Failure(
                KILLED_BY_SIGNAL,
                f"The worker {self.id} shut down (SIGTERM) and stopped the job; it can be retried.",
            )
        tail = ex.stdout_tail() + "\n" + ex.stderr_tail()  # stderr last: its traceback wins
        return verdict.judge(
            self.store,
            r.claim,
            code,
            None,
            tail,
            host_oom_suspected=self._pressure_at >= r.started - 1,
            timed_out=r.timed_out,
            cancelled=r.cancelled,
        )

    def _finish(self, r: Running, code: int | None, failure: Failure | None) -> None:
        r.outcome = (code, failure)
        self._record(r)

    def _record(self, r: Running) -> None:
        """Write how the job ended; while the store is unavailable, retry on later ticks
        (the lease keeps being renewed meanwhile, so the job stays ours)."""
        code, failure = r.outcome or (None, None)
        retry = self.options.housekeeping_options.policy.next_retry
        took = time.monotonic() - r.started
        if verdict.record(self.store, r.claim, code, failure, retry, took_s=took):
            self._release(r)

    def _release(self, r: Running) -> None:
        self.slots.release(r.devices)
        with self._lock:
            self.running.pop(r.claim.job.id, None)
        self._next_claim = 0.0  # a slot is free: claim again at once
        self._wake.set()

    # ------------------------------------------------------------ housekeeping

    def _renew(self) -> None:
        with self._lock:
            claims = [r.claim for r in self.running.values() if not r.lost]
        lost = queue.renew(self.store, claims, lease_s=self.options.lease_s)
        if lost:
            with self._lock:
                self._lost |= {c.lease_token for c in claims if c.job.id in lost}
            self._wake.set()
        self._heartbeat("draining" if self._stopping else "running")

    def _heartbeat(self, status: str) -> None:
        try:
            devices = self.slots.devices
            free = {d.index: self.nvml.free_bytes(d.index) for d in devices} if devices else None
            gpus = workers.gpu_rows(devices, free) if devices else None
            workers.heartbeat_worker(self.store, self.id, status=status, gpus=gpus)
        except StoreUnavailable as exc:
            log.warning("worker heartbeat failed: %s", exc.message)

    def _abandon(self) -> None:
        """On an unexpected exit of the loop: never leave job processes behind."""
        for r in list(self.running.values()):
            if r.execution is not None and r.execution.running():
                r.execution.kill("worker exiting")

    def _mark_stopped(self) -> None:
        try:
            self._heartbeat("stopped")
        except Exception:
            log.exception("could not mark worker %s stopped", self.id)


def _local_argv(argv: Sequence[str]) -> list[str]:
    """Submitted argv for this host: a Python interpreter path that does not exist here
    (submitted from another machine or virtualenv) becomes this worker's interpreter."""
    argv = list(argv)
    if os.path.isabs(argv[0]) and is_python(argv[0]) and not os.path.exists(argv[0]):
        argv[0] = sys.executable
    return argv


def run_worker(store: Store, options: WorkerOptions) -> int:
    """Build and run a worker; the entry point of ``tracker worker``."""
    return Worker(store, dataclasses.replace(options)).run()
