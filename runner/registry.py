"""Workers in the store: registration, heartbeats, listing, and why queued jobs wait.

A worker is *live* while its status is not ``stopped`` and its heartbeat is recent
(``WORKER_TTL_S``); reading worker rows is shared with the dashboard
(:mod:`tracker.store.workers`). ``explain_pending`` is pure: it says why a job cannot run on
any live worker (too many GPUs asked, GPUs too small, no worker at all), or ``None``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from tracker.runner.entities import GpuDevice, WorkerInfo
from tracker.store import models as m
from tracker.store import workers as store_workers
from tracker.store.engine import write_begin
from tracker.store.jobs import read_conn
from tracker.store.workers import WORKER_TTL_S

__all__ = [
    "WORKER_TTL_S",
    "explain_pending",
    "heartbeat_worker",
    "list_workers",
    "register_worker",
    "update_pending_reasons",
]
_GIB = 1024**3


def register_worker(
    store: Any,
    worker_id: str,
    *,
    host: str,
    pid: int,
    gpus: Sequence[GpuDevice],
    max_jobs: int,
    now: float | None = None,
) -> None:
    """Insert (or replace, for a restarted worker with the same id) the worker's row."""
    now = time.time() if now is None else now
    values = {
        "host": host,
        "pid": pid,
        "gpus": gpu_rows(gpus),
        "max_jobs": max_jobs,
        "status": "running",
        "started_at": now,
        "heartbeat_at": now,
    }
    with write_begin(store.engine) as conn:
        done = conn.execute(sa.update(m.Worker).where(m.Worker.id == worker_id).values(**values))
        if done.rowcount == 0:
            conn.execute(sa.insert(m.Worker).values(id=worker_id, **values))


def gpu_rows(gpus: Sequence[GpuDevice], free: Mapping[int, int | None] | None = None) -> list:
    """The workers.gpus JSON: index, name, total bytes, and free bytes when NVML tells."""
    rows = []
    for g in gpus:
        row: dict[str, Any] = {"index": g.index, "name": g.name, "total_bytes": g.total_bytes}
        if free and free.get(g.index) is not None:
            row["free_bytes"] = free[g.index]
        rows.append(row)
    return rows


def heartbeat_worker(
    store: Any,
    worker_id: str,
    *,
    status: str = "running",
    gpus: list[dict[str, Any]] | None = None,
    now: float | None = None,
) -> None:
    """Renew the worker's heartbeat; ``gpus`` (from :func:`gpu_rows`) refreshes free memory."""
    now = time.time() if now is None else now
    values: dict[str, Any] = {"heartbeat_at": now, "status": status}
    if gpus:
        values["gpus"] = gpus
    with write_begin(store.engine) as conn:
        conn.execute(sa.update(m.Worker).where(m.Worker.id == worker_id).values(**values))


def list_workers(
    store: Any, *, include_stopped: bool = False, now: float | None = None
) -> list[WorkerInfo]:
    """Live workers (or all, with ``include_stopped``), newest first, with their running jobs."""
    return store_workers.list_workers(
        store, include_stopped=include_stopped, include_lost=include_stopped, now=now
    )


def explain_pending(
    gpus: int, gpu_memory_bytes: int | None, workers: Sequence[WorkerInfo]
) -> str | None:
    """Why no live worker can ever run a job asking for this, or ``None`` if one could."""
    able = [w for w in workers if w.status == "running"]
    if not able:
        return "no live worker: start one with `tracker worker`"
    most = max(able, key=lambda w: len(w.gpus))
    if gpus > len(most.gpus):
        if not most.gpus:
            return (
                f"needs {gpus} GPU(s), but every live worker is CPU-only; "
                "start `tracker worker --gpus ...` on a GPU host"
            )
        return f"needs {gpus} GPU(s); the largest live worker ({most.id}) has {len(most.gpus)}"
    big = gpu_memory_bytes or 0
    if big and gpus > 0 and not any(_big_enough(w.gpus, big) >= gpus for w in able):
        return (
            f"needs {gpus} GPU(s) with {big / _GIB:.1f} GiB each; "
            "no live worker has that many GPUs that large"
        )
    return None


def _big_enough(devices: Sequence[Mapping[str, Any]], need: int) -> int:
    return sum(1 for d in devices if d.get("total_bytes") is None or d["total_bytes"] >= need)


def update_pending_reasons(store: Any, *, now: float | None = None) -> int:
    """Refresh ``pending_reason`` of queued jobs from the live workers; returns rows changed.

    Jobs waiting out a retry backoff keep the reason their retry wrote.
    """
    now = time.time() if now is None else now
    workers = list_workers(store, now=now)
    query = sa.select(m.Job.id, m.Job.resources, m.Job.not_before, m.Job.pending_reason).where(
        m.Job.status == "queued"
    )
    with read_conn(store) as conn:
        rows = conn.execute(query).all()
    changes = []
    for row in rows:
        if row.not_before is not None and row.not_before > now:
            continue
        res = row.resources or {}
        reason = explain_pending(int(res.get("gpus") or 0), res.get("gpu_memory_bytes"), workers)
        if reason != row.pending_reason:
            changes.append((row.id, reason))
    if changes:
        with write_begin(store.engine) as conn:
            for job_id, reason in changes:
                conn.execute(
                    sa.update(m.Job)
                    .where(m.Job.id == job_id, m.Job.status == "queued")
                    .values(pending_reason=reason)
                )
    return len(changes)
