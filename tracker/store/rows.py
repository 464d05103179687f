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
    """The id of the project called ``name``, created if missing (safe under concurrency)."""
    found = conn.execute(sa.select(m.ProjectRow.id).where(m.ProjectRow.name == name)).scalar()
    if found is not None:
        return int(found)
    insert = dialect_insert(conn)(m.ProjectRow).values(name=name, created_at=now)
    conn.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
    return int(
        conn.execute(sa.select(m.ProjectRow.id).where(m.ProjectRow.name == name)).scalar_one()
    )
