"""A sweep's pruned trial: its job's attempt ends ``pruned``, not ``cancelled``.

The sweep controller (``tracker.store.sweeps``) marks a trial ``pruned`` and then cancels its
job through the queue; the executor (local worker or Slurm dispatcher) stops it as for any
cancel and reports ``cancelled``. The queue's end of an attempt asks here first, so the job
ends with status and failure class ``pruned`` on every executor, and is never retried.
"""

from __future__ import annotations

import sqlalchemy as sa

from tracker.entities import Failure
from tracker.store import models as m

__all__ = ["mark_pruned_failure"]


def mark_pruned_failure(
    conn: sa.Connection, job_id: int, failure: Failure | None
) -> Failure | None:
    """``failure``, or ``pruned`` (with the pruner's note) when it is a cancel that came
    from the job's sweep."""
    if failure is None or failure.cls != "cancelled":
        return failure
    row = conn.execute(
        sa.select(m.SweepTrialRow.sweep_id, m.SweepTrialRow.note).where(
            m.SweepTrialRow.job_id == job_id, m.SweepTrialRow.state == "pruned"
        )
    ).first()
    if row is None:
        return failure
    return Failure("pruned", row.note or f"Pruned by sweep {row.sweep_id}.")
