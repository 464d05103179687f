"""Read queries of the dashboard that the core Store does not have: run detail with its job,
metric summaries, events and logs after a cursor, jobs with their queue position, workers
and schedules. ORM rows stop here; callers get the frozen dataclasses below.

Jobs, workers and schedules are read with the code the runner shares
(``tracker.store.jobs``, ``.workers``, ``.schedules``); web and runner meet only in rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from tracker.entities import (
    JOB_STATUSES,
    CheckpointInfo,
    JobInfo,
    RunInfo,
    ScheduleInfo,
    WorkerInfo,
)
from tracker.errors import InvalidInput, NotFound
from tracker.store import jobs as store_jobs
from tracker.store import models as m
from tracker.store.jobs import JOB_COLUMNS, check_statuses, job_info, queue_positions
from tracker.store.schedules import get_schedule, list_schedules
from tracker.store.store import checkpoint_info, last_metrics_of, run_info, run_select
from tracker.store.workers import WORKER_TTL_S

__all__ = [
    "JOB_STATUSES",
    "WORKER_TTL_S",
    "AttemptView",
    "EventView",
    "JobView",
    "LogChunkView",
    "MetricSummaryView",
    "ScheduleView",
    "WorkerView",
    "attempts",
    "events_after",
    "get_checkpoint",
    "get_job",
    "get_schedule",
    "job_for_run",
    "list_jobs",
    "list_schedules",
    "logs_after",
    "metric_summaries",
    "run_columns",
    "run_detail",
    "run_logs",
    "runs_by_ids",
]

# Workers and schedules read as the runner reads them (tracker.store.workers / .schedules).
WorkerView = WorkerInfo
ScheduleView = ScheduleInfo


@dataclass(frozen=True)
class MetricSummaryView:
    key: str
    last_step: int
    last_wall_time: float
    last_value: float


@dataclass(frozen=True)
class EventView:
    id: int
    run_id: int
    at: float
    kind: str
    message: str
    data: dict[str, Any] | None


@dataclass(frozen=True)
class JobView:
    """A job row for the API. ``env`` values are not exposed (they may hold secrets): only
    ``env_keys``. ``position`` is the 1-based place in the claim order while queued."""

    id: int
    project: str
    status: str
    priority: int
    argv: list[str]
    cwd: str | None
    config: dict[str, Any]
    resources: dict[str, Any]
    env_keys: list[str]
    timeout_s: float | None
    max_retries: int
    attempt: int
    nproc_per_node: int | None
    not_before: float | None
    cancel_requested: bool
    worker: str | None
    lease_expires_at: float | None
    run_id: int | None
    schedule_id: int | None
    parent_job_id: int | None
    exit_code: int | None
    failure_class: str | None
    failure_hint: str | None
    pending_reason: str | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    position: int | None = None


@dataclass(frozen=True)
class AttemptView:
    attempt: int
    worker: str | None
    status: str
    started_at: float
    ended_at: float | None
    exit_code: int | None
    failure_class: str | None
    failure_hint: str | None
    resume_checkpoint: str | None


@dataclass(frozen=True)
class LogChunkView:
    id: int
    attempt: int
    stream: str
    at: float
    text: str


# ------------------------------------------------------------------------ runs


def metric_summaries(engine: sa.Engine, run_id: int) -> list[MetricSummaryView]:
    """Every metric of a run with its last step and value (to poll for new points)."""
    query = (
        sa.select(
            m.MetricKey.name,
            m.MetricSummary.last_step,
            m.MetricSummary.last_wall_ms,
            m.MetricSummary.last_value,
        )
        .join(m.MetricKey, m.MetricKey.id == m.MetricSummary.key_id)
        .where(m.MetricSummary.run_id == run_id)
        .order_by(m.MetricKey.name)
    )
    with engine.connect() as conn:
        return [MetricSummaryView(n, s, w / 1000.0, v) for n, s, w, v in conn.execute(query)]


def events_after(
    engine: sa.Engine, run_id: int, after: int = 0, limit: int = 500
) -> list[EventView]:
    query = (
        sa.select(*m.RunEvent.__table__.columns)
        .where(m.RunEvent.run_id == run_id, m.RunEvent.id > after)
        .order_by(m.RunEvent.id)
        .limit(limit)
    )
    with engine.connect() as conn:
        return [
            EventView(e.id, e.run_id, e.at, e.kind, e.message, e.data) for e in conn.execute(query)
        ]


# ------------------------------------------------------------------------ jobs


_COMPUTED = ("env_keys", "worker", "position")  # the JobView fields JobInfo does not have


def _job_view(job: JobInfo, position: int | None = None) -> JobView:
    names = [f.name for f in dataclasses.fields(JobView) if f.name not in _COMPUTED]
    same = {name: getattr(job, name) for name in names}
    return JobView(**same, env_keys=sorted(job.env), worker=job.lease_owner, position=position)


def list_jobs(
    engine: sa.Engine,
    *,
    statuses: Sequence[str] = (),
    project: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[JobView], int, dict[str, int]]:
    """(jobs newest first, total matching, count per status over all jobs).

    Raises InvalidInput for an unknown status.
    """
    check_statuses(statuses)
    where: list[Any] = []
    if statuses:
        where.append(m.Job.status.in_(list(statuses)))
    if project:
        where.append(m.Job.project == project)
    query = (
        sa.select(*JOB_COLUMNS).where(*where).order_by(m.Job.id.desc()).limit(limit).offset(offset)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
        total = conn.execute(
            sa.select(sa.func.count()).select_from(m.Job).where(*where)
        ).scalar_one()
        counts = dict(
            conn.execute(sa.select(m.Job.status, sa.func.count()).group_by(m.Job.status)).all()
        )
        positions = queue_positions(conn) if any(r.status == "queued" for r in rows) else {}
    return [_job_view(job_info(r), positions.get(r.id)) for r in rows], total, counts


def get_job(engine: sa.Engine, job_id: int) -> JobView:
    """Raises NotFound for an unknown id."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(*JOB_COLUMNS).where(m.Job.id == job_id)).first()
        if row is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        positions = queue_positions(conn) if row.status == "queued" else {}
    return _job_view(job_info(row), positions.get(job_id))


