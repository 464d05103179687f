"""Cron schedules in the store, shared by the runner and the dashboard: reading a crontab,
its fire times, and the schedule rows (add, read, pause, delete).

Fire times come from APScheduler's ``CronTrigger`` with crontab semantics (5 fields:
minute hour day month weekday, weekday 0 or 7 = Sunday; a 6th leading field adds seconds).
APScheduler is imported inside the functions that need it, so ``import tracker`` stays cheap.
Firing schedules (exactly once per fire time) is the runner's job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.errors import InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import write_begin
from tracker.store.jobs import JobSpec, engine_of, read_conn

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

    from tracker.store.store import Store

_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# Look back this far (growing) for the latest fire time, so a per-second schedule does not
# step through a day of missed seconds one by one.
_WINDOWS = (60.0, 3600.0, 86400.0, 31 * 86400.0, 366 * 86400.0, 5 * 366 * 86400.0)


class CronError(InvalidInput):
    code = "invalid_cron"


@dataclass(frozen=True)
class ScheduleInfo:
    id: int
    name: str
    cron: str
    timezone: str
    spec: dict[str, Any]
    paused: bool
    created_at: float
    last_fire_at: float | None
    next_fire_at: float | None = None


# --------------------------------------------------------------------- cron (pure)


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
        CronError: the expression or the time zone is invalid.
    """
    from apscheduler.triggers.cron import CronTrigger

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
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc)


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


# ------------------------------------------------------------------------- rows


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    """A schedule's stored ``spec``: the job fields under JobSpec's names (no schedule id)."""
    data = dataclasses.asdict(spec)
    data["tags"] = list(spec.tags)
    data.pop("schedule_id", None)
    return data


def spec_from_dict(data: dict[str, Any], **changes: Any) -> JobSpec:
    """The JobSpec a stored ``spec`` describes (unknown keys ignored), with ``changes``."""
    known = {f.name for f in dataclasses.fields(JobSpec)}
    values = {k: v for k, v in data.items() if k in known}
    values["tags"] = tuple(values.get("tags") or ())
    values.update(changes)
    return JobSpec(**values)


def schedule_info(row: Any, now: float) -> ScheduleInfo:
    """A schedule row; ``next_fire_at`` is None while paused or when the cron is unreadable."""
    nxt = None
    if not row.paused:
        try:
            trigger = trigger_for(row.cron, row.timezone)
        except CronError:
            trigger = None
        if trigger is not None:
            nxt = next_fire_time(trigger, max(row.last_fire_at or row.created_at, now))
    return ScheduleInfo(
        row.id,
        row.name,
        row.cron,
        row.timezone,
        row.spec or {},
        bool(row.paused),
        row.created_at,
        row.last_fire_at,
        nxt,
    )


def insert_schedule(
    source: Store | sa.Engine,
    cron: str,
    spec: JobSpec,
    *,
    timezone: str,
    name: str | None,
    now: float,
) -> int:
    """Store a schedule of an already validated cron and spec; returns its id.

    The name defaults to ``<script> <cron>``. Raises StoreUnavailable.
    """
    script = next((a for a in spec.argv[1:] if a.endswith(".py")), spec.argv[0])
    name = name or f"{script.rsplit('/', 1)[-1]} {cron}"
    with write_begin(engine_of(source)) as conn:
        schedule_id = conn.execute(
            sa.insert(m.Schedule)
            .values(
                name=name[:200],
                cron=cron,
                timezone=timezone,
                spec=spec_to_dict(spec),
                paused=False,
                created_at=now,
                last_fire_at=None,
            )
            .returning(m.Schedule.id)
        ).scalar_one()
    return int(schedule_id)


def get_schedule(
    source: Store | sa.Engine, schedule_id: int, *, now: float | None = None
) -> ScheduleInfo:
    """Raises NotFound for an unknown id."""
    now = time.time() if now is None else now
    with read_conn(source) as conn:
        row = conn.execute(
            sa.select(*m.Schedule.__table__.columns).where(m.Schedule.id == schedule_id)
        ).first()
    if row is None:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
    return schedule_info(row, now)


def list_schedules(source: Store | sa.Engine, *, now: float | None = None) -> list[ScheduleInfo]:
    """Every schedule, oldest first."""
    now = time.time() if now is None else now
    query = sa.select(*m.Schedule.__table__.columns).order_by(m.Schedule.id)
    with read_conn(source) as conn:
        return [schedule_info(r, now) for r in conn.execute(query)]


def set_paused(
    source: Store | sa.Engine, schedule_id: int, paused: bool, *, now: float | None = None
) -> None:
    """Pause or resume. Resuming does not fire the times missed while paused.

    Raises NotFound for an unknown id.
    """
    values: dict[str, Any] = {"paused": paused}
    if not paused:
        values["last_fire_at"] = time.time() if now is None else now
    with write_begin(engine_of(source)) as conn:
        found = conn.execute(
            sa.update(m.Schedule).where(m.Schedule.id == schedule_id).values(**values)
        ).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")


def delete_schedule(source: Store | sa.Engine, schedule_id: int) -> None:
    """Delete a schedule (its jobs stay). Raises NotFound for an unknown id."""
    with write_begin(engine_of(source)) as conn:
        found = conn.execute(sa.delete(m.Schedule).where(m.Schedule.id == schedule_id)).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
