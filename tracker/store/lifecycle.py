"""Soft delete and restore of runs.

A deleted run keeps every row; ``deleted_at`` hides it from listings (the runs table,
``tracker runs ls``, the MLflow searches) until it is restored, or until ``tracker gc``
purges it after a grace period (:mod:`tracker.store.purge`). Projects are deleted and
restored with their runs by :mod:`tracker.store.projects`.

Writes raise StoreUnavailable (503) when the database cannot be reached.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa

from tracker.errors import NotFound
from tracker.store import models as m
from tracker.store.engine import write_begin
from tracker.store.store import Store

__all__ = ["delete_runs", "restore_runs"]


def _missing_runs(conn: sa.Connection, run_ids: Sequence[int]) -> list[int]:
    found = set(conn.execute(sa.select(m.RunRow.id).where(m.RunRow.id.in_(run_ids))).scalars())
    return sorted(set(run_ids) - found)


def _set_runs_deleted(store: Store, run_ids: Sequence[int], deleted_at: float | None) -> list[int]:
    ids = sorted(set(run_ids))
    if not ids:
        return []
    before = (
        m.RunRow.deleted_at.is_(None)
        if deleted_at is not None
        else m.RunRow.deleted_at.is_not(None)
    )
    with write_begin(store.engine) as conn:
        missing = _missing_runs(conn, ids)
        if missing:  # nothing changes when one id is wrong
            names = ", ".join(str(i) for i in missing[:10])
            raise NotFound(f"run(s) {names} do not exist", field="run")
        changed = conn.execute(
            sa.update(m.RunRow)
            .where(m.RunRow.id.in_(ids), before)
            .values(deleted_at=deleted_at)
            .returning(m.RunRow.id)
        ).scalars()
        return sorted(changed)


def delete_runs(store: Store, run_ids: Sequence[int], *, now: float | None = None) -> list[int]:
    """Soft-delete runs; returns the ids that were active (deleting a deleted run is a no-op).

    Raises:
        NotFound: one of the ids is no run (then nothing is deleted).
    """
    return _set_runs_deleted(store, run_ids, time.time() if now is None else now)


def restore_runs(store: Store, run_ids: Sequence[int]) -> list[int]:
    """Restore soft-deleted runs; returns the ids that were deleted.

    Raises:
        NotFound: one of the ids is no run (then nothing is restored).
    """
    return _set_runs_deleted(store, run_ids, None)
