"""Attempt fencing: a superseded attempt of a job writes nothing into the job's run.

A worker frozen past its lease (SIGSTOP, a long pause) cannot kill its job's process; once
the reaper crashed the attempt and another worker runs the job again, both processes would
write into the same run. So a job's process writes with an :class:`AttemptFence` (the job
and attempt the worker started it for, from ``TRACKER_JOB_ID``/``TRACKER_ATTEMPT``), and
every fenced write -- metric points, events, heartbeats, start and finish of the run --
first checks, *inside its own transaction*, that the job still runs that attempt for that
run. Otherwise it raises :class:`tracker.errors.AttemptSuperseded` and writes nothing.

The check holds the job row against a concurrent takeover until the write commits:
PostgreSQL takes ``FOR KEY SHARE`` on it (``finish``'s ``FOR UPDATE`` waits for it, the
reaper's ``SKIP LOCKED`` passes it by until the next pass; lease renewals, plain updates of
non-key columns, do not conflict). The metric points' transaction checks last, just before
its commit, so a busy stale writer holds that lock only for the commit and never starves
the reaper; SQLite's write transaction is exclusive already. So a write either commits
before the takeover or is refused after it, never half. The reaper stamps the attempt's end
once it holds the row, so every point an attempt stored was logged before that end. Cost:
one primary-key read per write transaction.

Writes without a fence (a run started by hand, the worker's own lease-fenced writes) are
not checked.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tracker.entities import AttemptFence, JobStatus
from tracker.errors import AttemptSuperseded
from tracker.store import models as m

_RAW = "SELECT attempt, status FROM jobs WHERE id = {p} AND run_id = {p}"


def check(conn: sa.Connection, run_id: int, fence: AttemptFence | None) -> None:
    """Inside a write transaction: raise AttemptSuperseded unless ``fence`` still holds."""
    if fence is None:
        return
    query = sa.select(m.JobRow.attempt, m.JobRow.status).where(
        m.JobRow.id == fence.job_id, m.JobRow.run_id == run_id
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(read=True, key_share=True)
    _judge(conn.execute(query).first(), run_id, fence)


def check_raw(cur: Any, postgres: bool, run_id: int, fence: AttemptFence | None) -> None:
    """``check`` on a DB-API cursor inside an open transaction (the points' fast path)."""
    if fence is None:
        return
    sql = _RAW.format(p="%s" if postgres else "?") + (" FOR KEY SHARE" if postgres else "")
    cur.execute(sql, (fence.job_id, run_id))
    _judge(cur.fetchone(), run_id, fence)


def _judge(row: Any, run_id: int, fence: AttemptFence) -> None:
    if row is not None and row[0] == fence.attempt and row[1] == JobStatus.RUNNING:
        return
    if row is None:
        now = f"job {fence.job_id} does not log into run {run_id}"
    elif row[0] != fence.attempt:
        now = f"the job is at attempt {row[0]} now ({row[1]})"
    else:
        now = f"the job has ended ({row[1]})"
    raise AttemptSuperseded(
        f"run {run_id}: attempt {fence.attempt} of job {fence.job_id} was superseded ({now}): "
        "the store refuses this process's writes; it should stop (its worker lost the job's "
        "lease, and the job was taken over or ended)",
        field="attempt",
    )
