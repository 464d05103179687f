"""Checkpoints of runs: recorded after the file is written atomically and hashed
(:mod:`tracker.client.checkpoint`), listed newest first, marked ``ok`` / ``corrupt`` /
``missing`` when verified.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tracker.entities import CheckpointInfo
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store


def add_checkpoint(
    store: Store,
    run_id: int,
    step: int,
    path: str,
    size: int,
    sha256: str,
    metrics: dict[str, Any] | None = None,
    *,
    now: float | None = None,
) -> CheckpointInfo:
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        new_id = conn.execute(
            sa.insert(m.CheckpointRow)
            .values(
                run_id=run_id,
                step=step,
                path=path,
                bytes=size,
                sha256=sha256,
                metrics=metrics or {},
                state="ok",
                created_at=now,
            )
            .returning(m.CheckpointRow.id)
        ).scalar_one()
    return CheckpointInfo(new_id, run_id, step, path, size, sha256, metrics or {}, "ok", now)


def list_checkpoints(store: Store, run_id: int) -> list[CheckpointInfo]:
    """Newest (highest step, then latest written) first."""
    query = (
        sa.select(*m.CheckpointRow.__table__.columns)
        .where(m.CheckpointRow.run_id == run_id)
        .order_by(m.CheckpointRow.step.desc(), m.CheckpointRow.id.desc())
    )
    with read_conn(store.engine) as conn:
        return [checkpoint_info(c) for c in conn.execute(query)]


def set_checkpoint_state(store: Store, checkpoint_id: int, state: str) -> None:
    with write_begin(store.engine) as conn:
        conn.execute(
            sa.update(m.CheckpointRow)
            .where(m.CheckpointRow.id == checkpoint_id)
            .values(state=state)
        )


def checkpoint_info(c: Any) -> CheckpointInfo:
    """A checkpoints row as a CheckpointInfo."""
    return CheckpointInfo(
        c.id, c.run_id, c.step, c.path, c.bytes, c.sha256, c.metrics or {}, c.state, c.created_at
    )
