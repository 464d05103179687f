"""Periodic work: the one module of background tasks, one throttle, one thread loop.

Every process that is up -- ``tracker ui``, ``tracker worker``, ``tracker scheduler``,
``tracker dispatcher`` -- runs a :class:`PeriodicLoop` with the tasks it owns:

=====================  ====================================================  ==============
task                   what one pass does                                    run by
=====================  ====================================================  ==============
``reap leases``        expired job leases: crashed, or queued for a retry     worker, scheduler,
                       (:func:`tracker.store.queue.reap_expired_leases`)     dispatcher
``crash watch``        ``running`` runs without heartbeats for ``stale_s``:   all
                       crashed at their last heartbeat, their chart rollups
                       repaired (``tracker.store.runs.mark_stale_runs_crashed``)
``pending reasons``    why each queued job waits (worker, scheduler)          worker, scheduler
``schedules``          due cron schedules enqueue their jobs                  worker, scheduler,
                                                                             dispatcher
``live doctor``        diagnoses of running runs whose points moved           all
                       (:class:`tracker.store.diagnoses.LiveSweep`)
``mlflow idle``        silent MLflow-created runs marked stale                ``tracker ui``
``profile summaries``  stored profiles summarised before anyone reads them   ``tracker ui``
                       (:func:`summarise_profiles_once`)
``sweeps``             the sweep controller: ended trials read, running       all
                       trials shown to the pruner, new trials queued
                       (:func:`tracker.store.sweeps.control_once`)
``seal series``        the points of runs that ended over a minute ago        ``tracker ui``
                       packed into chunks, a second's worth per pass
                       (:func:`seal_series_once`, ``tracker.store.chunks``)
=====================  ====================================================  ==============

Never inside a request: a view only writes rows; this loop reads them later.

Every task is idempotent and fenced in the database, so any number of processes may run
the same tasks at once. A task that fails is logged (a ``StoreUnavailable`` as one warning
line) and runs again at its next period: the loop never dies of an error.

**One throttle** (:class:`tracker.rules.throttle.Throttle`, also the SQL sink's for its live
doctor): a task runs again ``every_s`` after it started, and never sooner than 10 times its
last pass's duration after it, so a pass over a huge store costs at most ~10% of the loop's
thread however short the period.

**Fork-safe**: :meth:`PeriodicLoop.ensure_running` starts the thread in a process that does
not run it yet -- a gunicorn worker forked after the app was built (``--preload``) inherits
the loop but not its thread; the dashboard calls it before each request (one pid compare).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tracker.errors import InvalidInput, NotFound, StoreUnavailable
from tracker.rules.profile_summary import summarize
from tracker.rules.throttle import SLOWDOWN, Throttle
from tracker.store import Store, profiles, sweeps
from tracker.store.diagnoses import LiveSweep
from tracker.store.queue import reap_expired_leases
from tracker.store.runs import mark_stale_runs_crashed
from tracker.store.schedules import fire_due

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Task:
    """``run`` every ``every_s`` seconds (subject to the throttle); ``name`` is what its log
    lines say."""

    name: str
    every_s: float
    run: Callable[[], object]

    def __post_init__(self) -> None:
        if not self.every_s > 0:
            raise ValueError(
                f"periodic task {self.name!r}: every_s must be > 0, not {self.every_s!r}"
            )


class PeriodicLoop:
    """One daemon thread running its tasks when due; ``start``/``stop`` bracket its life.

    ``run_due`` runs every due task once on the caller's thread (what the thread does each
    tick; tests call it with their own clock)."""

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        *,
        name: str = "tracker-periodic",
        clock: Callable[[], float] = time.monotonic,
        throttle: Throttle | None = None,
    ) -> None:
        self.name = name
        self.tasks: list[Task] = list(tasks)
        self.throttle = throttle or Throttle()
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, task: Task) -> None:
        if any(t.name == task.name for t in self.tasks):
            raise ValueError(f"periodic task {task.name!r} is already in this loop")
        self.tasks.append(task)

    def run_due(self) -> list[str]:
        """Run each due task once, in order; the names of those that ran."""
        ran = []
        for task in list(self.tasks):
            if self._stop.is_set():
                break
            started = self._clock()
            if not self.throttle.due(task.name, started):
                continue
            _guarded(task)
            self.throttle.ran(task.name, started, self._clock() - started, task.every_s)
            ran.append(task.name)
        return ran

    def start(self) -> None:
        self.ensure_running()

    def ensure_running(self) -> None:
        """Start the thread unless it runs in this process (cheap: one pid compare)."""
        if self._pid == os.getpid() or self._stop.is_set() or not self.tasks:
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
            self._pid = os.getpid()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        thread = self._thread
        if wait and thread is not None and self._pid == os.getpid():
            thread.join()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_due()
            wait = self.throttle.next_at() - self._clock()
            self._stop.wait(min(1.0, max(0.01, wait)))


def _guarded(task: Task) -> None:
    try:
        task.run()
    except StoreUnavailable as exc:
        log.warning("%s: the store is unavailable, will retry: %s", task.name, exc.message)
    except Exception:
        log.exception("%s failed; it runs again in %.0f s", task.name, task.every_s)


# ---------------------------------------------------------------- the tasks


def reap_leases(store: Store, retry: Callable[..., float | None], every_s: float = 5.0) -> Task:
    """Expired job leases: crashed, or queued again by ``retry`` (the retry policy)."""

    def run() -> list[tuple[int, str]]:
        jobs = reap_expired_leases(store, retry=retry)
        for job_id, status in jobs:
            log.warning("job %s: lease expired -> %s", job_id, status)
        return jobs

    return Task("reap leases", every_s, run)


def crash_silent_runs(store: Store, stale_s: float, every_s: float = 5.0) -> Task:
    """``running`` runs without heartbeats for ``stale_s`` seconds: crashed."""
    if not stale_s > 0:
        raise ValueError(f"crash watch: stale_s must be seconds > 0, not {stale_s!r}")
    return Task("crash watch", every_s, lambda: crash_silent_runs_once(store, stale_s))


def crash_silent_runs_once(store: Store, stale_s: float, now: float | None = None) -> list[int]:
    now = store.now() if now is None else now
    crashed = mark_stale_runs_crashed(store, older_than=now - stale_s, now=now)
    for run_id in crashed:
        log.warning("run %s: no heartbeat for %.0f s, marked crashed", run_id, stale_s)
    return crashed


def fire_schedules(store: Store, every_s: float = 1.0) -> Task:
    """Due cron schedules enqueue their jobs (once per fire time, whoever runs it)."""
    return Task("schedules", every_s, lambda: fire_schedules_once(store))


def fire_schedules_once(store: Store, now: float | None = None) -> list[tuple[int, float, int]]:
    import datetime as dt

    fired = fire_due(store, now=now)
    for schedule_id, fire_at, job_id in fired:
        when = dt.datetime.fromtimestamp(fire_at).isoformat(timespec="seconds")
        log.info("schedule %s fired for %s: job %s", schedule_id, when, job_id)
    return fired


class ProfileSummaries:
    """Summarises stored profiles that have no summary yet (``tracker.store.profiles``), so
    the run page's first look at one does not compute it inside its request; a trace that
    cannot be summarised is tried once per process (its reader gets the reason)."""

    def __init__(self, store: Store, per_pass: int = 3) -> None:
        self.store = store
        self.per_pass = per_pass
        self.given_up: set[int] = set()

    def once(self) -> list[int]:
        """Summarise up to ``per_pass`` profiles; their ids."""
        done: list[int] = []
        waiting = profiles.unsummarised(self.store, self.per_pass + len(self.given_up))
        for run_id, profile_id in [w for w in waiting if w[1] not in self.given_up]:
            if len(done) >= self.per_pass:
                break
            try:
                profiles.summary(self.store, run_id, profile_id, summarize)
            except (InvalidInput, NotFound) as exc:  # a bad or missing trace: not again here
                self.given_up.add(profile_id)
                log.info("profile %s of run %s: not summarised: %s", profile_id, run_id, exc)
                continue
            done.append(profile_id)
        return done


def profile_summaries(store: Store, every_s: float = 2.0) -> Task:
    """The ``profile summaries`` task."""
    return Task("profile summaries", every_s, ProfileSummaries(store).once)


def sweep_controller(store: Store, every_s: float = 2.0) -> Task:
    """The ``sweeps`` task: one controller pass over the running sweeps (none running: one
    small read). Fenced in the database, so every process may run it."""

    def run() -> list[str]:
        done = sweeps.control_once(store)
        for line in done:
            log.info("%s", line)
        return done

    return Task("sweeps", every_s, run)


SEAL_SETTLE_S = 60.0  # a run is sealed this long after it ended (its writer's last refresh)
SEAL_BUDGET_S = 1.0  # sealing one pass does, at most (then the next batch waits a period)
SEAL_BATCH_POINTS = 8_192  # head rows per seal transaction (~70 ms of SQLite's write lock)


def seal_series_once(
    store: Store,
    *,
    now: float | None = None,
    settle_s: float = SEAL_SETTLE_S,
    budget_s: float = SEAL_BUDGET_S,
    batch_points: int = SEAL_BATCH_POINTS,
) -> list[tuple[int, int]]:
    """Seal the head rows of runs that ended ``settle_s`` ago, oldest first, for about
    ``budget_s`` seconds; (run id, rows sealed) of the runs it worked on. A run cut off by
    the budget goes on at the next pass (each batch is committed)."""
    from tracker.store import chunks  # numpy: loaded by the first pass, not by the import

    now = store.now() if now is None else now
    started = time.monotonic()
    done: list[tuple[int, int]] = []
    for run_id in chunks.sealable_runs(store, now - settle_s, limit=50):
        left = max(0.0, budget_s - (time.monotonic() - started))  # 0: one batch
        sealed, _whole = chunks.seal_run(store, run_id, batch_points=batch_points, budget_s=left)
        log.debug("run %s: %d points sealed into chunks", run_id, sealed)
        done.append((run_id, sealed))
        if time.monotonic() - started >= budget_s:
            break
    return done


def seal_series(store: Store, every_s: float = 10.0) -> Task:
    """The ``seal series`` task (:func:`seal_series_once`)."""
    return Task("seal series", every_s, lambda: seal_series_once(store))


def live_doctor(store: Store, every_s: float = 5.0) -> Task:
    """Diagnoses of running runs whose points moved since the previous pass."""
    return Task("live doctor", every_s, LiveSweep(store).once)


__all__ = [
    "SLOWDOWN",
    "PeriodicLoop",
    "Task",
    "Throttle",
    "crash_silent_runs",
    "crash_silent_runs_once",
    "fire_schedules",
    "fire_schedules_once",
    "live_doctor",
    "reap_leases",
    "seal_series",
    "seal_series_once",
    "sweep_controller",
]
