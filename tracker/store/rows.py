"""Small SQL helpers every store module shares (one place for each)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tracker.store import models as m


def dialect_insert(conn: sa.Connection | sa.Engine) -> Any:
    """The dialect's ``insert`` (both have ``on_conflict_do_nothing``)."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def project_id(conn: sa.Connection, name: str, now: float) -> int:
    """The id of the project called ``name``, created if missing (safe under concurrency).

    Called when a run or job is created in it: a soft-deleted project becomes active again
    (a new run shows it; its deleted runs stay deleted). The MLflow API refuses runs in a
    deleted experiment before it gets here, as MLflow does.
    """
    found = conn.execute(
        sa.select(m.ProjectRow.id, m.ProjectRow.deleted_at).where(m.ProjectRow.name == name)
    ).first()
    if found is not None:
        if found.deleted_at is not None:
            conn.execute(
                sa.update(m.ProjectRow).where(m.ProjectRow.id == found.id).values(deleted_at=None)
            )
        return int(found.id)
    insert = dialect_insert(conn)(m.ProjectRow).values(name=name, created_at=now)
    conn.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
    return int(
        conn.execute(sa.select(m.ProjectRow.id).where(m.ProjectRow.name == name)).scalar_one()
    )
