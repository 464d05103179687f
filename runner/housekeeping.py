"""Housekeeping on an APScheduler ``BackgroundScheduler``: the lease reaper, silent runs,
pending reasons, cron schedules and the live doctor (diagnoses of running runs).

The same tasks run inside every ``tracker worker`` and in ``tracker scheduler``; running
them in many processes at once is safe because every step is fenced in the database
(``SKIP LOCKED`` claims of expired rows, token-fenced updates, the unique
``(schedule_id, fire_at)`` row). A failing task is logged and runs again next period.
The SQL of each step is in the store (:mod:`tracker.store.queue`, ``.workers``,
``.schedules``); the decisions it needs (retry policy, pending reasons) are passed in.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from apscheduler.schedulers.background import BackgroundScheduler

from tracker.errors import StoreUnavailable
from tracker.rules.liveness import RUN_STALE_S
from tracker.runner.pending import explain_pending
from tracker.runner.retry import RetryPolicy
from tracker.store import Store
from tracker.store.diagnoses import LiveSweep
from tracker.store.queue import reap_expired_leases
from tracker.store.schedules import fire_due
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
    """One housekeeping pass: expired leases, silent runs, pending reasons, due schedules."""
    # The reaper reads the clock itself when not given a time: it stamps the attempts' end
    # once it holds their rows, after any write that committed before the takeover.
    jobs = reap_expired_leases(store, retry=options.policy.next_retry, now=now)
    now = time.time() if now is None else now
    runs = store.mark_stale_runs_crashed(older_than=now - options.run_stale_s, now=now)
    if options.pending_reasons:
        update_pending_reasons(store, explain_pending, now=now)
    fired = fire_schedules(store, now=now) if options.schedules else []
    for job_id, status in jobs:
        log.warning("job %s: lease expired -> %s", job_id, status)
    return HousekeepingReport(jobs, runs, fired)


def fire_schedules(store: Store, *, now: float | None = None) -> list[tuple[int, float, int]]:
    """Enqueue the jobs of due cron schedules (see :func:`tracker.store.schedules.fire_due`)."""
    fired = fire_due(store, now=now)
    for schedule_id, fire_at, job_id in fired:
        when = dt.datetime.fromtimestamp(fire_at).isoformat(timespec="seconds")
        log.info("schedule %s fired for %s: job %s", schedule_id, when, job_id)
    return fired


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
    """A BackgroundScheduler with interval tasks; ``start``/``shutdown`` bracket its life."""

    def __init__(self) -> None:
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        self._scheduler = BackgroundScheduler(timezone="UTC")

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
        """The reaper's pass every ``options.interval_s``; due cron schedules every second."""
        reap = dataclasses.replace(options, schedules=False)
        self.every(options.interval_s, "housekeeping", lambda: housekeeping_once(store, reap))
        if options.doctor_s > 0:  # live diagnoses of running runs whose points moved
            sweep = LiveSweep(store)
            self.every(options.doctor_s, "doctor", sweep.once)
        if options.schedules:
            self.every(1.0, "schedules", lambda: fire_schedules(store))

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self, wait: bool = True) -> None:
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
