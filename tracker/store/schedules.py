"""Cron schedules in the store, shared by the CLI, the dashboard and the housekeeping: the one
schedule API (add, read, pause/resume, delete) and firing due schedules exactly once.

Crontab arithmetic is the pure :mod:`tracker.rules.cron`. ``add_schedule`` applies one set
of checks whoever calls it (cron, time zone, name, and the job's ``check_spec``);
``set_paused`` returns the schedule as it now is.

``fire_due(store, now=...)`` takes the clock as an argument: for every active schedule it
finds the latest fire time in ``(last fire, now]`` (missed ones are coalesced into that one)
and inserts ``(schedule_id, fire_at)`` into ``schedule_fires``. That row's primary key makes
the insert succeed for exactly one caller; only that one enqueues the job, in the same
transaction. So any number of housekeepers may run at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from tracker.entities import JobSpec, ScheduleInfo
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.rules.cron import (
    CronError,
    TimezoneError,
    latest_fire_time,
    next_fire_time,
    trigger_for,
)
from tracker.store import models as m
from tracker.store.clone import clone_specs, spec_from_job, spec_from_run
from tracker.store.engine import read_conn, write_begin
from tracker.store.jobs import check_spec, insert_job
from tracker.store.rows import dialect_insert

if TYPE_CHECKING:
    from tracker.store.store import Store

_TIMEZONE = re.compile(r"[A-Za-z0-9_+\-/]{1,64}")  # a zone name, never a path


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


def add_schedule(
    store: Store,
    cron: Any,
    spec: JobSpec,
    *,
    name: Any = None,
    timezone: Any = "UTC",
    now: float | None = None,
) -> ScheduleInfo:
    """Store a schedule that enqueues ``spec`` at every cron time; its first fire is the
    first cron time after ``now``. The name defaults to ``<script> <cron>`` (made unique).

    Raises:
        TimezoneError: an unknown time zone (code ``invalid_timezone``, field ``timezone``).
        CronError: a bad cron expression (code ``invalid_cron``, field ``cron``).
        InvalidInput: a name that is not 1 to 200 characters, or a bad job field
            (``check_spec``).
        Conflict: another schedule already has this name (field ``name``); names are
            unique (a default name gets `` (2)``, `` (3)``... instead).
        StoreUnavailable: the database cannot be reached.
    """
    if not isinstance(timezone, str) or not _TIMEZONE.fullmatch(timezone):
        raise TimezoneError(
            f"time zone {timezone!r} is not a time zone name: use an IANA zone name such as "
            "UTC or Europe/Berlin",
            field="timezone",
        )
    if not isinstance(cron, str):
        raise CronError(f"cron {cron!r}: must be a crontab string", field="cron")
    trigger_for(cron, timezone)
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= 200):
        raise InvalidInput("name must be 1 to 200 characters", field="name")
    spec = check_spec(spec)
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        chosen = name if name is not None else _default_name(conn, spec, cron)
        # ON CONFLICT DO NOTHING: a name taken by a concurrent add is refused like any other
        schedule_id = conn.execute(
            dialect_insert(conn)(m.ScheduleRow)
            .values(
                name=chosen,
                cron=cron,
                timezone=timezone,
                spec=spec_to_dict(spec),
                paused=False,
                created_at=now,
                last_fire_at=None,
            )
            .on_conflict_do_nothing()
            .returning(m.ScheduleRow.id)
        ).scalar()
        if schedule_id is None:
            raise _name_taken(conn, chosen)
    return get_schedule(store, int(schedule_id), now=now)


def _default_name(conn: sa.Connection, spec: JobSpec, cron: str) -> str:
    """``<script> <cron>``, or with `` (2)``, `` (3)``... when a schedule already has it."""
    script = next((a for a in spec.argv[1:] if a.endswith(".py")), spec.argv[0])
    base = f"{script.rsplit('/', 1)[-1]} {cron}"[:190]
    similar = m.ScheduleRow.name.startswith(base, autoescape=True)
    taken = set(conn.execute(sa.select(m.ScheduleRow.name).where(similar)).scalars())
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base} ({n})"
    return name


def _name_taken(conn: sa.Connection, name: str) -> Conflict:
    other = conn.execute(sa.select(m.ScheduleRow.id).where(m.ScheduleRow.name == name)).scalar()
    return Conflict(
        f"a schedule named {name!r} already exists (schedule {other}): schedule names are "
        "unique; choose another name, or delete that schedule first",
        field="name",
    )


def add_schedule_from(
    store: Store,
    source: tuple[Literal["job", "run"], int],
    cron: Any,
    *,
    config: Any = None,
    priority: Any = None,
    fail_on: Any = None,
    name: Any = None,
    timezone: Any = "UTC",
    now: float | None = None,
) -> ScheduleInfo:
    """Schedule a copy of a ``("job", id)`` or ``("run", id)`` (what the dashboard offers):
    its spec with ``config``, ``priority`` and ``fail_on`` edited as a clone would be
    (``tracker.store.clone.clone_specs``), then ``add_schedule``.

    Raises NotFound (no such job or run), Conflict (a run that no job ran), and as
    ``clone_specs`` and ``add_schedule``.
    """
    kind, source_id = source
    template = spec_from_job(store, source_id) if kind == "job" else spec_from_run(store, source_id)
    (spec,) = clone_specs(template, config=config, priority=priority, fail_on=fail_on)
    return add_schedule(store, cron, spec, name=name, timezone=timezone, now=now)


def get_schedule(store: Store, schedule_id: int, *, now: float | None = None) -> ScheduleInfo:
    """Raises NotFound for an unknown id."""
    now = store.now() if now is None else now
    with read_conn(store.engine) as conn:
        row = conn.execute(
            sa.select(*m.ScheduleRow.__table__.columns).where(m.ScheduleRow.id == schedule_id)
        ).first()
    if row is None:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
    return schedule_info(row, now)


def list_schedules(store: Store, *, now: float | None = None) -> list[ScheduleInfo]:
    """Every schedule, oldest first."""
    now = store.now() if now is None else now
    query = sa.select(*m.ScheduleRow.__table__.columns).order_by(m.ScheduleRow.id)
    with read_conn(store.engine) as conn:
        return [schedule_info(r, now) for r in conn.execute(query)]


def set_paused(
    store: Store, schedule_id: int, paused: bool, *, now: float | None = None
) -> ScheduleInfo:
    """Pause or resume; returns the schedule as it now is. Resuming does not fire the times
    missed while paused.

    Raises NotFound for an unknown id, StoreUnavailable.
    """
    now = store.now() if now is None else now
    values: dict[str, Any] = {"paused": paused}
    if not paused:
        values["last_fire_at"] = now
    with write_begin(store.engine) as conn:
        found = conn.execute(
            sa.update(m.ScheduleRow).where(m.ScheduleRow.id == schedule_id).values(**values)
        ).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")
    return get_schedule(store, schedule_id, now=now)


def delete_schedule(store: Store, schedule_id: int) -> None:
    """Delete a schedule (its jobs stay). Raises NotFound for an unknown id, StoreUnavailable."""
    with write_begin(store.engine) as conn:
        found = conn.execute(
            sa.delete(m.ScheduleRow).where(m.ScheduleRow.id == schedule_id)
        ).rowcount
    if not found:
        raise NotFound(f"schedule {schedule_id} does not exist", field="schedule")


# ------------------------------------------------------------------------- firing


def fire_due(store: Store, *, now: float | None = None) -> list[tuple[int, float, int]]:
    """Enqueue one job for each active schedule whose fire time has come since its last one.

    Returns (schedule id, fire time, job id) for the fires *this* call won. Raises
    StoreUnavailable.
    """
    now = store.now() if now is None else now
    query = sa.select(*m.ScheduleRow.__table__.columns).where(m.ScheduleRow.paused.is_(False))
    with read_conn(store.engine) as conn:
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


def _fire(store: Store, row: Any, fire_at: float, now: float) -> int | None:
    stamp = dt.datetime.fromtimestamp(fire_at).strftime("%Y%m%d-%H%M%S")
    try:
        with write_begin(store.engine) as conn:
            # RETURNING, not rowcount: drivers may report -1 for INSERT ... ON CONFLICT
            inserted = conn.execute(
                dialect_insert(conn)(m.ScheduleFireRow)
                .values(schedule_id=row.id, fire_at=fire_at)
                .on_conflict_do_nothing()
                .returning(m.ScheduleFireRow.schedule_id)
            ).first()
            job_id = None
            if inserted is not None:
                spec = spec_from_dict(row.spec or {}, schedule_id=row.id)
                spec = dataclasses.replace(spec, name=f"{(spec.name or row.name)[:180]}@{stamp}")
                job_id = insert_job(conn, check_spec(spec), now)
                conn.execute(
                    sa.update(m.ScheduleFireRow)
                    .where(
                        m.ScheduleFireRow.schedule_id == row.id,
                        m.ScheduleFireRow.fire_at == fire_at,
                    )
                    .values(job_id=job_id)
                )
            conn.execute(
                sa.update(m.ScheduleRow)
                .where(
                    m.ScheduleRow.id == row.id,
                    sa.or_(
                        m.ScheduleRow.last_fire_at.is_(None), m.ScheduleRow.last_fire_at < fire_at
                    ),
                )
                .values(last_fire_at=fire_at)
            )
    except sa.exc.IntegrityError:
        return None  # the schedule was deleted meanwhile
    return job_id
