"""Runs: the one place a run row is created (:func:`insert_run`), and a run's life: create,
start, heartbeat, finish, read and list.

Callers of :func:`insert_run`: :func:`create_run` (the client, the ingest API, a replayed
offline run), a job's queued run (:mod:`tracker.store.jobs`) and an MLflow run, which sends no
heartbeats (:mod:`tracker.store.mlflow`). Every function takes the open
:class:`~tracker.store.store.Store` first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tracker.entities import RUN_STATUSES, AttemptFence, RunInfo
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.store import fencing, points
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.metrics import last_metrics_of
from tracker.store.projects import project_id
from tracker.store.store import Store


def insert_run(
    conn: sa.Connection,
    project: str,
    now: float,
    *,
    name: str | None = None,
    status: str = "running",
    config: dict[str, Any] | None = None,
    tags: Sequence[str] = (),
    heartbeat: bool = True,
    written_at: float | None = None,
    host: str | None = None,
    pid: int | None = None,
    git_commit: str | None = None,
    command: list[str] | None = None,
    notes: str | None = None,
) -> int:
    """The one place a run row is created (:func:`create_run`, a job's run, an MLflow
    run): its project made if missing, ``started_at`` (and, with ``heartbeat``, the first
    heartbeat) at ``now`` when it starts ``running``, and ``run-<id>`` for a run without a
    name. Returns its id."""
    started = now if status == "running" else None
    run_id = int(
        conn.execute(
            sa.insert(m.RunRow)
            .values(
                project_id=project_id(conn, project, now),
                name=name or "",
                status=status,
                config=config or {},
                tags=list(tags),
                created_at=now,
                started_at=started,
                heartbeat_at=started if heartbeat else None,
                written_at=written_at,
                host=host,
                pid=pid,
                git_commit=git_commit,
                command=command,
                notes=notes,
            )
            .returning(m.RunRow.id)
        ).scalar_one()
    )
    if not name:
        conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(name=f"run-{run_id}"))
    return run_id


def create_run(
    store: Store,
    project: str,
    name: str | None = None,
    config: dict[str, Any] | None = None,
    tags: Sequence[str] = (),
    *,
    status: str = "running",
    host: str | None = None,
    pid: int | None = None,
    git_commit: str | None = None,
    command: list[str] | None = None,
    now: float | None = None,
    heartbeat: bool = True,
    written_at: float | None = None,
    notes: str | None = None,
) -> RunInfo:
    """Create a run (``running`` by default; ``queued`` for a job not started yet).
    ``heartbeat=False``: a run whose client sends no heartbeats (an MLflow run), judged
    by its last write (``written_at``) instead."""
    check_status(status)
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        run_id = insert_run(
            conn, project, now, name=name, status=status, config=config, tags=tags,
            heartbeat=heartbeat, written_at=written_at, host=host, pid=pid,
            git_commit=git_commit, command=command, notes=notes,
        )  # fmt: skip
    return get_run(store, run_id)


def get_run(store: Store, run_id: int) -> RunInfo:
    """Raises NotFound when there is no run with this id."""
    with read_conn(store.engine) as conn:
        row = conn.execute(run_select().where(m.RunRow.id == run_id)).first()
        if row is None:
            raise NotFound(f"run {run_id} does not exist", field="run")
        last = last_metrics_of(conn, [run_id]).get(run_id, {})
    return run_info(row, last)


def start_run(
    store: Store,
    run_id: int,
    *,
    config: dict[str, Any] | None = None,
    host: str | None = None,
    pid: int | None = None,
    git_commit: str | None = None,
    now: float | None = None,
    fence: AttemptFence | None = None,
) -> RunInfo:
    """Mark a queued or running run (a job's, whose worker has claimed it) as running in
    this process, with ``config`` when given. A run's command is never changed here: it
    is set once, when the run or its job is created.

    Raises:
        NotFound: no such run.
        Conflict: the run has finished (and its job is not running again): a finished
            run stays as it ended.
        AttemptSuperseded: ``fence`` no longer holds (:mod:`tracker.store.fencing`).
    """
    now = store.now() if now is None else now
    values: dict[str, Any] = {"status": "running", "heartbeat_at": now, "ended_at": None}
    values.update({"host": host, "pid": pid, "exit_code": None, "error": None})
    values.update({"failure_class": None, "failure_hint": None})
    if git_commit:
        values["git_commit"] = git_commit
    if config is not None:
        values["config"] = config
    job_running = (
        sa.select(m.JobRow.id)
        .where(m.JobRow.run_id == run_id, m.JobRow.status == "running")
        .exists()
    )
    live = sa.or_(m.RunRow.status.in_(("queued", "running")), job_running)
    with write_begin(store.engine) as conn:
        fencing.check(conn, run_id, fence)
        found = conn.execute(
            sa.update(m.RunRow)
            .where(m.RunRow.id == run_id, live)
            .values(**values, started_at=sa.func.coalesce(m.RunRow.started_at, now))
        ).rowcount
    if not found:
        status = get_run(store, run_id).status  # NotFound for an unknown run
        raise Conflict(
            f"run {run_id} has {status}: a finished run cannot be started again "
            "(submit a new job, or clone this run's job)",
            field="run",
        )
    return get_run(store, run_id)


def finish_run(
    store: Store,
    run_id: int,
    status: str,
    *,
    exit_code: int | None = None,
    error: str | None = None,
    failure_class: str | None = None,
    failure_hint: str | None = None,
    now: float | None = None,
    fence: AttemptFence | None = None,
) -> None:
    """Give a run its final status (finished, failed, killed or crashed).

    Raises NotFound, InvalidInput (a status that is not a run status), AttemptSuperseded
    (``fence`` no longer holds: nothing changed).
    """
    check_status(status)
    now = store.now() if now is None else now
    values: dict[str, Any] = {"status": status, "ended_at": now}
    for key, value in (
        ("exit_code", exit_code),
        ("error", error),
        ("failure_class", failure_class),
        ("failure_hint", failure_hint),
    ):
        if value is not None:
            values[key] = value
    with write_begin(store.engine) as conn:
        fencing.check(conn, run_id, fence)
        found = conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**values))
    if not found.rowcount:
        raise NotFound(f"run {run_id} does not exist", field="run")


def update_run(store: Store, run_id: int, **values: Any) -> None:
    """Set plain columns of a run (config, tags, name, failure_class, ...)."""
    allowed = {c.name for c in m.RunRow.__table__.columns} - {"id", "project_id"}
    bad = set(values) - allowed
    if bad:
        raise InvalidInput(f"runs have no settable field(s) {sorted(bad)}", field="run")
    with write_begin(store.engine) as conn:
        conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**values))


def heartbeat(
    store: Store, run_id: int, now: float | None = None, *, fence: AttemptFence | None = None
) -> None:
    """The run's process is alive. Raises AttemptSuperseded when ``fence`` no longer holds."""
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        fencing.check(conn, run_id, fence)
        conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(heartbeat_at=now))


