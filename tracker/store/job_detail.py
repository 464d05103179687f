"""One job with everything its page shows, read in one transaction: the job (with its queue
position), every attempt with the executor that ran it (``local`` for ``tracker worker``, the
cluster scheduler's name, ``slurm``, for a dispatcher: from the attempt's worker row), the run
it logs into (its name and status), the schedule that queued it, and the jobs cloned from it.

The job page (``/jobs/<id>``) and ``GET /api/v1/jobs/<id>`` read this; the job's logs come
separately, per attempt, from :func:`tracker.store.logs.logs_after`. A worker row that is gone
(never the case today: workers are only marked stopped) leaves the attempt's ``executor`` None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import JobAttemptInfo, JobInfo, JobStatus
from tracker.errors import NotFound
from tracker.store import models as m
from tracker.store.engine import read_conn
from tracker.store.jobs import JOB_COLUMNS, job_info, queue_positions

if TYPE_CHECKING:
    from tracker.store.store import Store

__all__ = ["AttemptDetail", "JobDetail", "LinkedJob", "LinkedRun", "job_detail"]

MAX_CHILDREN = 100  # jobs cloned from this one, newest first


@dataclass(frozen=True)
class AttemptDetail:
    """An attempt and where it ran: ``executor`` is ``local`` or the cluster scheduler's
    name (``slurm``), ``host`` the worker's host; both None when no worker row is known."""

    attempt: JobAttemptInfo
    executor: str | None
    host: str | None


@dataclass(frozen=True)
class LinkedRun:
    id: int
    name: str
    status: str
    deleted: bool


@dataclass(frozen=True)
class LinkedJob:
    id: int
    status: str
    run_id: int | None
    created_at: float


@dataclass(frozen=True)
class JobDetail:
    job: JobInfo
    attempts: list[AttemptDetail]
    run: LinkedRun | None
    schedule_name: str | None
    children: list[LinkedJob]  # jobs cloned from this one (clone & edit, schedules excluded)


def job_detail(store: Store, job_id: int) -> JobDetail:
    """The job and what its page links to. Raises NotFound (404) for an unknown id,
    StoreUnavailable (503) when the store cannot be read."""
    a, w, j = m.JobAttemptRow, m.WorkerRow, m.JobRow
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(*JOB_COLUMNS).where(j.id == job_id)).first()
        if row is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        positions = queue_positions(conn) if row.status == JobStatus.QUEUED else {}
        job = job_info(row, positions.get(job_id))
        tried = conn.execute(
            sa.select(*a.__table__.columns, w.executor, w.host)
            .select_from(sa.outerjoin(a, w, a.worker_id == w.id))
            .where(a.job_id == job_id)
            .order_by(a.attempt)
        ).all()
        run = None
        if job.run_id is not None:
            r = conn.execute(
                sa.select(m.RunRow.id, m.RunRow.name, m.RunRow.status, m.RunRow.deleted_at).where(
                    m.RunRow.id == job.run_id
                )
            ).first()
            if r is not None:
                run = LinkedRun(r.id, r.name, r.status, r.deleted_at is not None)
        schedule_name = None
        if job.schedule_id is not None:
            schedule_name = conn.execute(
                sa.select(m.ScheduleRow.name).where(m.ScheduleRow.id == job.schedule_id)
            ).scalar()
        children = conn.execute(
            sa.select(j.id, j.status, j.run_id, j.created_at)
            .where(j.parent_job_id == job_id)
            .order_by(j.id.desc())
            .limit(MAX_CHILDREN)
        ).all()
    return JobDetail(
        job=job,
        attempts=[_attempt(t) for t in tried],
        run=run,
        schedule_name=schedule_name,
        children=[LinkedJob(c.id, c.status, c.run_id, c.created_at) for c in children],
    )


def _attempt(t: Any) -> AttemptDetail:
    info = JobAttemptInfo(
        t.job_id,
        t.attempt,
        t.worker_id,
        t.status,
        t.started_at,
        t.ended_at,
        t.exit_code,
        t.failure_class,
        t.failure_hint,
        t.resume_checkpoint,
        t.external_id,
    )
    return AttemptDetail(info, t.executor, t.host)
