"""Job output in the store: append fenced chunks, trim the oldest past a budget, read them back.

A run started by hand (no job) has its own console output, teed by the client
(``tracker/client/console.py``) through :func:`append_run` into ``run_log_chunks``: same chunk
shape and the same oldest-first trimming past a budget; :func:`run_logs` returns the job's
output for a job's run and the run's own output otherwise (``job_id`` None, ``attempt`` 0).

The worker appends (:func:`append`, fenced by its lease); the CLI (``tracker jobs logs
--follow``) and the dashboard's live log views read after a cursor (:func:`logs_after`,
:func:`run_logs`). Reads raise StoreUnavailable (503) when the database cannot be reached.

A chunk is consecutive output of one stream (``stdout``/``stderr``) with its newlines, so
concatenating a job's chunks in id order gives back its output. When a job's stored output
passes its budget, the oldest chunks are deleted and the newest deleted one becomes a
``meta`` marker that says how much was trimmed: it keeps the smallest remaining id, so
readers see it first.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlalchemy as sa

from tracker.entities import AttemptFence, ClaimedJob, LogChunk
from tracker.errors import InvalidInput
from tracker.store import fencing
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.jobs import job_for_run

if TYPE_CHECKING:
    from tracker.store.store import Store

Line = tuple[str, float, str]  # (stream, time, text with its newline)


CHUNK_CHARS = 8192  # small enough that trimming keeps most of the budget


def group_lines(lines: Sequence[Line]) -> list[tuple[str, float, str]]:
    """Merge consecutive lines of the same stream into chunks (stream, first time, text)."""
    chunks: list[tuple[str, float, str]] = []
    for stream, at, text in lines:
        if chunks and chunks[-1][0] == stream and len(chunks[-1][2]) < CHUNK_CHARS:
            prev = chunks[-1]
            chunks[-1] = (stream, prev[1], prev[2] + text)
        else:
            chunks.append((stream, at, text))
    return chunks


@dataclass
class LogBudget:
    """What this worker stored for one job, so it can trim the oldest output past ``limit``."""

    limit: int
    chunks: deque[tuple[int, int]] = field(default_factory=deque)  # (id, characters), oldest first
    total: int = 0
    marker_id: int | None = None
    trimmed: int = 0

    def add(self, chunk_id: int, size: int) -> None:
        self.chunks.append((chunk_id, size))
        self.total += size

    def over(self) -> bool:
        return self.total > self.limit

    def plan_trim(self) -> list[int]:
        """Ids to drop (oldest first) to get back to 3/4 of the limit; updates the counts."""
        drop = []
        while self.chunks and self.total > self.limit * 3 // 4:
            chunk_id, size = self.chunks.popleft()
            self.total -= size
            self.trimmed += size
            drop.append(chunk_id)
        return drop


def load_budget(store: Store, job_id: int, limit: int) -> LogBudget:
    """The budget state of a job's existing output (earlier attempts count against it)."""
    query = (
        sa.select(
            m.JobLogChunkRow.id, m.JobLogChunkRow.stream, sa.func.length(m.JobLogChunkRow.text)
        )
        .where(m.JobLogChunkRow.job_id == job_id)
        .order_by(m.JobLogChunkRow.id)
    )
    budget = LogBudget(limit)
    with read_conn(store.engine) as conn:
        for chunk_id, stream, size in conn.execute(query):
            if stream == "meta":
                budget.marker_id = chunk_id
            else:
                budget.add(chunk_id, int(size or 0))
    return budget


def append(
    store: Store, claim: ClaimedJob, lines: Sequence[Line], budget: LogBudget | None = None
) -> bool:
    """Store lines of a job's output if this worker still holds its lease; trim past budget.

    Returns False (and writes nothing) when the lease was lost.
    """
    chunks = group_lines(lines)
    if not chunks:
        return True
    job_id = claim.job.id
    with write_begin(store.engine) as conn:
        held = conn.execute(
            sa.select(m.JobRow.id)
            .where(m.JobRow.id == job_id, m.JobRow.lease_token == claim.lease_token)
            .with_for_update()
        ).first()
        if held is None:
            return False
        for stream, at, text in chunks:
            chunk_id = conn.execute(
                sa.insert(m.JobLogChunkRow)
                .values(job_id=job_id, attempt=claim.attempt, stream=stream, at=at, text=text)
                .returning(m.JobLogChunkRow.id)
            ).scalar_one()
            if budget is not None:
                budget.add(chunk_id, len(text))
        if budget is not None and budget.over():
            _trim(conn, job_id, budget)
    return True


def stored_bytes(store: Store, job_id: int, attempt: int) -> dict[str, int]:
    """UTF-8 bytes of each stream stored for one attempt: where a restarted dispatcher resumes
    reading the attempt's output files (output trimmed past the budget is not counted, so
    after a restart some of it may be stored again)."""
    query = sa.select(m.JobLogChunkRow.stream, m.JobLogChunkRow.text).where(
        m.JobLogChunkRow.job_id == job_id, m.JobLogChunkRow.attempt == attempt
    )
    out: dict[str, int] = {}
    with read_conn(store.engine) as conn:
        for stream, text in conn.execute(query):
            out[stream] = out.get(stream, 0) + len((text or "").encode("utf-8"))
    return out


