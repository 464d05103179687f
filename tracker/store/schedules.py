"""Cron schedules in the store, shared by the runner and the dashboard: the schedule rows
(add, read, pause, delete). Crontab arithmetic is the pure :mod:`tracker.rules.cron`;
firing schedules (exactly once per fire time) is the runner's job.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.errors import NotFound
from tracker.rules.cron import CronError, next_fire_time, trigger_for
from tracker.store import models as m
from tracker.store.engine import write_begin
from tracker.store.jobs import JobSpec, engine_of, read_conn

if TYPE_CHECKING:
    from tracker.store.store import Store


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
