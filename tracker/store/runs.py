"""Runs: the one place a run row is created (``insert_run``).

Callers: ``Store.create_run`` (the client, the ingest API, a replayed offline run), a job's
queued run (:mod:`tracker.store.jobs`) and an MLflow run, which sends no heartbeats
(:mod:`tracker.store.mlflow`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tracker.store import models as m
from tracker.store.projects import project_id

__all__ = ["insert_run"]


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
