"""Small SQL helpers every store module shares (one place for each)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def dialect_insert(conn: sa.Connection | sa.Engine) -> Any:
    """The dialect's ``insert`` (both have ``on_conflict_do_nothing``)."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
