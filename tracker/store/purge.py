"""Permanent removal of soft-deleted runs and projects (``tracker gc``).

Runs deleted (:mod:`tracker.store.lifecycle`) before a cutoff are removed with everything
they own: metric points and rollups (no foreign keys, removed explicitly), and through
``ON DELETE CASCADE`` their summaries, checkpoints rows, events, console output and
artifact rows (the blobs those referenced become unreferenced: the blob half of
``tracker gc`` removes them). Jobs keep their rows, their ``run_id`` set to NULL. A project
deleted before the cutoff is removed once it has no runs left.

``dry_run`` (the default) only reports what would go. Each run is removed in its own short
transaction, so a large purge never holds the write lock for long and an interrupted one
has removed whole runs only. Raises StoreUnavailable.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store

__all__ = ["PurgeReport", "PurgedRun", "purge_deleted"]


@dataclass(frozen=True)
class PurgedRun:
    id: int
    project: str
    name: str
    deleted_at: float
    points: int


@dataclass(frozen=True)
class PurgeReport:
    runs: list[PurgedRun]
    projects: list[str]
    dry_run: bool

    @property
    def points(self) -> int:
        return sum(r.points for r in self.runs)


def _candidates(store: Store, cutoff: float) -> list[PurgedRun]:
    head = (
        sa.select(sa.func.count()).where(m.MetricPointRow.run_id == m.RunRow.id).scalar_subquery()
    )
    sealed = (
        sa.select(sa.cast(sa.func.coalesce(sa.func.sum(m.MetricChunkRow.count), 0), sa.BigInteger))
        .where(m.MetricChunkRow.run_id == m.RunRow.id)
        .scalar_subquery()
    )
    points = head + sealed
    query = (
        sa.select(m.RunRow.id, m.ProjectRow.name, m.RunRow.name, m.RunRow.deleted_at, points)
        .join(m.ProjectRow, m.ProjectRow.id == m.RunRow.project_id)
        .where(m.RunRow.deleted_at.is_not(None), m.RunRow.deleted_at < cutoff)
        .order_by(m.RunRow.id)
    )
    with read_conn(store.engine) as conn:
        return [PurgedRun(*row) for row in conn.execute(query)]


def _empty_deleted_projects(conn: sa.Connection, cutoff: float) -> list[tuple[int, str]]:
    has_runs = sa.select(m.RunRow.id).where(m.RunRow.project_id == m.ProjectRow.id).exists()
    query = (
        sa.select(m.ProjectRow.id, m.ProjectRow.name)
        .where(m.ProjectRow.deleted_at.is_not(None), m.ProjectRow.deleted_at < cutoff, ~has_runs)
        .order_by(m.ProjectRow.id)
    )
    return [(row.id, row.name) for row in conn.execute(query)]


def _purge_run(store: Store, run_id: int, cutoff: float) -> bool:
    with write_begin(store.engine) as conn:
        still = conn.execute(  # restored meanwhile: keep it
            sa.select(m.RunRow.id).where(
                m.RunRow.id == run_id,
                m.RunRow.deleted_at.is_not(None),
                m.RunRow.deleted_at < cutoff,
            )
        ).first()
        if still is None:
            return False
        conn.execute(sa.delete(m.MetricPointRow).where(m.MetricPointRow.run_id == run_id))
        conn.execute(sa.delete(m.MetricRollupRow).where(m.MetricRollupRow.run_id == run_id))
        conn.execute(sa.delete(m.MetricChunkRow).where(m.MetricChunkRow.run_id == run_id))
        conn.execute(sa.delete(m.RunRow).where(m.RunRow.id == run_id))
    return True


def purge_deleted(store: Store, *, older_than: float, dry_run: bool = True) -> PurgeReport:
    """Remove runs (and then empty projects) soft-deleted before ``older_than`` (epoch s).

    Returns what was removed, or with ``dry_run`` what would be.
    """
    runs = _candidates(store, older_than)
    if dry_run:
        with read_conn(store.engine) as conn:
            gone = {r.id for r in runs}
            has_other = (
                sa.select(m.RunRow.id)
                .where(m.RunRow.project_id == m.ProjectRow.id, m.RunRow.id.not_in(gone))
                .exists()
            )
            query = sa.select(m.ProjectRow.name).where(
                m.ProjectRow.deleted_at.is_not(None),
                m.ProjectRow.deleted_at < older_than,
                ~has_other,
            )
            projects = sorted(conn.execute(query).scalars())
        return PurgeReport(runs, projects, dry_run=True)
    purged = [r for r in runs if _purge_run(store, r.id, older_than)]
    with write_begin(store.engine) as conn:
        empty = _empty_deleted_projects(conn, older_than)
        if empty:
            conn.execute(sa.delete(m.ProjectRow).where(m.ProjectRow.id.in_([i for i, _ in empty])))
    return PurgeReport(purged, sorted(name for _, name in empty), dry_run=False)
