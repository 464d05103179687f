"""The one job loop every executor runs: claim, lease, heartbeat, record, verdict, retry.

:class:`JobLoop` owns what does not depend on where a job runs:

- **claim** (``fill``): take ready jobs from the queue while the executor has room, each
  under a lease token (:func:`tracker.store.queue.claim`); the executor's own fit rule
  (GPU placement for the local worker) is its ``claim_fit``;
- **prepare**: the checkpoint a retry resumes from, fenced onto the attempt, the job's
  paths resolved on this host (a missing file fails the attempt ``missing_file``), its log
  budget and environment (:mod:`tracker.runner.job_env`, one rule for every executor);
- **lease**: renew every held attempt's lease on a timer thread, poll for lost leases and
  cancel requests on the loop, and hand both to the executor (``lose``, ``cancel``);
- **heartbeat**: the process's row in ``workers`` (``tracker workers ls``, the Queue page);
- **record**: the end through :mod:`tracker.runner.verdict` (failure class, the doctor's
  final pass, the retry policy). An end the store cannot take yet (outage) is kept here and
  written on a later tick, its lease renewed meanwhile, so the job stays this loop's;
- **signals and exit**: the first SIGTERM/SIGINT stops claiming (``drain``), a second one
  is ``force``; ``once`` and ``exit_when_idle`` for tests and batch use.

The executors are its two siblings: :class:`tracker.runner.worker.Worker` runs processes on
this host (:mod:`tracker.runner.execution`) and :class:`tracker.runner.dispatcher.Dispatcher`
hands them to a cluster scheduler through :class:`tracker.runner.executor.Executor`
(Slurm). Each adds only how it starts (``start``), follows (``follow``), loses and cancels a
job, and what it saw when the job ended (handed to :func:`tracker.runner.verdict.judge`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tracker.entities import ClaimedJob, Failure
from tracker.errors import InvalidInput, NotFound, StoreUnavailable, TrackerError
from tracker.rules.failure import MISSING_FILE, MISSING_MODULE
from tracker.runner import verdict
from tracker.runner.execution import SpawnError
from tracker.runner.housekeeping import Housekeeper, HousekeepingOptions
from tracker.runner.job_env import job_environment, resume_checkpoint
from tracker.runner.job_python import EnvBuildError, ensure_env
from tracker.runner.project_root import choose_project_root, resolve_job_paths
from tracker.store import Store, logs, queue, snapshots, tokens, workers
from tracker.store.workers import WORKER_TTL_S
from tracker.wakeup import Wakeup

log = logging.getLogger(__name__)

POLL_S = 0.5  # lost leases and cancel requests are looked for this often


class LoopOptions(Protocol):
    """What the loop reads from an executor's options (``WorkerOptions``,
    ``DispatcherOptions``)."""

    @property
    def max_jobs(self) -> int: ...
    @property
    def lease_s(self) -> float: ...
    @property
    def poll_interval(self) -> float: ...
    @property
    def once(self) -> bool: ...
    @property
    def exit_when_idle(self) -> bool: ...
    @property
    def housekeeping(self) -> bool: ...
    @property
    def housekeeping_options(self) -> HousekeepingOptions: ...
    @property
    def log_limit(self) -> int: ...
    @property
    def job_uri(self) -> str | None: ...
    @property
    def project_root(self) -> str | None: ...
    @property
    def snapshot_dir(self) -> str | None: ...


@dataclass(frozen=True)
class Launch:
    """A claimed attempt ready to start: its argv and cwd on this host, the checkpoint it
    resumes from, its log budget, and its own token when it logs over HTTP."""

    claim: ClaimedJob
    argv: list[str]
    cwd: str | None
    resume: str | None
    budget: logs.LogBudget
    token: str | None = None


@dataclass(frozen=True)
class Ending:
    """How an attempt ended, judged; kept until the store has taken it."""

    claim: ClaimedJob
    exit_code: int | None
    failure: Failure | None
    took_s: float | None = None


class JobLoop:
    """The loop; an executor subclasses it (see the module docstring for the hooks).

    Subclasses keep their held attempts in their own map, guarded by ``self._lock``, and
    answer ``held_claims`` from it."""

    noun = "worker"  # in log lines
    interpreter = sys.executable  # what a job recorded as ``python ...`` starts with
    claim_throttled = True  # after an empty claim wait ``poll_interval`` before the next

    def __init__(self, store: Store, options: LoopOptions, loop_id: str) -> None:
        self.store = store
        self.options = options
        self.id = loop_id
        self.host = socket.gethostname()
        self.project_root = os.path.abspath(options.project_root or os.getcwd())
        self.project_root_given = options.project_root is not None
        # where a job with a code snapshot runs: a fresh copy per attempt under this directory
        # job ids are per store: in the default (per-user) directory, workers of two stores
        # on one host never share a job's directory; a --snapshot-dir given is used as is
        self.snapshot_dir = Path(
            options.snapshot_dir or Path(default_snapshot_dir()) / store_key(store)
        ).absolute()
        # "venv": a job whose project names requirements runs in an environment built from
        # them (runner.job_python); "worker": this process's interpreter
        self.python_env: str = getattr(options, "python_env", "worker")
        beside = Path(options.snapshot_dir or default_snapshot_dir()).parent
        self.env_dir = Path(getattr(options, "env_dir", None) or beside / "envs").absolute()
        self._lock = threading.Lock()  # guards the executor's held map, _lost, _starting
        self._lost: set[str] = set()  # lease tokens renewal found lost
        self._starting: ClaimedJob | None = None  # claimed, not yet held (start may be slow)
        self._unrecorded: dict[int, Ending] = {}
        # woken by job exits (threads) and signals: never a threading.Event, whose set() from
        # a signal handler can deadlock the loop (tracker.wakeup)
        self._wake = Wakeup()
        self._house = Housekeeper()
        self._signals = 0
        self._stopping = False
        self._forced = False
        self._idle = False
        self._claimed = 0
        self._ended = 0
        self._next_claim = 0.0
        self._next_poll = 0.0

    # ------------------------------------------------------------------ the hooks

    def register(self) -> None:
        """Write this process's row in ``workers`` and log the start."""
        raise NotImplementedError

    def held_claims(self) -> list[ClaimedJob]:
        """The attempts the executor holds and whose leases must be kept."""
        raise NotImplementedError

    def has_room(self) -> bool:
        return len(self.held_claims()) + len(self._unrecorded) < self.options.max_jobs

    def claim_fit(self) -> dict[str, Any]:
        """Extra arguments of :func:`tracker.store.queue.claim` (what this executor can fit)."""
        return {}

    def start(self, claim: ClaimedJob, devices: tuple[int, ...]) -> bool:
        """Start (or hand over) a claimed attempt; False: claim no more this tick."""
        raise NotImplementedError

    def follow(self) -> None:
        """One pass over the held attempts: output, time limits, ends (``finish``)."""
        raise NotImplementedError

    def lose(self, job_id: int) -> None:
        """The lease of ``job_id`` is lost: stop it, write nothing more about it."""
        raise NotImplementedError

    def cancel(self, job_id: int) -> None:
        """A cancel was requested for ``job_id`` (called on every poll until it ends)."""
        raise NotImplementedError

    def heartbeat_gpus(self) -> list[dict[str, Any]] | None:
        return None

    def before_loop(self) -> None:
        pass

    def after_loop(self) -> None:
        pass

    def drain(self) -> None:
        """The first signal: claiming has stopped."""

    def force(self) -> None:
        """The second signal."""

    def busy(self) -> bool:
        return bool(self.held_claims()) or bool(self._unrecorded)

    def should_exit(self) -> bool:
        if self.busy():
            return False
        if self._stopping:
            return True
        if self.options.once and self._claimed >= 1:
            return True
        return self.options.exit_when_idle and self._idle

    def wait_time(self) -> float:
        return self.options.poll_interval

    # ------------------------------------------------------------------ main loop

    def run(self) -> int:
        """Run until stopped (a signal, ``once``, ``exit_when_idle``); the exit status."""
        self.register()
        self.install_signals()
        self.before_loop()
        lease_every = max(0.2, self.options.lease_s / 3)
        self._house.every(lease_every, "lease", self.renew)
        # a silent row reads as a lost worker even when leases are long (the dispatcher's)
        beat = min(lease_every, WORKER_TTL_S / 4)
        self._house.every(beat, "heartbeat", lambda: self.heartbeat(self.status()))
        if self.options.housekeeping:
            self._house.add_housekeeping(self.store, self.options.housekeeping_options)
        self._house.start()
        try:
            while not self.should_exit():
                self.handle_signals()
                self.tick()
                if self.should_exit():
                    break
                self._wake.wait(self.wait_time())
                self._wake.clear()
        finally:
            self.after_loop()
            self._house.shutdown()
            self._mark_stopped()
        log.info("%s %s stopped", self.noun, self.id)
        return 0

    def tick(self) -> None:
        """One pass: ends the store owes, leases and cancels, the executor's own follow-up,
        then new claims."""
        try:
            self.retry_records()
            self.apply_leases()
            self.follow()
            if not self._stopping:
                self.fill()
        except StoreUnavailable as exc:
            log.warning("the store is unavailable, will retry: %s", exc.message)

    def status(self) -> str:
        return "draining" if self._stopping else "running"

    # ------------------------------------------------------------------ signals

    def install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            # A signal ignored since start stays ignored (as a shell ignores SIGINT for
            # `worker &`): `tracker up` starts its worker so, to stop it with one SIGTERM.
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        # No lock may be taken here (the loop may hold it right now): a counter and
        # Wakeup.set(), a flag and a byte written to a pipe.
        self._signals += 1
        self._wake.set()

    def handle_signals(self) -> None:
        if self._signals >= 1 and not self._stopping:
            self._stopping = True
            self.drain()
        if self._signals >= 2 and not self._forced:
            self._forced = True
            self.force()

    # ------------------------------------------------------------------ claims

    def fill(self) -> None:
        while (
            self.has_room()
            and not self._stopping
            and time.monotonic() >= self._next_claim
            and not (self.options.once and self._claimed >= 1)
        ):
            try:
                got = queue.claim(
                    self.store, self.id, lease_s=self.options.lease_s, **self.claim_fit()
                )
            except StoreUnavailable as exc:
                log.warning("claim failed, the store is unavailable: %s", exc.message)
                got = None
            if got is None:
                self._idle = True
                if self.claim_throttled:
                    self._next_claim = time.monotonic() + self.options.poll_interval
                return
            self._idle = False
            self._claimed += 1
            with self._lock:
                self._starting = got[0]
            try:
                more = self.start(*got)
            finally:
                with self._lock:
                    self._starting = None
            self.handle_signals()
            if not more:
                return

    def prepare(self, claim: ClaimedJob) -> Launch | None:
        """What ``claim`` starts with; None when it must not start: its lease was lost at
        once, the store is unavailable (the reaper requeues it once the lease expires), or
        its command is missing here (recorded as ``missing_file``)."""
        job = claim.job
        try:
            resume = resume_checkpoint(self.store, claim)
            if claim.attempt > 1 and not queue.set_resume_checkpoint(self.store, claim, resume):
                return None  # lost at once; the new holder runs it
            budget = self.log_budget(claim)
            token = self.job_token(claim)
        except StoreUnavailable as exc:
            log.error("job %s: not started, the store is unavailable: %s", job.id, exc.message)
            return None
        try:
            if job.snapshot_id is not None:
                root = self.materialize(claim)
            else:
                root = choose_project_root(
                    self.project_root, self.project_root_given, job.project_root, job.cwd
                )
            python = self.job_python(root)
            argv, cwd = resolve_job_paths(job.argv, job.cwd, root, self.host, python)
        except EnvBuildError as exc:
            self.finish(claim, None, Failure(MISSING_MODULE, f"the job's environment: {exc}"))
            return None
        except StoreUnavailable as exc:
            log.error("job %s: not started, the store is unavailable: %s", job.id, exc.message)
            return None
        except SpawnError as exc:
            self.finish(claim, None, Failure(MISSING_FILE, f"{exc}. Check the command and path."))
            return None
        return Launch(claim, list(argv), cwd, resume, budget, token)

    def job_python(self, root: str) -> str:
        """The interpreter a job recorded as ``python ...`` starts with: with ``--env venv``
        the environment of its project's requirements (built once per file), else this
        loop's own."""
        if self.python_env != "venv":
            return self.interpreter
        built = ensure_env(Path(root), self.env_dir, sys.executable)
        return built or self.interpreter

    def job_uri(self) -> str:
        """The store address jobs log to: ``--job-uri``, else this loop's own store."""
        return self.options.job_uri or self.store.absolute_uri()

    def job_token(self, claim: ClaimedJob) -> str | None:
        """A job that logs over HTTP gets a token of its own (``log`` scope, its run only,
        valid while this attempt runs: ``tracker.store.tokens.create_job_token``), never
        its starter's credentials. None for a job that writes to the database itself."""
        if not self.job_uri().startswith(("http://", "https://")):
            return None
        return tokens.create_job_token(self.store, claim.run_id, claim.job.id, claim.attempt)[1]

    def materialize(self, claim: ClaimedJob) -> str:
        """Write the job's code snapshot into a fresh directory for this attempt; returns it
        (the project root its recorded paths resolve against).

        Raises:
            SpawnError: the snapshot cannot be written here (a blob gone from the artifact
                root, no artifact root, a full disk): the attempt fails ``missing_file``.
            StoreUnavailable: the database or the object store is away (not started; the
                reaper requeues it).
        """
        job = claim.job
        dest = self.snapshot_dir / f"job-{job.id}" / f"attempt-{claim.attempt}"
        if dest.exists():  # a leftover of this very attempt (a crash while writing it)
            shutil.rmtree(dest, ignore_errors=True)
        try:
            snapshots.materialize(self.store, int(job.snapshot_id or 0), dest)
        except (NotFound, InvalidInput, OSError) as exc:
            text = exc.message if isinstance(exc, TrackerError) else str(exc)
            raise SpawnError(
                f"the code snapshot {job.snapshot_id} could not be written to {dest} on "
                f"{self.host}: {text}"
            ) from exc
        log.info("job %s: code snapshot %s written to %s", job.id, job.snapshot_id, dest)
        return str(dest)

    def log_budget(self, claim: ClaimedJob, *, adopted: bool = False) -> logs.LogBudget:
        """The output ``claim`` may still store (only a retry or an adopted attempt has
        output stored already)."""
        limit = self.options.log_limit
        if claim.attempt == 1 and not adopted:
            return logs.LogBudget(limit)
        return logs.load_budget(self.store, claim.job.id, limit)

    def job_env(self, launch: Launch, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        own = {"TRACKER_TOKEN": launch.token} if launch.token else {}
        return job_environment(
            launch.claim, self.job_uri(), launch.resume, {**own, **(extra or {})}
        )

    # ------------------------------------------------------------------ leases

    def leased_claims(self) -> list[ClaimedJob]:
        """Every attempt whose lease this process keeps: held, starting, or ended with the
        end not yet in the store."""
        with self._lock:
            claims = {c.job.id: c for c in self.held_claims()}
            if self._starting is not None:
                claims.setdefault(self._starting.job.id, self._starting)
            for e in self._unrecorded.values():
                claims.setdefault(e.claim.job.id, e.claim)
        return list(claims.values())

    def renew(self) -> None:
        """Timer thread: extend every lease; lost ones are acted on by the loop."""
        claims = self.leased_claims()
        lost = queue.renew(self.store, claims, lease_s=self.options.lease_s)
        if lost:  # by token: the job may already run again under a newer attempt
            with self._lock:
                self._lost |= {c.lease_token for c in claims if c.job.id in lost}
            self._wake.set()

    def apply_leases(self) -> None:
        """Hand lost leases (renewal's, or a poll's) and cancel requests to the executor."""
        with self._lock:
            tokens, self._lost = self._lost, set()
            claims = self.held_claims()
        for job_id, e in list(self._unrecorded.items()):
            if e.claim.lease_token in tokens:
                log.error("job %s: lease lost before the end was recorded; nothing written", job_id)
                with self._lock:
                    self._unrecorded.pop(job_id, None)
        lost = {c.job.id for c in claims if c.lease_token in tokens}
        now = time.monotonic()
        if claims and now >= self._next_poll:
            self._next_poll = now + POLL_S
            try:
                states = queue.poll(self.store, claims)
            except StoreUnavailable as exc:
                log.warning("poll failed, the store is unavailable: %s", exc.message)
                states = {}
            for job_id, state in states.items():
                if not state.held:
                    lost.add(job_id)
                elif state.cancel_requested and job_id not in lost:
                    self.cancel(job_id)
        for job_id in lost:
            self.lose(job_id)

    # ------------------------------------------------------------------ records

    def finish(
        self,
        claim: ClaimedJob,
        exit_code: int | None,
        failure: Failure | None,
        took_s: float | None = None,
    ) -> None:
        """Record how ``claim`` ended; while the store is unavailable the end is kept and
        written on a later tick (its lease renewed meanwhile)."""
        ending = Ending(claim, exit_code, failure, took_s)
        if not self._record(ending):
            with self._lock:
                self._unrecorded[claim.job.id] = ending
        self._next_claim = 0.0  # room again: claim at once
        self._wake.set()

    def retry_records(self) -> None:
        for job_id, ending in list(self._unrecorded.items()):
            if self._record(ending):
                with self._lock:
                    self._unrecorded.pop(job_id, None)
                self._next_claim = 0.0

    def _record(self, e: Ending) -> bool:
        retry = self.options.housekeeping_options.policy.next_retry
        if not verdict.record(self.store, e.claim, e.exit_code, e.failure, retry, took_s=e.took_s):
            return False
        self._ended += 1
        return True

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self, status: str) -> None:
        try:
            workers.heartbeat_worker(self.store, self.id, status=status, gpus=self.heartbeat_gpus())
        except StoreUnavailable as exc:
            log.warning("%s heartbeat failed: %s", self.noun, exc.message)

    def _mark_stopped(self) -> None:
        try:
            self.heartbeat("stopped")
        except Exception:
            log.exception("could not mark %s %s stopped", self.noun, self.id)


def default_snapshot_dir() -> str:
    """Where a worker writes the code of its jobs unless told (``--snapshot-dir``):
    ``$XDG_CACHE_HOME/tracker/snapshots``, else ``~/.cache/tracker/snapshots``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tracker", "snapshots")


def store_key(store: Store) -> str:
    """A short name of ``store`` for directories (a hash of its address, without password)."""
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        url = url.set(database=os.path.abspath(url.database))
    text = url.render_as_string(hide_password=True)
    return "store-" + hashlib.sha256(text.encode()).hexdigest()[:12]
