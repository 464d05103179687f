"""Cron schedules stored in the database, and firing them exactly once per fire time.

Reading crontabs, fire times and the schedule rows is shared with the dashboard
(:mod:`tracker.store.schedules`; the names are re-exported here). ``fire_due(store, now)``
takes the clock as an argument: for every active schedule it finds the latest fire time in
``(last fire, now]`` (missed ones are coalesced into that one) and inserts
``(schedule_id, fire_at)`` into ``schedule_fires``. That row's primary key makes the insert
succeed for exactly one scheduler; only that one enqueues the job, in the same transaction.
So any number of schedulers may run at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any

import sqlalchemy as sa

from tracker.rules.cron import (
    CronError,
    crontab_weekday,
    latest_fire_time,
    next_fire_time,
    trigger_for,
)
from tracker.store import models as m
from tracker.store import schedules as store_schedules
from tracker.store.engine import write_begin
from tracker.store.jobs import JobSpec, check_spec, insert_job, read_conn
from tracker.store.rows import dialect_insert
from tracker.store.schedules import (
    ScheduleInfo,
    delete_schedule,
    get_schedule,
    list_schedules,
    spec_from_dict,
    spec_to_dict,
)

__all__ = [
    "CronError",
    "add_schedule",
    "crontab_weekday",
    "delete_schedule",
    "fire_due",
    "get_schedule",
    "latest_fire_time",
    "list_schedules",
    "next_fire_time",
    "set_paused",
    "spec_from_dict",
    "spec_to_dict",
    "trigger_for",
]


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
    schedule_id = store_schedules.insert_schedule(
        store, cron, spec, timezone=timezone, name=name, now=now
    )
    return get_schedule(store, schedule_id, now=now)


def set_paused(
    store: Any, schedule_id: int, paused: bool, *, now: float | None = None
) -> ScheduleInfo:
    """Pause or resume. Resuming does not fire the times missed while paused.

    Raises NotFound for an unknown id.
    """
    now = time.time() if now is None else now
    store_schedules.set_paused(store, schedule_id, paused, now=now)
    return get_schedule(store, schedule_id, now=now)


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
