"""Crontab expressions and their fire times (pure: the clock is an argument).

Fire times come from APScheduler's ``CronTrigger`` with crontab semantics (5 fields:
minute hour day month weekday, weekday 0 or 7 = Sunday; a 6th leading field adds seconds).
APScheduler is imported inside :func:`trigger_for`, so importing this module stays cheap;
the functions that take a trigger only call its methods.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tracker.errors import InvalidInput

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

__all__ = [
    "CronError",
    "TimezoneError",
    "check_timezone",
    "crontab_weekday",
    "latest_fire_time",
    "next_fire_time",
    "trigger_for",
]

_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# Look back this far (growing) for the latest fire time, so a per-second schedule does not
# step through a day of missed seconds one by one.
_WINDOWS = (60.0, 3600.0, 86400.0, 31 * 86400.0, 366 * 86400.0, 5 * 366 * 86400.0)


class CronError(InvalidInput):
    code = "invalid_cron"


class TimezoneError(CronError):
    """A schedule's time zone is not an IANA zone name this machine knows (field ``timezone``).

    A subclass of CronError, so code that skips unreadable schedules skips these too; its
    code tells the two apart."""

    code = "invalid_timezone"


def check_timezone(timezone: object) -> str:
    """``timezone`` if it names an IANA time zone (``UTC``, ``Europe/Berlin``).

    Raises:
        TimezoneError: not a string, or no such zone in this machine's time zone database.
    """
    import zoneinfo

    hint = "use an IANA zone name such as UTC, Europe/Berlin or America/New_York"
    if not isinstance(timezone, str) or not timezone:
        raise TimezoneError(f"time zone {timezone!r} is not a zone name: {hint}", field="timezone")
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise TimezoneError(
            f"time zone {timezone!r} is not a known time zone: {hint}", field="timezone"
        ) from exc
    return timezone


def _dow_part(part: str) -> set[int]:
    body, _, step_text = part.partition("/")
    step = int(step_text) if step_text else 1
    if body == "*":
        lo, hi = 0, 6
    elif "-" in body:
        a, b = body.split("-", 1)
        lo, hi = int(a), int(b)
    else:
        lo = hi = int(body)
        if step_text:
            hi = 6
    if not (0 <= lo <= 7 and 0 <= hi <= 7 and lo <= hi and step >= 1):
        raise ValueError(part)
    return {d % 7 for d in range(lo, hi + 1, step)}


def crontab_weekday(field: str) -> str:
    """A crontab weekday field (0/7 = Sunday) in APScheduler's terms (day names).

    APScheduler 3 reads numbers as 0 = Monday; names mean the same in both, so only numeric
    parts are translated. Raises ValueError for a malformed part.
    """
    if any(c.isalpha() for c in field):
        return field
    days: set[int] = set()
    for part in field.split(","):
        days |= _dow_part(part)
    return ",".join(_DOW_NAMES[d] for d in sorted(days))


def trigger_for(cron: str, timezone: str = "UTC") -> CronTrigger:
    """Build the trigger for a 5-field crontab (or 6 fields, seconds first).

    Raises:
        TimezoneError: ``timezone`` is not a known zone name (code ``invalid_timezone``).
        CronError: the expression is invalid.
    """
    from apscheduler.triggers.cron import CronTrigger

    check_timezone(timezone)
    fields = cron.split() if isinstance(cron, str) else []
    if len(fields) not in (5, 6):
        raise CronError(
            f"cron {cron!r}: expected 5 fields (minute hour day month weekday), "
            "or 6 with seconds first",
            field="cron",
        )
    second = fields.pop(0) if len(fields) == 6 else "0"
    try:
        minute, hour, day, month, weekday = fields
        return CronTrigger(
            second=second,
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=crontab_weekday(weekday),
            timezone=timezone,
        )
    except (ValueError, LookupError, TypeError) as exc:
        raise CronError(f"cron {cron!r} (time zone {timezone}): {exc}", field="cron") from exc


def _utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def _fires(trigger: CronTrigger, after: float, until: float) -> Iterator[float]:
    """Fire times t with after < t <= until, in order."""
    previous = None
    start = _utc(after) + dt.timedelta(microseconds=1)
    while True:
        nxt = trigger.get_next_fire_time(previous, start)
        if nxt is None or nxt.timestamp() > until:
            return
        if nxt.timestamp() > after:
            yield nxt.timestamp()
        previous, start = nxt, nxt + dt.timedelta(microseconds=1)


def latest_fire_time(trigger: CronTrigger, after: float, now: float) -> float | None:
    """The latest fire time in ``(after, now]`` (a pure function of its arguments), or None."""
    first = next(_fires(trigger, after, now), None)
    if first is None:
        return None
    for window in _WINDOWS:
        lo = max(after, now - window)
        last = None
        for last in _fires(trigger, lo, now):  # noqa: B007 - we want the final value
            pass
        if last is not None:
            return last
    last = first
    for last in _fires(trigger, first, now):  # noqa: B007
        pass
    return last


def next_fire_time(trigger: CronTrigger, after: float) -> float | None:
    """The first fire time strictly after ``after``, or None when there is none."""
    nxt = trigger.get_next_fire_time(None, _utc(after) + dt.timedelta(microseconds=1))
    return None if nxt is None else float(nxt.timestamp())
