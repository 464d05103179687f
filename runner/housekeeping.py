"""The runner's housekeeping: which periodic tasks (:mod:`tracker.periodic`) a worker,
``tracker scheduler`` and a dispatcher run -- the lease reaper, silent runs, pending
reasons, cron schedules and the live doctor (diagnoses of running runs) -- with the
decisions they need from the runner (retry policy, pending reasons).

The same tasks run inside every ``tracker worker`` and in ``tracker scheduler``; running
them in many processes at once is safe because every step is fenced in the database
(``SKIP LOCKED`` claims of expired rows, token-fenced updates, the unique
``(schedule_id, fire_at)`` row). A failing task is logged and runs again next period.
The SQL of each step is in the store (:mod:`tracker.store.queue`, ``.workers``,
``.schedules``); the decisions it needs (retry policy, pending reasons) are passed in.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from apscheduler.schedulers.background import BackgroundScheduler

from tracker import periodic
from tracker.errors import StoreUnavailable
from tracker.rules.liveness import RUN_STALE_S
from tracker.runner.pending import explain_pending
from tracker.runner.retry import RetryPolicy
from tracker.store import Store
from tracker.store.queue import reap_expired_leases
from tracker.store.workers import update_pending_reasons

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HousekeepingOptions:
    interval_s: float = 5.0  # between passes of the lease reaper
    run_stale_s: float = RUN_STALE_S  # a run without heartbeats this long is marked crashed
    schedules: bool = True
    doctor_s: float = 5.0  # between live doctor passes over running runs (0: off)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    # Write why queued jobs wait, judged against the live workers. Off in a Slurm dispatcher:
    # there the scheduler decides, and "no live worker" would be wrong.
    pending_reasons: bool = True


@dataclass(frozen=True)
class HousekeepingReport:
    crashed_jobs: list[tuple[int, str]]
    crashed_runs: list[int]
    fired: list[tuple[int, float, int]]


def housekeeping_once(
    store: Store, options: HousekeepingOptions, *, now: float | None = None
) -> HousekeepingReport:
    """One housekeeping pass: expired leases, silent runs, pending reasons, due schedules
    (each step the task of :mod:`tracker.periodic` that the loop runs on its own period)."""
    # The reaper reads the clock itself when not given a time: it stamps the attempts' end
    # once it holds their rows, after any write that committed before the takeover.
    jobs = reap_expired_leases(store, retry=options.policy.next_retry, now=now)
    now = store.now() if now is None else now
    runs = periodic.crash_silent_runs_once(store, options.run_stale_s, now=now)
    if options.pending_reasons:
        update_pending_reasons(store, explain_pending, now=now)
    fired = periodic.fire_schedules_once(store, now=now) if options.schedules else []
    for job_id, status in jobs:
        log.warning("job %s: lease expired -> %s", job_id, status)
    return HousekeepingReport(jobs, runs, fired)


def housekeeping_tasks(store: Store, options: HousekeepingOptions) -> list[periodic.Task]:
    """The runner's periodic tasks: the reaper, the crash watch, pending reasons every
    ``options.interval_s``; the live doctor every ``options.doctor_s`` (0: off); due cron
    schedules every second and the sweep controller every 2 s (unless ``options.schedules``
    is off). Sealing ended runs' points is not here: ``tracker ui`` runs it on a thread of
    its own, since a seal batch waiting for SQLite's write lock would hold up the reaper."""
    every = options.interval_s
    tasks = [
        periodic.reap_leases(store, options.policy.next_retry, every),
        periodic.crash_silent_runs(store, options.run_stale_s, every),
    ]
    if options.pending_reasons:
        tasks.append(
            periodic.Task(
                "pending reasons",
                every,
                lambda: update_pending_reasons(store, explain_pending, now=store.now()),
            )
        )
    if options.doctor_s > 0:
        tasks.append(periodic.live_doctor(store, options.doctor_s))
    if options.schedules:  # the processes that fire schedules also drive the sweeps
        tasks.append(periodic.fire_schedules(store))
        tasks.append(periodic.sweep_controller(store))
    return tasks


def _guarded(name: str, task: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            task()
        except StoreUnavailable as exc:
            log.warning("%s: the store is unavailable, will retry: %s", name, exc.message)
        except Exception:
            log.exception("%s failed; it runs again next period", name)

    return run


class Housekeeper:
    """The job loop's timers (lease renewal, heartbeats: ``every``, on an APScheduler
    thread pool so a slow task never delays a renewal) and the process's periodic loop
    (``add_housekeeping``: :class:`tracker.periodic.PeriodicLoop`); ``start``/``shutdown``
    bracket both."""

    def __init__(self) -> None:
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        self._scheduler = BackgroundScheduler(timezone="UTC")
        self._loop = periodic.PeriodicLoop(name="tracker-housekeeping")

    def every(self, seconds: float, name: str, task: Callable[[], object]) -> None:
        """Run ``task`` now and then every ``seconds`` (never two at once, late runs merged)."""
        self._scheduler.add_job(
            _guarded(name, task),
            "interval",
            seconds=seconds,
            id=name,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=dt.datetime.now(dt.UTC),
        )

    def add_housekeeping(self, store: Store, options: HousekeepingOptions) -> None:
        """The periodic tasks of :func:`housekeeping_tasks`, on the periodic loop."""
        for task in housekeeping_tasks(store, options):
            self._loop.add(task)

    def start(self) -> None:
        self._scheduler.start()
        self._loop.start()

    def shutdown(self, wait: bool = True) -> None:
        self._loop.stop(wait=wait)
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)


def run_housekeeping(
    store: Store, options: HousekeepingOptions, stop: Callable[[float], bool]
) -> None:
    """``tracker scheduler``: run the housekeeping until ``stop(timeout)`` is true."""
    house = Housekeeper()
    house.add_housekeeping(store, options)
    house.start()
    try:
        while not stop(1.0):
            pass
    finally:
        house.shutdown()
