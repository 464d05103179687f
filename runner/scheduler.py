"""Housekeeping on an APScheduler ``BackgroundScheduler``: lease renewal, the sweeper, crons.

The same tasks run inside every ``tracker worker`` and in ``tracker scheduler``; running
them in many processes at once is safe because every step is fenced in the database
(``SKIP LOCKED`` claims of expired rows, token-fenced updates, the unique
``(schedule_id, fire_at)`` row). A failing task is logged and runs again next period.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from tracker.errors import StoreUnavailable
from tracker.runner import queue, registry, schedules

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepOptions:
    interval_s: float = 5.0
    run_stale_s: float = 120.0  # a run without heartbeats this long is marked crashed
    schedules: bool = True
    policy: queue.RetryPolicy = field(default_factory=queue.RetryPolicy)


@dataclass(frozen=True)
class SweepReport:
    crashed_jobs: list[tuple[int, str]]
    crashed_runs: list[int]
    fired: list[tuple[int, float, int]]


def sweep_once(store: Any, options: SweepOptions, *, now: float | None = None) -> SweepReport:
    """One housekeeping pass: expired leases, silent runs, pending reasons, due schedules."""
    now = time.time() if now is None else now
    jobs = queue.sweep_expired(store, now=now, policy=options.policy)
    runs = store.mark_stale_runs_crashed(older_than=now - options.run_stale_s, now=now)
    registry.update_pending_reasons(store, now=now)
    fired = fire_schedules(store, now=now) if options.schedules else []
    for job_id, status in jobs:
        log.warning("job %s: lease expired -> %s", job_id, status)
    return SweepReport(jobs, runs, fired)


def fire_schedules(store: Any, *, now: float | None = None) -> list[tuple[int, float, int]]:
    """Enqueue the jobs of due cron schedules (see :func:`tracker.runner.schedules.fire_due`)."""
    fired = schedules.fire_due(store, now=now)
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
            next_run_time=dt.datetime.now(dt.timezone.utc),
        )

    def add_housekeeping(self, store: Any, options: SweepOptions) -> None:
        """The sweeper every ``options.interval_s``; due cron schedules every second."""
        sweep = dataclasses.replace(options, schedules=False)
        self.every(options.interval_s, "sweeper", lambda: sweep_once(store, sweep))
        if options.schedules:
            self.every(1.0, "schedules", lambda: fire_schedules(store))

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self, wait: bool = True) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)


def run_scheduler(store: Any, options: SweepOptions, stop: Callable[[float], bool]) -> None:
    """``tracker scheduler``: run the sweeper and the crons until ``stop(timeout)`` is true."""
    house = Housekeeper()
    house.add_housekeeping(store, options)
    house.start()
    try:
        while not stop(1.0):
            pass
    finally:
        house.shutdown()
