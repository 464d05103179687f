"""What the dashboard says about time (pure): how long a run ran, which attempt of how many,
and a time in a schedule's zone.

A job's run lives across attempts: a retry or a requeue continues the same run, so the run's
``started_at`` is its first attempt's start and its ``ended_at`` the last one's end. The span
between them counts the waits in the queue (a retry's backoff, hours before a requeue), not
training: the demo showed "2m 50s" for 10 s of training. :func:`running_time` counts only
the time the attempts ran; a run no job started (a script run by hand, the ingest API) ran
from its start to its end.

:func:`attempts_allowed`: the number shown after the slash in "attempt 2/2". A job may run
``max_retries + 1`` times on its own; a requeue by hand allows one more, so the total is never
below the attempt number (it read "attempt 2/1" after a requeue). A queued job that already
ran waits for its next attempt, which counts as allowed.

:func:`iso_in_zone`: a time as ISO 8601 with the offset of a time zone (a schedule's, so that
"next fire 05:00" says which 05:00).

Nothing here raises for stored data: a missing start counts nothing, a missing end of an
attempt that is over ends at the next attempt's start or the run's end.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass

from tracker.entities import JobAttemptInfo, JobInfo, RunInfo

__all__ = ["RunningTime", "attempts_allowed", "iso_in_zone", "running_time"]


@dataclass(frozen=True)
class RunningTime:
    """``seconds``: time the run ran, over its finished spans (None when unknown);
    ``since``: the start of the span still running (the page adds the clock's time since),
    None when nothing runs now; ``attempts``: how many attempts were counted (0 for a run
    no job started)."""

    seconds: float | None
    since: float | None
    attempts: int


def attempts_allowed(job: JobInfo) -> int:
    """Attempts this job may make so far: its retries plus one, more once requeued by hand."""
    next_one = job.attempt + 1 if job.status == "queued" and job.attempt > 0 else job.attempt
    return max(job.max_retries + 1, next_one)


def running_time(run: RunInfo, attempts: Sequence[JobAttemptInfo]) -> RunningTime:
    """The time ``run`` ran: the sum of its job's attempts (oldest first), or from its start
    to its end (or now, while it runs) for a run no job started."""
    running = run.status == "running"
    if not attempts:
        if run.started_at is None:
            return RunningTime(None, None, 0)
        if running and run.ended_at is None:
            return RunningTime(0.0, run.started_at, 0)
        end = run.ended_at if run.ended_at is not None else run.heartbeat_at
        return RunningTime(None if end is None else max(0.0, end - run.started_at), None, 0)
    total, since = 0.0, None
    for i, attempt in enumerate(attempts):
        last = i == len(attempts) - 1
        end = attempt.ended_at
        if end is None and last and running:
            since = attempt.started_at
            continue
        if end is None:
            end = attempts[i + 1].started_at if not last else run.ended_at or run.heartbeat_at
        if end is not None:
            total += max(0.0, end - attempt.started_at)
    return RunningTime(total, since, len(attempts))


def iso_in_zone(seconds: float | None, timezone: str) -> str | None:
    """``seconds`` (epoch) as ISO 8601 in ``timezone`` with its offset, to the second; None
    for None. An unknown zone (stored before it was checked) reads as UTC."""
    if seconds is None:
        return None
    try:
        zone: dt.tzinfo = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        zone = dt.UTC
    return dt.datetime.fromtimestamp(seconds, zone).isoformat(timespec="seconds")
