"""Worker rows read back, shared by the runner and the dashboard.

A worker is *live* while its status is not ``stopped`` and its heartbeat is recent
(``WORKER_TTL_S``); one whose heartbeat stopped without a word reads as ``lost``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.store import models as m
from tracker.store.jobs import read_conn

if TYPE_CHECKING:
    from tracker.store.store import Store

WORKER_TTL_S = 60.0


@dataclass(frozen=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    gpus: list[dict[str, Any]]
    max_jobs: int
    status: str
    started_at: float
    heartbeat_at: float
    running_jobs: list[int] = field(default_factory=list)


def worker_status(row: Any, now: float) -> str:
    """The row's status, or ``lost`` when a worker not ``stopped`` missed its heartbeats."""
    if row.status != "stopped" and row.heartbeat_at < now - WORKER_TTL_S:
        return "lost"  # no heartbeat for a minute: killed without a chance to say so
    return str(row.status)


def list_workers(
    source: Store | sa.Engine,
    *,
    include_stopped: bool = False,
    include_lost: bool = True,
    now: float | None = None,
) -> list[WorkerInfo]:
    """Workers newest first, with the ids of the jobs they run.

    ``include_stopped`` adds stopped ones; ``include_lost=False`` leaves out those without
    a recent heartbeat (unless ``include_stopped``). Raises StoreUnavailable.
    """
    now = time.time() if now is None else now
    query = sa.select(*m.Worker.__table__.columns).order_by(m.Worker.started_at.desc())
    if not include_stopped:
        query = query.where(m.Worker.status != "stopped")
        if not include_lost:
            query = query.where(m.Worker.heartbeat_at >= now - WORKER_TTL_S)
    running = sa.select(m.Job.lease_owner, m.Job.id).where(m.Job.status == "running")
    with read_conn(source) as conn:
        rows = conn.execute(query).all()
        jobs: dict[str, list[int]] = {}
        for owner, job_id in conn.execute(running):
            if owner is not None:
                jobs.setdefault(owner, []).append(job_id)
    return [
        WorkerInfo(
            r.id,
            r.host,
            r.pid,
            list(r.gpus or []),
            r.max_jobs,
            worker_status(r, now),
            r.started_at,
            r.heartbeat_at,
            sorted(jobs.get(r.id, [])),
        )
        for r in rows
    ]
