"""The Store: every query the tracker, the runner and the dashboard share.

ORM rows stop here; callers get the frozen dataclasses of :mod:`tracker.entities`.
Driver errors are translated at this boundary: every read runs in
:func:`~tracker.store.engine.read_conn`, every write in
:func:`~tracker.store.engine.write_begin` (both raise
:class:`~tracker.errors.StoreUnavailable` for an unreachable database); a missing row is
:class:`~tracker.errors.NotFound`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tracker.entities import (
    RUN_STATUSES,
    AttemptFence,
    CheckpointInfo,
    MetricPoint,
    RunEventInfo,
    RunInfo,
)
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.store import fencing, points, rollups
from tracker.store import models as m
from tracker.store.clock import StoreClock
from tracker.store.engine import (
    create_engine,
    current_revision,
    ensure_schema,
    read_conn,
    require_existing,
    resolve_uri,
    upgrade,
    write_begin,
)
from tracker.store.rows import dialect_insert
from tracker.store.runs import insert_run


class Store:
    """A SQL store (SQLite file or PostgreSQL). Create one per process and share it.

    Raises (constructor):
        InvalidInput: the URL is not a SQL URL (an ``http://`` URL needs the HTTP sink), or
            is malformed (``sqlite:/x.db``).
        NotFound: ``create=False`` (what read commands pass) and the SQLite file does not
            exist; nothing is created.
        StoreUnavailable: the database cannot be opened.
        SchemaError: the schema is newer than this code, or the automatic upgrade failed.

    ``artifact_root`` (a directory or ``s3://bucket/prefix``) overrides where artifact bytes
    live; see :mod:`tracker.store.artifacts`.
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        upgrade: bool = True,
        create: bool = True,
        artifact_root: str | None = None,
    ) -> None:
        self.uri = resolve_uri(uri)
        # where artifact blobs live (``tracker.store.artifacts.artifact_root`` resolves the
        # default: TRACKER_ARTIFACT_ROOT, else next to the SQLite file)
        self.artifact_root = artifact_root
        if self.uri.startswith(("http://", "https://")):
            raise InvalidInput(
                f"{self.uri} is a server address, not a database: the Store needs a SQL URL",
                field="TRACKER_URI",
            )
        if not create:
            require_existing(self.uri)
        self.engine = create_engine(self.uri)
        self.clock = StoreClock(self.engine)
        self._rollup_chunks = rollups.ChunkSizer(points.REFRESH_CHUNK_POINTS)
        if upgrade:
            ensure_schema(self.engine)

    def now(self) -> float:
        """The store's clock (:mod:`tracker.store.clock`): what leases, heartbeats and run
        times are stamped with, the same on every machine."""
        return self.clock.now()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def absolute_uri(self) -> str:
        """The URL with its password, a relative SQLite path made absolute (for a child
        process that runs elsewhere, e.g. a job's ``TRACKER_URI``)."""
        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            url = url.set(database=os.path.abspath(url.database))
        return url.render_as_string(hide_password=False)

    def database_file(self) -> Path | None:
        """The SQLite database file, absolute (its ``-wal`` and ``-shm`` files lie next to
        it); None for PostgreSQL or an in-memory database."""
        url = self.engine.url
        if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
            return None
        return Path(os.path.abspath(url.database))

    def schema_revision(self) -> str | None:
        """The database's Alembic revision, or None for a database with no schema."""
        return current_revision(self.engine)

    def upgrade(self, revision: str = "head") -> tuple[str | None, str]:
        """Apply migrations up to ``revision`` (see :func:`tracker.store.engine.upgrade`)."""
        return upgrade(self.engine, revision)

    def close(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Store({self.engine.url.render_as_string(hide_password=True)!r})"

    # ------------------------------------------------------------------ projects

    def list_projects(self) -> list[str]:
        """Names of the projects that are not deleted, sorted (``store.projects``)."""
        from tracker.store.projects import list_project_names

        return list_project_names(self)

    # ---------------------------------------------------------------------- runs

    def create_run(
        self,
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
    ) -> RunInfo:
        """Create a run (``running`` by default; ``queued`` for a job not started yet).
        ``heartbeat=False``: a run whose client sends no heartbeats (an MLflow run), judged
        by its last write (``written_at``) instead."""
        _check_status(status)
        now = self.now() if now is None else now
        with write_begin(self.engine) as conn:
            run_id = insert_run(
                conn, project, now, name=name, status=status, config=config, tags=tags,
                heartbeat=heartbeat, written_at=written_at, host=host, pid=pid,
                git_commit=git_commit, command=command,
            )  # fmt: skip
        return self.get_run(run_id)

    def get_run(self, run_id: int) -> RunInfo:
        """Raises NotFound when there is no run with this id."""
        with read_conn(self.engine) as conn:
            row = conn.execute(run_select().where(m.RunRow.id == run_id)).first()
            if row is None:
                raise NotFound(f"run {run_id} does not exist", field="run")
            last = last_metrics_of(conn, [run_id]).get(run_id, {})
        return run_info(row, last)

    def start_run(
        self,
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
        now = self.now() if now is None else now
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
        with write_begin(self.engine) as conn:
            fencing.check(conn, run_id, fence)
            found = conn.execute(
                sa.update(m.RunRow)
                .where(m.RunRow.id == run_id, live)
                .values(**values, started_at=sa.func.coalesce(m.RunRow.started_at, now))
            ).rowcount
        if not found:
            status = self.get_run(run_id).status  # NotFound for an unknown run
            raise Conflict(
                f"run {run_id} has {status}: a finished run cannot be started again "
                "(submit a new job, or clone this run's job)",
                field="run",
            )
        return self.get_run(run_id)

    def finish_run(
        self,
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
        _check_status(status)
        now = self.now() if now is None else now
        values: dict[str, Any] = {"status": status, "ended_at": now}
        for key, value in (
            ("exit_code", exit_code),
            ("error", error),
            ("failure_class", failure_class),
            ("failure_hint", failure_hint),
        ):
            if value is not None:
                values[key] = value
        with write_begin(self.engine) as conn:
            fencing.check(conn, run_id, fence)
            found = conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**values))
        if not found.rowcount:
            raise NotFound(f"run {run_id} does not exist", field="run")

    def update_run(self, run_id: int, **values: Any) -> None:
        """Set plain columns of a run (config, tags, name, failure_class, ...)."""
        allowed = {c.name for c in m.RunRow.__table__.columns} - {"id", "project_id"}
        bad = set(values) - allowed
        if bad:
            raise InvalidInput(f"runs have no settable field(s) {sorted(bad)}", field="run")
        with write_begin(self.engine) as conn:
            conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**values))

    def heartbeat(
        self, run_id: int, now: float | None = None, *, fence: AttemptFence | None = None
    ) -> None:
        """The run's process is alive. Raises AttemptSuperseded when ``fence`` no longer holds."""
        now = self.now() if now is None else now
        with write_begin(self.engine) as conn:
            fencing.check(conn, run_id, fence)
            conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(heartbeat_at=now))

    def mark_stale_runs_crashed(self, *, older_than: float, now: float | None = None) -> list[int]:
        """Runs still ``running`` whose last heartbeat is older than ``older_than`` become
        ``crashed``, ended at that last heartbeat (when the process was last seen alive, not
        when this sweep noticed). Returns the ids this call changed.

        A run whose job is held by a lease that has not expired (``now``) is left alone: its
        worker heartbeats it, and the lease reaper ends it. Safe with many sweepers at once
        (the update repeats the condition; each run is returned by the one that changed it)
        and cheap when nothing is stale: one indexed read, no write lock.

        Raises StoreUnavailable.
        """
        now = self.now() if now is None else now
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
        with read_conn(self.engine) as conn:
            if conn.execute(sa.select(m.RunRow.id).where(stale).limit(1)).first() is None:
                return []
        with write_begin(self.engine) as conn:
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
        points.repair_rollups(self.engine, ids)
        return sorted(ids)

    def list_runs(
        self,
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
            _check_status(status)
        query = run_select().order_by(m.RunRow.id.desc()).limit(limit).offset(offset)
        if deleted is not None:
            query = query.where(deleted_filter(deleted))
        if project is not None:
            query = query.where(m.ProjectRow.name == project)
        if status is not None:
            query = query.where(m.RunRow.status == status)
        if tag is not None:
            query = query.where(tag_filter(self.dialect, tag))
        with read_conn(self.engine) as conn:
            rows = conn.execute(query).all()
            last = last_metrics_of(conn, [r.id for r in rows])
        return [run_info(r, last.get(r.id, {})) for r in rows]

    # ------------------------------------------------------------------- metrics

    def intern_keys(self, names: Iterable[str]) -> dict[str, int]:
        """Ids for metric key names, creating the missing ones (safe under concurrency)."""
        names = sorted(set(names))
        if not names:
            return {}
        with write_begin(self.engine) as conn:
            ins = dialect_insert(conn)(m.MetricKeyRow).on_conflict_do_nothing(
                index_elements=["name"]
            )
            conn.execute(ins, [{"name": n} for n in names])
            rows = conn.execute(
                sa.select(m.MetricKeyRow.name, m.MetricKeyRow.id).where(
                    m.MetricKeyRow.name.in_(names)
                )
            ).all()
        return {name: key_id for name, key_id in rows}

    def write_points(
        self,
        rows: Sequence[points.Row],
        last: Sequence[points.Row] | None = None,
        bounds: dict[tuple[int, int], tuple[int, int]] | None = None,
        *,
        refresh_rollups: bool = True,
        fence: AttemptFence | None = None,
    ) -> None:
        """Store ``(run_id, key_id, step, wall_ms, value)`` rows idempotently (NaN or None
        for NaN). See :func:`tracker.store.points.write_rows` (and its ``fence``)."""
        points.write_rows(
            self.engine, rows, last, bounds, refresh_rollups=refresh_rollups, fence=fence
        )

    def append_points(self, rows: Sequence[points.Row]) -> int:
        """Store rows keeping every value of a step (MLflow's semantics); a row equal to a
        stored one in step, wall time and value is skipped. Returns how many were stored.
        See :func:`tracker.store.points.append_rows`."""
        return points.append_rows(self.engine, rows)

    def refresh_rollups(
        self,
        bounds: dict[tuple[int, int], tuple[int, int]],
        *,
        chunk_points: int | None = None,
        budget_s: float | None = None,
    ) -> dict[tuple[int, int], tuple[int, int]]:
        """Recompute the chart rollups of ``{(run_id, key_id): (lo, hi)}`` step ranges in
        short transactions (``chunk_points`` points each; by default as many as take about
        a quarter second here); returns the ranges left once ``budget_s`` is spent. See
        :func:`tracker.store.points.refresh_rollups`."""
        sizing = self._rollup_chunks if chunk_points is None else chunk_points
        return points.refresh_rollups(self.engine, bounds, chunk_points=sizing, budget_s=budget_s)

    def log_metrics(
        self, run_id: int, step: int, values: dict[str, float], wall_time: float | None = None
    ) -> None:
        """Convenience for tools and tests: store one step of metrics synchronously."""
        wall_ms = int((time.time() if wall_time is None else wall_time) * 1000)
        ids = self.intern_keys(values)
        rows = [
            (run_id, ids[k], step, wall_ms, None if math.isnan(v) else float(v))
            for k, v in values.items()
        ]
        self.write_points(rows)

    def metric_keys(self, run_id: int) -> list[str]:
        query = (
            sa.select(m.MetricKeyRow.name)
            .join(m.MetricSummaryRow, m.MetricSummaryRow.key_id == m.MetricKeyRow.id)
            .where(m.MetricSummaryRow.run_id == run_id)
            .order_by(m.MetricKeyRow.name)
        )
        with read_conn(self.engine) as conn:
            return list(conn.execute(query).scalars())

    def metric_history(
        self,
        run_id: int,
        key: str,
        *,
        lo: int | None = None,
        hi: int | None = None,
        limit: int | None = None,
    ) -> list[MetricPoint]:
        """Every point of one metric, by step (values logged at one step through MLflow in
        the order logged), optionally within [lo, hi]; with ``limit``, the first ``limit``
        of them and the rest of the last one's step (page on with ``lo`` = the last step +
        1)."""
        p = m.MetricPointRow
        query = (
            sa.select(p.step, p.seq, p.wall_ms, p.value)
            .join(m.MetricKeyRow, m.MetricKeyRow.id == p.key_id)
            .where(p.run_id == run_id, m.MetricKeyRow.name == key)
            .order_by(p.step, p.seq)
        )
        if lo is not None:
            query = query.where(p.step >= lo)
        if hi is not None:
            query = query.where(p.step <= hi)
        with read_conn(self.engine) as conn:
            rows = list(conn.execute(query if limit is None else query.limit(limit)))
            if limit is not None and rows and len(rows) >= limit:  # the step's other values
                step, seq = rows[-1][0], rows[-1][1]
                rows += conn.execute(query.where(p.step == step, p.seq > seq)).all()
        return [MetricPoint(s, w / 1000.0, v) for s, _, w, v in rows]

    def count_points(self, run_id: int) -> int:
        query = sa.select(sa.func.count()).where(m.MetricPointRow.run_id == run_id)
        with read_conn(self.engine) as conn:
            return conn.execute(query.select_from(m.MetricPointRow)).scalar_one()

    def last_metrics(self, run_ids: Sequence[int]) -> dict[int, dict[str, float]]:
        with read_conn(self.engine) as conn:
            return last_metrics_of(conn, run_ids)

    # --------------------------------------------------------------- checkpoints

    def add_checkpoint(
        self,
        run_id: int,
        step: int,
        path: str,
        size: int,
        sha256: str,
        metrics: dict[str, Any] | None = None,
        *,
        now: float | None = None,
    ) -> CheckpointInfo:
        now = self.now() if now is None else now
        with write_begin(self.engine) as conn:
            new_id = conn.execute(
                sa.insert(m.CheckpointRow)
                .values(
                    run_id=run_id,
                    step=step,
                    path=path,
                    bytes=size,
                    sha256=sha256,
                    metrics=metrics or {},
                    state="ok",
                    created_at=now,
                )
                .returning(m.CheckpointRow.id)
            ).scalar_one()
        return CheckpointInfo(new_id, run_id, step, path, size, sha256, metrics or {}, "ok", now)

    def list_checkpoints(self, run_id: int) -> list[CheckpointInfo]:
        """Newest (highest step, then latest written) first."""
        query = (
            sa.select(*m.CheckpointRow.__table__.columns)
            .where(m.CheckpointRow.run_id == run_id)
            .order_by(m.CheckpointRow.step.desc(), m.CheckpointRow.id.desc())
        )
        with read_conn(self.engine) as conn:
            return [checkpoint_info(c) for c in conn.execute(query)]

    def set_checkpoint_state(self, checkpoint_id: int, state: str) -> None:
        with write_begin(self.engine) as conn:
            conn.execute(
                sa.update(m.CheckpointRow)
                .where(m.CheckpointRow.id == checkpoint_id)
                .values(state=state)
            )

    # -------------------------------------------------------------------- events

    def add_event(
        self,
        run_id: int,
        kind: str,
        message: str,
        data: dict[str, Any] | None = None,
        *,
        now: float | None = None,
        fence: AttemptFence | None = None,
    ) -> None:
        """Record a run event. Raises AttemptSuperseded when ``fence`` no longer holds."""
        now = self.now() if now is None else now
        with write_begin(self.engine) as conn:
            fencing.check(conn, run_id, fence)
            conn.execute(
                sa.insert(m.RunEventRow).values(
                    run_id=run_id, at=now, kind=kind, message=message, data=data
                )
            )

    def diagnose(self, run_id: int, *, final: bool | None = None) -> list[Any]:
        """Run the doctor over this run and record its diagnoses (idempotent); see
        :func:`tracker.store.diagnoses.diagnose_run`, which this calls."""
        from tracker.store.diagnoses import diagnose_run

        return list(diagnose_run(self, run_id, final=final))

    def list_events(self, run_id: int) -> list[RunEventInfo]:
        query = (
            sa.select(*m.RunEventRow.__table__.columns)
            .where(m.RunEventRow.run_id == run_id)
            .order_by(m.RunEventRow.id)
        )
        with read_conn(self.engine) as conn:
            return [
                RunEventInfo(e.id, e.run_id, e.at, e.kind, e.message, e.data)
                for e in conn.execute(query)
            ]


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


def _check_status(status: str) -> None:
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
    )


def last_metrics_of(conn: sa.Connection, run_ids: Sequence[int]) -> dict[int, dict[str, float]]:
    """{run id: {metric name: last value}} for these runs (runs without metrics are absent)."""
    if not run_ids:
        return {}
    query = (
        sa.select(m.MetricSummaryRow.run_id, m.MetricKeyRow.name, m.MetricSummaryRow.last_value)
        .join(m.MetricKeyRow, m.MetricKeyRow.id == m.MetricSummaryRow.key_id)
        .where(m.MetricSummaryRow.run_id.in_(list(run_ids)))
    )
    out: dict[int, dict[str, float]] = {}
    for run_id, name, value in conn.execute(query):
        out.setdefault(run_id, {})[name] = value
    return out


def checkpoint_info(c: Any) -> CheckpointInfo:
    """A checkpoints row as a CheckpointInfo."""
    return CheckpointInfo(
        c.id, c.run_id, c.step, c.path, c.bytes, c.sha256, c.metrics or {}, c.state, c.created_at
    )
