"""Workers in the store: registration, heartbeats, the one worker listing the CLI and the
dashboard share, and the ``pending_reason`` of queued jobs.

A worker is *live* while its status is not ``stopped`` and its heartbeat is recent
(``WORKER_TTL_S``); one whose heartbeat stopped without a word reads as ``lost``, and is
listed as such (``tracker workers ls`` and ``GET /api/v1/workers`` show the same workers).
Why a queued job waits is decided by a rule the caller passes in (the runner's pure
``explain_pending``); the store only reads the rows it needs and writes what changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import GpuDevice, JobStatus, WorkerInfo
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin

if TYPE_CHECKING:
    from tracker.store.store import Store

WORKER_TTL_S = 60.0

# Why a job asking for (gpus, gpu_memory_bytes) cannot run on these workers, or None.
ExplainPending = Callable[[int, int | None, Sequence[WorkerInfo]], str | None]


def worker_status(row: Any, now: float) -> str:
    """The row's status, or ``lost`` when a worker not ``stopped`` missed its heartbeats."""
    if row.status != "stopped" and row.heartbeat_at < now - WORKER_TTL_S:
        return "lost"  # no heartbeat for a minute: killed without a chance to say so
    return str(row.status)


def list_workers(
    store: Store,
    *,
    include_stopped: bool = False,
    include_lost: bool = True,
    now: float | None = None,
) -> list[WorkerInfo]:
    """Workers newest first, with the ids of the jobs they run; lost ones have status
    ``lost``. ``include_stopped`` adds stopped ones; ``include_lost=False`` leaves out those
    without a recent heartbeat. Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    query = sa.select(*m.WorkerRow.__table__.columns).order_by(m.WorkerRow.started_at.desc())
    if not include_stopped:
        query = query.where(m.WorkerRow.status != "stopped")
    if not include_lost:
        query = query.where(
            sa.or_(m.WorkerRow.status == "stopped", m.WorkerRow.heartbeat_at >= now - WORKER_TTL_S)
        )
    running = sa.select(m.JobRow.lease_owner, m.JobRow.id).where(
        m.JobRow.status == JobStatus.RUNNING
    )
    with read_conn(store.engine) as conn:
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
            r.executor,
        )
        for r in rows
    ]


# ------------------------------------------------------------ registration, heartbeat


def gpu_rows(
    gpus: Sequence[GpuDevice], free: Mapping[int, int | None] | None = None
) -> list[dict[str, Any]]:
    """The workers.gpus JSON: index, name, total bytes, and free bytes when NVML tells."""
    rows = []
    for g in gpus:
        row: dict[str, Any] = {"index": g.index, "name": g.name, "total_bytes": g.total_bytes}
        if free and free.get(g.index) is not None:
            row["free_bytes"] = free[g.index]
        rows.append(row)
    return rows


def register_worker(
    store: Store,
    worker_id: str,
    *,
    host: str,
    pid: int,
    gpus: Sequence[GpuDevice],
    max_jobs: int,
    executor: str = "local",
    now: float | None = None,
) -> None:
    """Insert (or replace, for a restarted worker with the same id) the worker's row;
    ``executor`` is ``local`` for ``tracker worker``, the scheduler's name for a dispatcher.

    Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    values = {
        "host": host,
        "pid": pid,
        "gpus": gpu_rows(gpus),
        "max_jobs": max_jobs,
        "executor": executor,
        "status": "running",
        "started_at": now,
        "heartbeat_at": now,
    }
    with write_begin(store.engine) as conn:
        done = conn.execute(
            sa.update(m.WorkerRow).where(m.WorkerRow.id == worker_id).values(**values)
        )
        if done.rowcount == 0:
            conn.execute(sa.insert(m.WorkerRow).values(id=worker_id, **values))


def heartbeat_worker(
    store: Store,
    worker_id: str,
    *,
    status: str = "running",
    gpus: list[dict[str, Any]] | None = None,
    now: float | None = None,
) -> None:
    """Renew the worker's heartbeat; ``gpus`` (from :func:`gpu_rows`) refreshes free memory.

    Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    values: dict[str, Any] = {"heartbeat_at": now, "status": status}
    if gpus:
        values["gpus"] = gpus
    with write_begin(store.engine) as conn:
        conn.execute(sa.update(m.WorkerRow).where(m.WorkerRow.id == worker_id).values(**values))


# -------------------------------------------------------------------- pending reasons


def update_pending_reasons(
    store: Store, explain: ExplainPending, *, now: float | None = None
) -> int:
    """Refresh ``pending_reason`` of queued jobs with ``explain(gpus, gpu_memory_bytes,
    live workers)``; returns the number of rows changed.

    Jobs waiting out a retry backoff keep the reason their retry wrote. Raises
    StoreUnavailable.
    """
    now = store.now() if now is None else now
    workers = list_workers(store, include_lost=False, now=now)
    query = sa.select(
        m.JobRow.id, m.JobRow.resources, m.JobRow.not_before, m.JobRow.pending_reason
    ).where(m.JobRow.status == JobStatus.QUEUED)
    with read_conn(store.engine) as conn:
        rows = conn.execute(query).all()
    changes = []
    for row in rows:
        if row.not_before is not None and row.not_before > now:
            continue
        res = row.resources or {}
        reason = explain(int(res.get("gpus") or 0), res.get("gpu_memory_bytes"), workers)
        if reason != row.pending_reason:
            changes.append((row.id, reason))
    if changes:
        with write_begin(store.engine) as conn:
            for job_id, reason in changes:
                conn.execute(
                    sa.update(m.JobRow)
                    .where(m.JobRow.id == job_id, m.JobRow.status == JobStatus.QUEUED)
                    .values(pending_reason=reason)
                )
    return len(changes)
