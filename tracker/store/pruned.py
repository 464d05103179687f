"""A sweep's pruned trial: its job's attempt ends ``pruned``, not ``cancelled``.

The sweep controller (``tracker.store.sweeps``) marks a trial ``pruned`` (only while its job
has not ended, with the job's row locked) and then cancels its job through the queue; the
executor (local worker or Slurm dispatcher) stops it as for any cancel and reports
``cancelled``. The queue's end of an attempt asks here first, so the job ends with status and
failure class ``pruned`` on every executor, and is never retried. A process that exits 0
after its trial was pruned (its last step came before the kill) ends ``pruned`` too: the
trial and its job never disagree.
"""

from __future__ import annotations

import sqlalchemy as sa

from tracker.entities import Failure
from tracker.store import models as m

__all__ = ["mark_pruned_failure"]


def mark_pruned_failure(
    conn: sa.Connection, job_id: int, failure: Failure | None
) -> Failure | None:
    """``failure``, or ``pruned`` (with the pruner's note) when it is a cancel, or a
    success, of a job whose sweep pruned its trial."""
    if failure is not None and failure.cls != "cancelled":
        return failure
    row = conn.execute(
        sa.select(m.SweepTrialRow.sweep_id, m.SweepTrialRow.note).where(
            m.SweepTrialRow.job_id == job_id, m.SweepTrialRow.state == "pruned"
        )
    ).first()
    if row is None:
        return failure
    return Failure("pruned", row.note or f"Pruned by sweep {row.sweep_id}.")