def mark_stale_runs_crashed(
    store: Store, *, older_than: float, now: float | None = None
) -> list[int]:
    """Runs still ``running`` whose last heartbeat is older than ``older_than`` become
    ``crashed``, ended at that last heartbeat (when the process was last seen alive, not
    when this sweep noticed). Returns the ids this call changed.

    A run whose job is held by a lease that has not expired (``now``) is left alone: its
    worker heartbeats it, and the lease reaper ends it. Safe with many sweepers at once
    (the update repeats the condition; each run is returned by the one that changed it)
    and cheap when nothing is stale: one indexed read, no write lock.

    Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    held = (
        sa.select(m.JobRow.id)
        .where(
            m.JobRow.run_id == m.RunRow.id,
            m.JobRow.status == "running",
            m.JobRow.lease_expires_at >= now,
        )
        .exists()
    )
    stale = sa.and_(m.RunRow.status == "running", m.RunRow.heartbeat_at < older_than, ~held)
    with read_conn(store.engine) as conn:
        if conn.execute(sa.select(m.RunRow.id).where(stale).limit(1)).first() is None:
            return []
    with write_begin(store.engine) as conn:
        ids = list(
            conn.execute(
                sa.update(m.RunRow)
                .where(stale)
                .values(
                    status="crashed",
                    ended_at=m.RunRow.heartbeat_at,
                    failure_class="crashed",
                    failure_hint="the training process stopped sending heartbeats",
                )
                .returning(m.RunRow.id)
            ).scalars()
        )
    # A killed writer may have stored points without refreshing their chart rollups.
    points.repair_rollups(store.engine, ids)
    return sorted(ids)


def list_runs(
    store: Store,
    *,
    project: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int = 100,
    offset: int = 0,
    deleted: bool | None = False,
) -> list[RunInfo]:
    """Newest first. ``status`` and ``tag`` filter exactly. ``deleted``: False (the
    default) lists active runs only, True soft-deleted ones only, None both."""
    if status is not None:
        check_status(status)
    query = run_select().order_by(m.RunRow.id.desc()).limit(limit).offset(offset)
    if deleted is not None:
        query = query.where(deleted_filter(deleted))
    if project is not None:
        query = query.where(m.ProjectRow.name == project)
    if status is not None:
        query = query.where(m.RunRow.status == status)
    if tag is not None:
        query = query.where(tag_filter(store.dialect, tag))
    with read_conn(store.engine) as conn:
        rows = conn.execute(query).all()
        last = last_metrics_of(conn, [r.id for r in rows])
    return [run_info(r, last.get(r.id, {})) for r in rows]


# ----------------------------------------------------------------------- helpers


def tag_filter(dialect: str, tag: str) -> sa.ColumnElement[bool]:
    """SQL condition 'the run has this tag' for the runs' JSON tag list."""
    if dialect == "postgresql":
        return m.RunRow.tags.op("@>")(sa.cast(sa.literal([tag], type_=sa.JSON), m.JsonType))
    each = sa.func.json_each(m.RunRow.tags).table_valued("value")
    return sa.exists(sa.select(1).select_from(each).where(each.c.value == tag))


