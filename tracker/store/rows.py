"""Small SQL helpers every store module shares (one place for each)."""

from __future__ import annotations

from collections.abc import Sequence
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


def insert_run(
    conn: sa.Connection,
    project: str,
    now: float,
    *,
    name: str | None = None,
    status: str = "running",
    config: dict[str, Any] | None = None,
    tags: Sequence[str] = (),
    heartbeat: bool = True,
    written_at: float | None = None,
    host: str | None = None,
    pid: int | None = None,
    git_commit: str | None = None,
    command: list[str] | None = None,
) -> int:
    """The one place a run row is created (``Store.create_run``, a job's run, an MLflow
    run): its project made if missing, ``started_at`` (and, with ``heartbeat``, the first
    heartbeat) at ``now`` when it starts ``running``, and ``run-<id>`` for a run without a
    name. Returns its id."""
    started = now if status == "running" else None
    run_id = int(
        conn.execute(
            sa.insert(m.RunRow)
            .values(
                project_id=project_id(conn, project, now),
                name=name or "",
                status=status,
                config=config or {},
                tags=list(tags),
                created_at=now,
                started_at=started,
                heartbeat_at=started if heartbeat else None,
                written_at=written_at,
                host=host,
                pid=pid,
                git_commit=git_commit,
                command=command,
            )
            .returning(m.RunRow.id)
        ).scalar_one()
    )
    if not name:
        conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(name=f"run-{run_id}"))
    return run_id
