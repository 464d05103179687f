"""``tracker worker``: the local executor of the job loop; runs claimed jobs as processes on
this host.

The loop itself (claim, lease, heartbeat, record, verdict, retry, signals) is
:class:`tracker.runner.job_loop.JobLoop`; this module adds what only a local executor
does: its fit rule (free GPUs, :mod:`tracker.runner.devices`), starting the process
(:mod:`tracker.runner.execution`: its own process group, output drained into the store),
time limits and cancels (SIGTERM, then SIGKILL after ``grace_s``), host memory pressure as
OOM evidence, and killing the process group of a job whose lease was lost.

Signals: the first SIGTERM/SIGINT stops claiming, forwards SIGTERM to every job's process
group and gives them ``grace_s`` before SIGKILL; a second one kills them at once. A signal
ignored when the worker started (SIGINT under ``tracker up``) stays ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from tracker.entities import ClaimedJob, Failure
from tracker.errors import StoreUnavailable
from tracker.rules.failure import MISSING_FILE, PREEMPTED
from tracker.runner import verdict
from tracker.runner.devices import GpuSlots, Nvml, parse_gpus
from tracker.runner.distributed import is_python, wrap_argv
from tracker.runner.execution import Execution, SpawnError
from tracker.runner.housekeeping import HousekeepingOptions
from tracker.runner.job_loop import POLL_S, JobLoop
from tracker.store import Store, logs, workers

log = logging.getLogger(__name__)

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
    snapshot_dir: str | None = None  # jobs with a code snapshot run under it (a fresh copy each)
    python_env: str = "worker"  # "venv": jobs run in an environment of their requirements
    env_dir: str | None = None  # where those are built (default: envs beside snapshot_dir)


@dataclass
class Running:
    """A job process this worker holds, and what happened to it so far."""

    claim: ClaimedJob
    devices: tuple[int, ...]
    execution: Execution
    budget: logs.LogBudget
    deadline: float | None = None
    next_flush: float = 0.0
    lost: bool = False
    cancelled: bool = False
    timed_out: bool = False
    shutdown: bool = False
    started: float = field(default_factory=time.monotonic)


class Worker(JobLoop):
    """Run with ``Worker(store, options).run()``; returns the process exit status."""

    noun = "worker"

    def __init__(self, store: Store, options: WorkerOptions) -> None:
        host = socket.gethostname()
        super().__init__(
            store, options, options.worker_id or f"{host}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        )
        self.options: WorkerOptions = options
        self.nvml = Nvml()
        self.slots = GpuSlots(parse_gpus(options.gpus, self.nvml), self.nvml)
        self.running: dict[int, Running] = {}
        self._pressure_at = -1e9

    # ------------------------------------------------------------------ the loop's hooks

    def register(self) -> None:
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

    def held_claims(self) -> list[ClaimedJob]:
        return [r.claim for r in self.running.values() if not r.lost]

    def has_room(self) -> bool:
        # a lost job holds its slot until its process is gone
        return len(self.running) + len(self._unrecorded) < self.options.max_jobs

    def busy(self) -> bool:
        if self.running:
            return True
        # after a second signal, ends the store could not take yet are left to the reaper
        # (the lease expires, the job is crashed and retried)
        return bool(self._unrecorded) and not self._forced

    def claim_fit(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "max_gpus": len(self.slots.free()),
            "fits": self.slots.place if self.slots.devices else None,
        }

    def wait_time(self) -> float:
        waits = [POLL_S]
        if self.running:
            waits.append(FLUSH_S)
        elif not self._stopping:
            waits.append(max(0.0, self._next_claim - time.monotonic()))
        return max(0.005, min(waits))

    def heartbeat_gpus(self) -> list[dict[str, Any]] | None:
        devices = self.slots.devices
        if not devices:
            return None
        return workers.gpu_rows(devices, {d.index: self.nvml.free_bytes(d.index) for d in devices})

    def drain(self) -> None:
        log.warning(
            "worker %s: stopping; SIGTERM sent to %d job(s), %.0f s grace (signal again to "
            "kill now)",
            self.id,
            len(self.running),
            self.options.grace_s,
        )
        for r in self.running.values():
            r.shutdown = True
            r.execution.stop("shutdown", self.options.grace_s)
        self.heartbeat("draining")

    def force(self) -> None:
        log.warning("worker %s: second signal, killing %d job(s)", self.id, len(self.running))
        for r in self.running.values():
            r.execution.kill("shutdown")

    def after_loop(self) -> None:
        """On any exit of the loop: never leave job processes behind."""
        for r in list(self.running.values()):
            if r.execution.running():
                r.execution.kill("worker exiting")

    # ------------------------------------------------------------------ start

    def start(self, claim: ClaimedJob, devices: tuple[int, ...]) -> bool:
        launch = self.prepare(claim)
        if launch is None:
            return True
        job = claim.job
        try:
            argv = wrap_argv(_local_argv(launch.argv), job.nproc_per_node)
            env = self.job_env(launch, {"CUDA_VISIBLE_DEVICES": ",".join(map(str, devices))})
            execution = Execution(argv, cwd=launch.cwd, env=env, on_exit=self._wake.set)
        except SpawnError as exc:
            self.finish(claim, None, Failure(MISSING_FILE, f"{exc}. Check the command and path."))
            return True
        r = Running(claim, devices, execution, launch.budget)
        if job.timeout_s:
            r.deadline = r.started + job.timeout_s
        with self._lock:
            self.running[job.id] = r
        self.slots.take(devices)
        where = f" on GPU {','.join(map(str, devices))}" if devices else ""
        log.info("job %s attempt %s started%s: pid %s", job.id, claim.attempt, where, execution.pid)
        return True

    # ------------------------------------------------------------------ follow

    def follow(self) -> None:
        now = time.monotonic()
        self._sample_memory(now)
        for r in list(self.running.values()):
            ex = r.execution
            if r.lost:
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
                    failure = self._failure(r)
                    self._release(r)
                    self.finish(r.claim, ex.returncode, failure, time.monotonic() - r.started)

    def lose(self, job_id: int) -> None:
        r = self.running.get(job_id)
        if r is None or r.lost:
            return
        r.lost = True
        log.error(
            "job %s: lease lost (another worker or the reaper took it over): killing it, "
            "writing nothing more",
            job_id,
        )
        r.execution.kill("lost")

    def cancel(self, job_id: int) -> None:
        r = self.running.get(job_id)
        if r is None or r.cancelled:
            return
        r.cancelled = True
        log.warning("job %s: cancel requested", job_id)
        r.execution.stop("cancelled", self.options.grace_s)

    def _drop_lost(self, r: Running) -> None:
        ex = r.execution
        if ex.running():
            ex.kill("lost")
            ex.tick()
            return
        ex.cleanup()
        ex.take_output()  # discarded: the job belongs to someone else now
        self._release(r)

    def _flush(self, r: Running) -> None:
        if r.lost:
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
            self.lose(r.claim.job.id)

    def _sample_memory(self, now: float) -> None:
        vm = psutil.virtual_memory()
        if vm.total and vm.available / vm.total < MEMORY_PRESSURE:
            self._pressure_at = now

    def _failure(self, r: Running) -> Failure | None:
        """What this executor saw, judged by the shared verdict."""
        ex = r.execution
        code = ex.returncode
        if r.shutdown and not r.cancelled and not r.timed_out and code != 0:
            # the worker took the job back, as a cluster scheduler preempts one: the same
            # class on every executor (crashed, retried from the last verified checkpoint)
            return Failure(
                PREEMPTED,
                f"The worker {self.id} shut down (SIGTERM) and stopped the job; it is retried "
                "from its last verified checkpoint.",
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

    def _release(self, r: Running) -> None:
        self.slots.release(r.devices)
        with self._lock:
            self.running.pop(r.claim.job.id, None)
        self._next_claim = 0.0  # a slot is free: claim again at once
        self._wake.set()


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