def deleted_filter(deleted: bool) -> sa.ColumnElement[bool]:
    """SQL condition: the run is soft-deleted (``True``) or active (``False``)."""
    return m.RunRow.deleted_at.is_not(None) if deleted else m.RunRow.deleted_at.is_(None)


def check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise InvalidInput(
            f"status {status!r} is not a run status; use one of {', '.join(RUN_STATUSES)}",
            field="status",
        )


def run_select() -> sa.Select[Any]:
    """SELECT of every run column plus the project name (rows for :func:`run_info`)."""
    return sa.select(*m.RunRow.__table__.columns, m.ProjectRow.name.label("project")).join(
        m.ProjectRow, m.ProjectRow.id == m.RunRow.project_id
    )


def run_info(row: Any, last: dict[str, float]) -> RunInfo:
    """A row of :func:`run_select` as a RunInfo, with its last metric values."""
    r = row
    return RunInfo(
        id=r.id,
        project=row.project,
        name=r.name,
        status=r.status,
        config=r.config or {},
        tags=list(r.tags or []),
        created_at=r.created_at,
        started_at=r.started_at,
        ended_at=r.ended_at,
        heartbeat_at=r.heartbeat_at,
        host=r.host,
        pid=r.pid,
        git_commit=r.git_commit,
        command=r.command,
        exit_code=r.exit_code,
        failure_class=r.failure_class,
        failure_hint=r.failure_hint,
        error=r.error,
        last_metrics=last,
        deleted_at=r.deleted_at,
        notes=r.notes,
        starred=bool(r.starred),
    )
