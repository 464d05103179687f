"""Job output read back after a cursor, for live log views: a job's chunks, or those of the
job that runs a run. Chunks are written (and trimmed) by the runner; see ``LogChunk`` in
:mod:`tracker.entities` for what a chunk is.

Reads raise StoreUnavailable (503) when the database cannot be reached
(``tracker.store.engine.read_conn``).
"""

from __future__ import annotations

import sqlalchemy as sa

from tracker.entities import LogChunk
from tracker.errors import InvalidInput
from tracker.store import models as m
from tracker.store.engine import read_conn
from tracker.store.jobs import job_for_run
from tracker.store.store import Store

__all__ = ["logs_after", "run_logs"]


def logs_after(
    store: Store,
    job_id: int,
    *,
    after: int = 0,
    limit: int = 500,
    stream: str | None = None,
    tail: bool = False,
) -> list[LogChunk]:
    """Log chunks with id > ``after``, oldest first; ``tail`` gives the newest ``limit``
    instead of the oldest (the first read of a live view). ``stream`` keeps one stream (and
    the runner's ``meta`` notes).

    Raises:
        InvalidInput (400): ``stream`` is neither stdout nor stderr.
    """
    c = m.JobLogChunk
    query = sa.select(c.id, c.job_id, c.attempt, c.stream, c.at, c.text).where(
        c.job_id == job_id, c.id > after
    )
    if stream is not None:
        if stream not in ("stdout", "stderr"):
            raise InvalidInput(f"stream={stream!r}: use stdout or stderr", field="stream")
        query = query.where(c.stream.in_([stream, "meta"]))
    query = query.order_by(c.id.desc() if tail else c.id).limit(limit)
    with read_conn(store.engine) as conn:
        rows = [LogChunk(*r) for r in conn.execute(query)]
    return rows[::-1] if tail else rows


def run_logs(
    store: Store,
    run_id: int,
    *,
    after: int = 0,
    limit: int = 500,
    stream: str | None = None,
    tail: bool = False,
) -> tuple[int | None, list[LogChunk]]:
    """(job id, chunks) of the job that runs this run (as ``logs_after``); (None, []) for a
    run without a job."""
    job = job_for_run(store, run_id)
    if job is None:
        return None, []
    return job.id, logs_after(store, job.id, after=after, limit=limit, stream=stream, tail=tail)