def append_run(
    store: Store,
    run_id: int,
    lines: Sequence[Line],
    budget: LogBudget,
    fence: AttemptFence | None = None,
) -> None:
    """Store console lines of a run started by hand; trim its oldest output past ``budget``.

    Raises:
        AttemptSuperseded: ``fence`` no longer holds (nothing was stored).
        StoreUnavailable: the database cannot be reached (nothing was stored; retry).
    """
    chunks = group_lines(lines)
    if not chunks:
        return
    with write_begin(store.engine) as conn:
        fencing.check(conn, run_id, fence)
        for stream, at, text in chunks:
            chunk_id = conn.execute(
                sa.insert(m.RunLogChunkRow)
                .values(run_id=run_id, stream=stream, at=at, text=text)
                .returning(m.RunLogChunkRow.id)
            ).scalar_one()
            budget.add(chunk_id, len(text))
        if budget.over():
            _trim(conn, run_id, budget, m.RunLogChunkRow, "run")


def load_run_budget(store: Store, run_id: int, limit: int) -> LogBudget:
    """The budget state of a run's stored console output (as :func:`load_budget` for a job):
    what a server appending for many clients starts from. A ``meta`` chunk that comes first
    is the trim marker; later ``meta`` notes count as output."""
    c = m.RunLogChunkRow
    query = (
        sa.select(c.id, c.stream, sa.func.length(c.text)).where(c.run_id == run_id).order_by(c.id)
    )
    budget = LogBudget(limit)
    with read_conn(store.engine) as conn:
        for index, (chunk_id, stream, size) in enumerate(conn.execute(query)):
            if index == 0 and stream == "meta":
                budget.marker_id = chunk_id
            else:
                budget.add(chunk_id, int(size or 0))
    return budget


def _trim(
    conn: sa.Connection,
    job_id: int,
    budget: LogBudget,
    table: type[m.JobLogChunkRow] | type[m.RunLogChunkRow] = m.JobLogChunkRow,
    owner: str = "job",
) -> None:
    drop = budget.plan_trim()
    if not drop:
        return
    keep_as_marker = drop.pop()  # the newest dropped id: still older than everything kept
    if budget.marker_id is not None:
        drop.append(budget.marker_id)
    if drop:
        conn.execute(sa.delete(table).where(table.id.in_(drop)))
    text = (
        f"[tracker: {budget.trimmed} characters of older output were trimmed; "
        f"a {owner} keeps at most {budget.limit} characters]\n"
    )
    conn.execute(
        sa.update(table)
        .where(table.id == keep_as_marker)
        .values(stream="meta", text=text, at=time.time())
    )
    budget.marker_id = keep_as_marker


def logs_after(
    store: Store,
    job_id: int,
    *,
    after: int = 0,
    limit: int = 500,
    stream: str | None = None,
    attempt: int | None = None,
    tail: bool = False,
) -> list[LogChunk]:
    """Log chunks with id > ``after``, oldest first; ``tail`` gives the newest ``limit``
    instead of the oldest (the first read of a live view). ``stream`` keeps one stream (and
    the runner's ``meta`` notes); ``attempt`` keeps one attempt's output.

    Raises:
        InvalidInput (400): ``stream`` is neither stdout nor stderr.
    """
    c = m.JobLogChunkRow
    query = sa.select(c.id, c.job_id, c.attempt, c.stream, c.at, c.text).where(
        c.job_id == job_id, c.id > after
    )
    if stream is not None:
        if stream not in ("stdout", "stderr"):
            raise InvalidInput(f"stream={stream!r}: use stdout or stderr", field="stream")
        query = query.where(c.stream.in_([stream, "meta"]))
    if attempt is not None:
        query = query.where(c.attempt == attempt)
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
    """(job id, chunks) of the job that runs this run (as ``logs_after``); for a run without
    a job, (None, the console output its client captured)."""
    job = job_for_run(store, run_id)
    if job is None:
        return None, _own_logs(store, run_id, after, limit, stream, tail)
    return job.id, logs_after(store, job.id, after=after, limit=limit, stream=stream, tail=tail)


def _own_logs(
    store: Store, run_id: int, after: int, limit: int, stream: str | None, tail: bool
) -> list[LogChunk]:
    c = m.RunLogChunkRow
    query = sa.select(c.id, c.stream, c.at, c.text).where(c.run_id == run_id, c.id > after)
    if stream is not None:
        if stream not in ("stdout", "stderr"):
            raise InvalidInput(f"stream={stream!r}: use stdout or stderr", field="stream")
        query = query.where(c.stream.in_([stream, "meta"]))
    query = query.order_by(c.id.desc() if tail else c.id).limit(limit)
    with read_conn(store.engine) as conn:
        rows = [LogChunk(cid, None, 0, s, at, text) for cid, s, at, text in conn.execute(query)]
    return rows[::-1] if tail else rows
