"""What the MLflow-compatible API needs beyond the core Store: atomic read-modify-write of a
run's name, params and tags, metric history pages (projects, MLflow's experiments, are
:mod:`tracker.store.projects`). The MLflow mapping itself is pure and lives in the
dashboard (``tracker.web.core.mlflow_compat``); this module sees only plain values.

ORM rows stop here; callers get the frozen dataclasses of :mod:`tracker.entities`. Reads
raise StoreUnavailable (503) when the database cannot be reached
(``tracker.store.engine.read_conn``), writes too (``write_begin``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from tracker.entities import MetricPoint, RunInfo, RunMeta
from tracker.errors import NotFound
from tracker.store import models as m
from tracker.store import runs as store_runs
from tracker.store.engine import read_conn, write_begin
from tracker.store.metrics import metric_history
from tracker.store.store import Store

__all__ = [
    "create_run",
    "mark_idle_runs_stale",
    "metric_page",
    "run_state",
    "touch_run",
    "update_run_meta",
]

IDLE_FAILURE_CLASS = "idle"  # an MLflow run marked stale (see mark_idle_runs_stale)


def create_run(store: Store, project: str, meta: RunMeta, now: float) -> RunInfo:
    """A running run with MLflow's name, params and tags. It has no heartbeat: MLflow clients
    send none, so the housekeeping (stale runs) must not mark a quiet MLflow run crashed;
    its last write (``written_at``) is what :func:`mark_idle_runs_stale` reads instead."""
    return store_runs.create_run(store,
        project, meta.name or None, meta.config, meta.tags, git_commit=meta.git_commit, now=now,
        heartbeat=False, written_at=time.time(), notes=meta.notes,
    )  # fmt: skip


def run_state(store: Store, run_id: int) -> tuple[float | None, float | None]:
    """``(deleted_at, heartbeat_at)`` of a run: one primary-key read, checked before each
    MLflow write. Raises NotFound (-> RESOURCE_DOES_NOT_EXIST) for an unknown id."""
    query = sa.select(m.RunRow.deleted_at, m.RunRow.heartbeat_at).where(m.RunRow.id == run_id)
    with read_conn(store.engine) as conn:
        row = conn.execute(query).first()
    if row is None:
        raise NotFound(f"run {run_id} does not exist", field="run_id")
    return row.deleted_at, row.heartbeat_at


def touch_run(store: Store, run_id: int, now: float) -> None:
    """Record a write to a run without heartbeats (an MLflow run). A run the idle sweep
    marked stale is running again: its client was only quiet, not gone."""
    idle = sa.and_(m.RunRow.status == "crashed", m.RunRow.failure_class == IDLE_FAILURE_CLASS)
    with write_begin(store.engine) as conn:
        conn.execute(
            sa.update(m.RunRow)
            .where(m.RunRow.id == run_id, m.RunRow.heartbeat_at.is_(None))
            .values(
                written_at=now,
                status=sa.case((idle, "running"), else_=m.RunRow.status),
                ended_at=sa.case((idle, None), else_=m.RunRow.ended_at),
                failure_hint=sa.case((idle, None), else_=m.RunRow.failure_hint),
                failure_class=sa.case((idle, None), else_=m.RunRow.failure_class),
            )
        )


def mark_idle_runs_stale(store: Store, *, older_than: float, idle_s: float) -> list[int]:
    """``running`` runs without heartbeats (MLflow's) whose last write is older than
    ``older_than`` become ``crashed`` with failure class ``idle``, ended at that last write.
    A later write (:func:`touch_run`) sets them running again. Returns the ids changed.

    Safe with many sweepers (the update repeats the condition); one indexed read and no
    write lock when nothing is idle. Raises StoreUnavailable.
    """
    last = sa.func.coalesce(m.RunRow.written_at, m.RunRow.started_at, m.RunRow.created_at)
    idle = sa.and_(
        m.RunRow.status == "running",
        m.RunRow.heartbeat_at.is_(None),
        m.RunRow.deleted_at.is_(None),
        last < older_than,
    )
    with read_conn(store.engine) as conn:
        if conn.execute(sa.select(m.RunRow.id).where(idle).limit(1)).first() is None:
            return []
    hint = (
        f"no writes through the MLflow API for {idle_s / 60:.4g} min (MLflow clients send no "
        "heartbeats); it runs again when its client writes"
    )
    with write_begin(store.engine) as conn:
        ids = conn.execute(
            sa.update(m.RunRow)
            .where(idle)
            .values(
                status="crashed",
                ended_at=last,
                failure_class=IDLE_FAILURE_CLASS,
                failure_hint=hint,
            )
            .returning(m.RunRow.id)
        ).scalars()
        return sorted(ids)


def update_run_meta(store: Store, run_id: int, change: Callable[[RunMeta], RunMeta]) -> RunMeta:
    """Apply ``change`` to a run's name, config, tags, git commit and notes in one transaction
    (the row is locked, so concurrent params and tags of one run never overwrite each other).

    Raises:
        NotFound: no such run. Whatever ``change`` raises (nothing is written then).
    """
    columns = (m.RunRow.name, m.RunRow.config, m.RunRow.tags, m.RunRow.git_commit, m.RunRow.notes)
    with write_begin(store.engine) as conn:
        row = conn.execute(
            sa.select(*columns).where(m.RunRow.id == run_id).with_for_update()
        ).first()
        if row is None:
            raise NotFound(f"run {run_id} does not exist", field="run_id")
        before = RunMeta(
            row.name, dict(row.config or {}), list(row.tags or []), row.git_commit, row.notes
        )
        after = change(before)
        if after != before:
            values: dict[str, Any] = {
                "name": after.name,
                "config": after.config,
                "tags": after.tags,
                "git_commit": after.git_commit,
                "notes": after.notes,
            }
            conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**values))
    return after


def metric_page(
    store: Store, run_id: int, key: str, *, after_step: int, limit: int
) -> list[MetricPoint]:
    """At least ``limit`` points (fewer at the end) of one metric with step >= ``after_step``,
    ordered by step and then as logged; a step's values are never split across pages."""
    return metric_history(store, run_id, key, lo=after_step, limit=limit)
