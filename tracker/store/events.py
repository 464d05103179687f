"""Events of runs: what happened to a run besides its metrics (diagnoses, recompiles,
warnings, retries), in the order recorded. Diagnoses have their own reader in
:mod:`tracker.store.diagnoses`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tracker.entities import AttemptFence, RunEventInfo
from tracker.store import fencing
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store


def add_event(
    store: Store,
    run_id: int,
    kind: str,
    message: str,
    data: dict[str, Any] | None = None,
    *,
    now: float | None = None,
    fence: AttemptFence | None = None,
) -> None:
    """Record a run event. Raises AttemptSuperseded when ``fence`` no longer holds."""
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        fencing.check(conn, run_id, fence)
        conn.execute(
            sa.insert(m.RunEventRow).values(
                run_id=run_id, at=now, kind=kind, message=message, data=data
            )
        )


def list_events(store: Store, run_id: int) -> list[RunEventInfo]:
    query = (
        sa.select(*m.RunEventRow.__table__.columns)
        .where(m.RunEventRow.run_id == run_id)
        .order_by(m.RunEventRow.id)
    )
    with read_conn(store.engine) as conn:
        return [
            RunEventInfo(e.id, e.run_id, e.at, e.kind, e.message, e.data)
            for e in conn.execute(query)
        ]
