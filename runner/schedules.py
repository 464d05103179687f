"""Cron schedules stored in the database, and firing them exactly once per fire time.

Fire times come from APScheduler's ``CronTrigger`` with crontab semantics (5 fields:
minute hour day month weekday, weekday 0 or 7 = Sunday; a 6th leading field adds seconds).
``fire_due(store, now)`` takes the clock as an argument: for every active schedule it finds
the latest fire time in ``(last fire, now]`` (missed ones are coalesced into that one) and
inserts ``(schedule_id, fire_at)`` into ``schedule_fires``. That row's primary key makes the
insert succeed for exactly one scheduler; only that one enqueues the job, in the same
transaction. So any number of schedulers may run at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from apscheduler.triggers.cron import CronTrigger

from runner.entities import JobSpec, ScheduleInfo
from runner.jobrows import check_spec, dialect_insert, insert_job, read_conn
from tracker.errors import InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import write_begin

_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# Look back this far (growing) for the latest fire time, so a per-second schedule does not
# step through a day of missed seconds one by one.
_WINDOWS = (60.0, 3600.0, 86400.0, 31 * 86400.0, 366 * 86400.0, 5 * 366 * 86400.0)


class CronError(InvalidInput):
    code = "invalid_cron"


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
    fields = cron.split()
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
    except (ValueError, LookupError) as exc:
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
    nxt = trigger.get_next_fire_time(None, _utc(after) + dt.timedelta(microseconds=1))
    return None if nxt is None else nxt.timestamp()


# ------------------------------------------------------------------------- store


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    data = dataclasses.asdict(spec)
    data["tags"] = list(spec.tags)
    data.pop("schedule_id", None)
    return data


def spec_from_dict(data: dict[str, Any], **changes: Any) -> JobSpec:
    known = {f.name for f in dataclasses.fields(JobSpec)}
    values = {k: v for k, v in data.items() if k in known}
    values["tags"] = tuple(values.get("tags") or ())
    values.update(changes)
    return JobSpec(**values)


def _info(row: Any, now: float) -> ScheduleInfo:
    nxt = None
    if not row.paused:
        trigger = trigger_for(row.cron, row.timezone)
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


def add_schedule(
    store: Any,
    cron: str,
    spec: JobSpec,
    *,
    name: str | None = None,
    timezone: str = "UTC",
    now: float | None = None,
) -> ScheduleInfo:
    """Store a schedule; its first fire is the first cron time after ``now``.

    Raises:
        CronError: a bad cron expression or time zone.
        InvalidInput: a bad job field.
    """
    now = time.time() if now is None else now
    trigger_for(cron, timezone)
    spec = check_spec(spec)
    script = next((a for a in spec.argv[1:] if a.endswith(".py")), spec.argv[0])
    name = name or f"{script.rsplit('/', 1)[-1]} {cron}"
    with write_begin(store.engine) as conn:
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
    return get_schedule(store, schedule_id, now=now)


def get_schedule(store: Any, schedule_id: int, *, now: float | None = None) -> ScheduleInfo:
    """Raises NotFound for an unknown id."""
    now = time.time() if now is None else now
    with read_conn(store) as conn:
        row = conn.execute(
            sa.select(*m.Schedule.__table__.columns).where(m.Schedule.id == schedule_id)
        ).first()
    if row is None:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
    return _info(row, now)


def list_schedules(store: Any, *, now: float | None = None) -> list[ScheduleInfo]:
    now = time.time() if now is None else now
    query = sa.select(*m.Schedule.__table__.columns).order_by(m.Schedule.id)
    with read_conn(store) as conn:
        return [_info(r, now) for r in conn.execute(query)]


def set_paused(
    store: Any, schedule_id: int, paused: bool, *, now: float | None = None
) -> ScheduleInfo:
    """Pause or resume. Resuming does not fire the times missed while paused."""
    now = time.time() if now is None else now
    values: dict[str, Any] = {"paused": paused}
    if not paused:
        values["last_fire_at"] = now
    with write_begin(store.engine) as conn:
        found = conn.execute(
            sa.update(m.Schedule).where(m.Schedule.id == schedule_id).values(**values)
        ).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
    return get_schedule(store, schedule_id, now=now)


def delete_schedule(store: Any, schedule_id: int) -> None:
    """Delete a schedule (its jobs stay). Raises NotFound for an unknown id."""
    with write_begin(store.engine) as conn:
        found = conn.execute(sa.delete(m.Schedule).where(m.Schedule.id == schedule_id)).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")


def fire_due(store: Any, *, now: float | None = None) -> list[tuple[int, float, int]]:
    """Enqueue one job for each active schedule whose fire time has come since its last one.

    Returns (schedule id, fire time, job id) for the fires *this* call won.
    """
    now = time.time() if now is None else now
    query = sa.select(*m.Schedule.__table__.columns).where(m.Schedule.paused.is_(False))
    with read_conn(store) as conn:
        rows = conn.execute(query).all()
    won = []
    for row in rows:
        trigger = trigger_for(row.cron, row.timezone)
        fire_at = latest_fire_time(trigger, row.last_fire_at or row.created_at, now)
        if fire_at is None:
            continue
        job_id = _fire(store, row, fire_at, now)
        if job_id is not None:
            won.append((row.id, fire_at, job_id))
    return won


def _fire(store: Any, row: Any, fire_at: float, now: float) -> int | None:
    stamp = dt.datetime.fromtimestamp(fire_at).strftime("%Y%m%d-%H%M%S")
    try:
        with write_begin(store.engine) as conn:
            # RETURNING, not rowcount: drivers may report -1 for INSERT ... ON CONFLICT
            inserted = conn.execute(
                dialect_insert(conn)(m.ScheduleFire)
                .values(schedule_id=row.id, fire_at=fire_at)
                .on_conflict_do_nothing()
                .returning(m.ScheduleFire.schedule_id)
            ).first()
            job_id = None
            if inserted is not None:
                spec = spec_from_dict(row.spec or {}, schedule_id=row.id)
                spec = dataclasses.replace(spec, name=f"{(spec.name or row.name)[:180]}@{stamp}")
                job_id = insert_job(conn, check_spec(spec), now)
                conn.execute(
                    sa.update(m.ScheduleFire)
                    .where(m.ScheduleFire.schedule_id == row.id, m.ScheduleFire.fire_at == fire_at)
                    .values(job_id=job_id)
                )
            conn.execute(
                sa.update(m.Schedule)
                .where(
                    m.Schedule.id == row.id,
                    sa.or_(m.Schedule.last_fire_at.is_(None), m.Schedule.last_fire_at < fire_at),
                )
                .values(last_fire_at=fire_at)
            )
    except sa.exc.IntegrityError:
        return None  # the schedule was deleted meanwhile
    return job_id
