"""Run reads the dashboard, the MLflow API and the CLI share beyond the core ``Store``
methods: several runs by id (in the order asked), a run with the job that runs it, the last
point of every metric of runs, events after a cursor, one checkpoint by id.

ORM rows stop here; callers get the frozen dataclasses of :mod:`tracker.entities` (and
:class:`tracker.store.jobs.JobInfo`). Every read raises StoreUnavailable (503) when the
database cannot be reached (``tracker.store.engine.read_conn``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from tracker.entities import CheckpointInfo, MetricSummary, RunEventInfo, RunInfo
from tracker.errors import NotFound
from tracker.store import models as m
from tracker.store.checkpoints import checkpoint_info
from tracker.store.engine import read_conn
from tracker.store.jobs import JobInfo, job_for_run
from tracker.store.metrics import last_metrics_of
from tracker.store.runs import run_info, run_select
from tracker.store.store import Store

__all__ = [
    "events_after",
    "get_checkpoint",
    "metric_summaries",
    "run_detail",
    "runs_by_ids",
]


def runs_by_ids(store: Store, run_ids: Sequence[int]) -> list[RunInfo]:
    """Runs in the order asked, with their last metric values.

    Raises:
        NotFound (404): an id does not exist (the message names the first missing one).
    """
    query = run_select().where(m.RunRow.id.in_(list(run_ids)))
    with read_conn(store.engine) as conn:
        rows = {r.id: r for r in conn.execute(query)}
        last = last_metrics_of(conn, run_ids)
    missing = [i for i in run_ids if i not in rows]
    if missing:
        raise NotFound(f"run {missing[0]} does not exist", field="runs")
    return [run_info(rows[i], last.get(i, {})) for i in run_ids]


def run_detail(store: Store, run_id: int) -> tuple[RunInfo, JobInfo | None]:
    """The run and the (newest) job that runs it, if any. Raises NotFound for an unknown run."""
    (run,) = runs_by_ids(store, [run_id])
    return run, job_for_run(store, run_id)


def metric_summaries(store: Store, run_ids: Sequence[int]) -> dict[int, list[MetricSummary]]:
    """The last point of every metric of each run, by key name (to poll for new points, and
    MLflow's ``run.data.metrics``). Every id asked is a key; unknown runs have no metrics."""
    if not run_ids:
        return {}
    query = (
        sa.select(
            m.MetricSummaryRow.run_id,
            m.MetricKeyRow.name,
            m.MetricSummaryRow.last_step,
            m.MetricSummaryRow.last_wall_ms,
            m.MetricSummaryRow.last_value,
        )
        .join(m.MetricKeyRow, m.MetricKeyRow.id == m.MetricSummaryRow.key_id)
        .where(m.MetricSummaryRow.run_id.in_(list(run_ids)))
        .order_by(m.MetricSummaryRow.run_id, m.MetricKeyRow.name)
    )
    out: dict[int, list[MetricSummary]] = {run_id: [] for run_id in run_ids}
    with read_conn(store.engine) as conn:
        for run_id, key, step, wall_ms, value in conn.execute(query):
            out[run_id].append(MetricSummary(key, step, wall_ms / 1000.0, value))
    return out


def events_after(store: Store, run_id: int, after: int = 0, limit: int = 500) -> list[RunEventInfo]:
    """A run's events with id > ``after``, oldest first, at most ``limit``."""
    query = (
        sa.select(*m.RunEventRow.__table__.columns)
        .where(m.RunEventRow.run_id == run_id, m.RunEventRow.id > after)
        .order_by(m.RunEventRow.id)
        .limit(limit)
    )
    with read_conn(store.engine) as conn:
        return [
            RunEventInfo(e.id, e.run_id, e.at, e.kind, e.message, e.data)
            for e in conn.execute(query)
        ]


def get_checkpoint(store: Store, checkpoint_id: int) -> CheckpointInfo:
    """Raises NotFound (404) for an unknown id."""
    query = sa.select(*m.CheckpointRow.__table__.columns).where(m.CheckpointRow.id == checkpoint_id)
    with read_conn(store.engine) as conn:
        c = conn.execute(query).first()
    if c is None:
        raise NotFound(f"checkpoint {checkpoint_id} does not exist", field="checkpoint")
    return checkpoint_info(c)