def job_for_run(engine: sa.Engine, run_id: int) -> JobView | None:
    """The (newest) job that logs into this run, if the run was started by a job."""
    query = sa.select(*JOB_COLUMNS).where(m.Job.run_id == run_id).order_by(m.Job.id.desc())
    with engine.connect() as conn:
        row = conn.execute(query.limit(1)).first()
    return None if row is None else _job_view(job_info(row))


def attempts(engine: sa.Engine, job_id: int) -> list[AttemptView]:
    """Every attempt of a job, oldest first (without the job id the caller knows)."""
    out = []
    for a in store_jobs.attempts(engine, job_id):
        values = dataclasses.asdict(a)
        del values["job_id"]
        values["worker"] = values.pop("worker_id")
        out.append(AttemptView(**values))
    return out


def logs_after(
    engine: sa.Engine,
    job_id: int,
    *,
    after: int = 0,
    limit: int = 500,
    stream: str | None = None,
    tail: bool = False,
) -> list[LogChunkView]:
    """Log chunks with id > ``after``, oldest first; ``tail`` gives the newest ``limit``
    instead of the oldest (the first read of a live view)."""
    c = m.JobLogChunk
    query = sa.select(c.id, c.attempt, c.stream, c.at, c.text).where(
        c.job_id == job_id, c.id > after
    )
    if stream is not None:
        if stream not in ("stdout", "stderr"):
            raise InvalidInput(f"stream={stream!r}: use stdout or stderr", field="stream")
        query = query.where(c.stream.in_([stream, "meta"]))
    query = query.order_by(c.id.desc() if tail else c.id).limit(limit)
    with engine.connect() as conn:
        rows = [LogChunkView(*r) for r in conn.execute(query)]
    return rows[::-1] if tail else rows


# ------------------------------------------------------------- runs, checkpoints


def runs_by_ids(engine: sa.Engine, run_ids: Sequence[int]) -> list[RunInfo]:
    """Runs in the order asked, with their last metric values. Raises NotFound for a
    missing id (naming it)."""
    query = run_select().where(m.Run.id.in_(list(run_ids)))
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(query)}
        last = last_metrics_of(conn, run_ids)
    missing = [i for i in run_ids if i not in rows]
    if missing:
        raise NotFound(f"run {missing[0]} does not exist", field="runs")
    return [run_info(rows[i], last.get(i, {})) for i in run_ids]


def run_detail(engine: sa.Engine, run_id: int) -> tuple[RunInfo, JobView | None]:
    """The run and the job that runs it (if any). Raises NotFound for an unknown run."""
    (run,) = runs_by_ids(engine, [run_id])
    return run, job_for_run(engine, run_id)


def run_columns(
    engine: sa.Engine, project: str | None = None, sample: int = 500
) -> tuple[list[str], list[str]]:
    """(config keys, metric names) seen in runs, for the column chooser.

    Config keys are the flattened keys of the newest ``sample`` runs; metric names come
    from every run (of the project).
    """
    from tracker.rules.config import flatten

    runs = sa.select(m.Run.config).order_by(m.Run.id.desc()).limit(sample)
    names = (
        sa.select(m.MetricKey.name)
        .where(
            sa.exists(
                sa.select(1)
                .select_from(m.MetricSummary)
                .join(m.Run, m.Run.id == m.MetricSummary.run_id)
                .where(m.MetricSummary.key_id == m.MetricKey.id, *_project_filter(project))
            )
        )
        .order_by(m.MetricKey.name)
    )
    if project:
        runs = runs.where(*_project_filter(project))
    keys: set[str] = set()
    with engine.connect() as conn:
        for (config,) in conn.execute(runs):
            keys.update(flatten(config or {}))
        metrics = list(conn.execute(names).scalars())
    return sorted(keys), metrics


def _project_filter(project: str | None) -> list[Any]:
    if not project:
        return []
    pid = sa.select(m.Project.id).where(m.Project.name == project).scalar_subquery()
    return [m.Run.project_id == pid]


def get_checkpoint(engine: sa.Engine, checkpoint_id: int) -> CheckpointInfo:
    """Raises NotFound for an unknown id."""
    query = sa.select(*m.Checkpoint.__table__.columns).where(m.Checkpoint.id == checkpoint_id)
    with engine.connect() as conn:
        c = conn.execute(query).first()
    if c is None:
        raise NotFound(f"checkpoint {checkpoint_id} does not exist", field="checkpoint")
    return checkpoint_info(c)


def run_logs(
    engine: sa.Engine, run_id: int, **options: Any
) -> tuple[int | None, list[LogChunkView]]:
    """(job id, chunks) of the job that runs this run; (None, []) for a run without a job."""
    job = job_for_run(engine, run_id)
    if job is None:
        return None, []
    return job.id, logs_after(engine, job.id, **options)
