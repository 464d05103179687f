"""The queue's hot path as prewritten SQL: a claim without GPU placement, a successful end.

Nearly every job is claimed by a worker that needs no GPU placement and ends ``succeeded``.
These two writes touch three rows each (the job, its attempt, its run; the end also revokes
the attempt's tokens); here they are
written once as SQL with bind parameters, so a call neither builds nor compiles statements
while it holds locks:

* PostgreSQL: one statement each, whose data-modifying CTEs write the three rows, run in
  autocommit mode -- one round trip instead of ``BEGIN``, four statements and ``COMMIT``::

      WITH pick AS (SELECT id ... ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED),
           job  AS (UPDATE jobs ... FROM pick ... RETURNING ...),
           att  AS (INSERT INTO job_attempts ... SELECT ... FROM job),
           run  AS (UPDATE runs ... FROM job ...)
      SELECT * FROM job

* SQLite (3.35 or newer, for ``RETURNING``): after a lock-free read that finds a ready job,
  three statements in one ``BEGIN IMMEDIATE`` transaction, the first an
  ``UPDATE ... WHERE id = (SELECT ...) RETURNING``, so the write lock is held for as short
  a time as possible (eight workers queue for it).

They write exactly what the general path of :mod:`tracker.store.queue` writes (a test compares
both on each database), with the same guarantees: the claim is exclusive (``SKIP LOCKED``;
SQLite's single writer) and the end is fenced by the lease token.
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
import weakref
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import RUN_STATUS_FOR_JOB
from tracker.store.engine import read_conn, write_begin
from tracker.store.jobs import JOB_COLUMNS

if TYPE_CHECKING:
    from tracker.store.store import Store

# Plain SQL: built with SQLAlchemy 2.1's constructs, PostgreSQL's chained data-modifying
# CTEs fail at execution ("A value is required for bind parameter ...").
_RETURNING = ", ".join(f"jobs.{c.name}" for c in JOB_COLUMNS)
_GPUS = {
    "postgresql": "COALESCE(CAST(resources ->> 'gpus' AS INTEGER), 0)",
    "sqlite": "COALESCE(CAST(json_extract(resources, '$.gpus') AS INTEGER), 0)",
}
_PICK = """SELECT id FROM jobs
    WHERE status = 'queued' AND (not_before IS NULL OR not_before <= :now) AND {gpus} <= :max_gpus
    ORDER BY priority DESC, id LIMIT 1"""
_CLAIM_JOB = """status = 'running', attempt = jobs.attempt + 1, lease_owner = :worker,
    lease_token = :token, lease_expires_at = :expires, started_at = :now, ended_at = NULL,
    exit_code = NULL, pending_reason = NULL"""
_ATTEMPT_COLUMNS = "job_attempts (job_id, attempt, worker_id, status, started_at)"
_START_RUN = """status = 'running', started_at = COALESCE(runs.started_at, :now),
    heartbeat_at = :now, ended_at = NULL, host = :host"""
_SUCCEED_JOB = """status = 'succeeded', ended_at = :now, not_before = NULL,
    pending_reason = NULL, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
    exit_code = :exit_code, failure_class = NULL, failure_hint = NULL, cancel_requested = false"""
_SUCCEED_ATTEMPT = """status = 'succeeded', ended_at = :now, exit_code = :exit_code,
    failure_class = NULL, failure_hint = NULL"""
_SUCCEED_RUN = f"""status = '{RUN_STATUS_FOR_JOB["succeeded"].value}', ended_at = :now,
    exit_code = :exit_code"""
# The attempt's own tokens end with it (tracker.store.tokens.revoke_attempt_tokens).
_REVOKE_TOKENS = "UPDATE tokens SET revoked_at = :now WHERE revoked_at IS NULL AND"
_FENCE = "id = :job_id AND lease_token = :token"
# A success with a cancel asked goes the full way (``queue.finish``): a pruned trial's job
# ends pruned even when its process exited 0 before the kill (``tracker.store.pruned``).
_SUCCEED_FENCE = f"{_FENCE} AND NOT cancel_requested"

PG_CLAIM = f"""WITH pick AS ({_PICK.format(gpus=_GPUS["postgresql"])} FOR UPDATE SKIP LOCKED),
job AS (UPDATE jobs SET {_CLAIM_JOB} FROM pick WHERE jobs.id = pick.id RETURNING {_RETURNING}),
att AS (INSERT INTO {_ATTEMPT_COLUMNS} SELECT id, attempt, :worker, 'running', :now FROM job
    ON CONFLICT DO NOTHING),
run AS (UPDATE runs SET {_START_RUN} FROM job WHERE runs.id = job.run_id)
SELECT * FROM job"""

PG_SUCCEED = f"""WITH job AS (UPDATE jobs SET {_SUCCEED_JOB} WHERE {_SUCCEED_FENCE}
    RETURNING id, attempt, run_id),
att AS (UPDATE job_attempts SET {_SUCCEED_ATTEMPT}
    FROM job WHERE job_attempts.job_id = job.id AND job_attempts.attempt = job.attempt),
run AS (UPDATE runs SET {_SUCCEED_RUN} FROM job WHERE runs.id = job.run_id),
tok AS ({_REVOKE_TOKENS} (job_id, attempt) = (SELECT id, attempt FROM job))
SELECT id FROM job"""

SQLITE_READY = _PICK.format(gpus=_GPUS["sqlite"])
SQLITE_CLAIM = (
    f"UPDATE jobs SET {_CLAIM_JOB} WHERE id = ({SQLITE_READY}) RETURNING {_RETURNING}",
    f"""INSERT INTO {_ATTEMPT_COLUMNS} VALUES (:job_id, :attempt, :worker, 'running', :now)
    ON CONFLICT DO NOTHING""",
    f"UPDATE runs SET {_START_RUN} WHERE id = :run_id",
)

SQLITE_SUCCEED = (
    f"UPDATE jobs SET {_SUCCEED_JOB} WHERE {_SUCCEED_FENCE} RETURNING attempt, run_id",
    f"UPDATE job_attempts SET {_SUCCEED_ATTEMPT} WHERE job_id = :job_id AND attempt = :attempt",
    f"UPDATE runs SET {_SUCCEED_RUN} WHERE id = :run_id",
    f"{_REVOKE_TOKENS} job_id = :job_id AND attempt = :attempt",
)


@functools.cache
def _text(sql: str, typed: bool = False) -> Any:
    """The ``text()`` construct of ``sql``, made once (typed results: ``JOB_COLUMNS``)."""
    return sa.text(sql).columns(*JOB_COLUMNS) if typed else sa.text(sql)


def supported(store: Store) -> bool:
    """True where this path runs: PostgreSQL, and SQLite with ``RETURNING`` (3.35+)."""
    if store.dialect == "postgresql":
        return True
    return store.dialect == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def claim(
    store: Store, worker_id: str, *, lease_s: float, max_gpus: int, host: str | None, now: float
) -> tuple[Any, str] | None:
    """Claim the best ready job: its row (``JOB_COLUMNS``, the new attempt counted) and its
    lease token, or ``None`` when no job is ready. The attempt row and the run are started."""
    token = uuid.uuid4().hex
    params = {"now": now, "max_gpus": max_gpus, "worker": worker_id, "token": token,
              "expires": now + lease_s, "host": host}  # fmt: skip
    if store.dialect == "postgresql":
        with autocommit(store) as conn:
            row = conn.execute(_text(PG_CLAIM, typed=True), params).first()
        return None if row is None else (row, token)
    with read_conn(store.engine) as conn:  # a cheap read first: an idle poll takes no write lock
        if conn.execute(_text(SQLITE_READY), params).first() is None:
            return None
    take, attempt, run = SQLITE_CLAIM
    with write_begin(store.engine) as conn:
        row = conn.execute(_text(take, typed=True), params).first()
        if row is None:
            return None
        started = params | {"job_id": row.id, "attempt": row.attempt, "run_id": row.run_id}
        conn.execute(_text(attempt), started)
        conn.execute(_text(run), started)
    return row, token


def succeed(store: Store, job_id: int, token: str, exit_code: int | None, now: float) -> bool:
    """End the held attempt as ``succeeded`` (job, attempt row, run); False when the lease no
    longer holds the job or a cancel was asked for it -- then nothing was written."""
    params = {"job_id": job_id, "token": token, "exit_code": exit_code, "now": now}
    if store.dialect == "postgresql":
        with autocommit(store) as conn:
            return conn.execute(_text(PG_SUCCEED), params).first() is not None
    end_job, *rest = SQLITE_SUCCEED
    with write_begin(store.engine) as conn:
        row = conn.execute(_text(end_job), params).first()
        if row is None:
            return False
        ended = params | {"attempt": row.attempt, "run_id": row.run_id}
        for statement in rest:  # the attempt, the run, the attempt's tokens
            conn.execute(_text(statement), ended)
    return True


_AUTOCOMMIT: weakref.WeakKeyDictionary[sa.Engine, sa.Engine] = weakref.WeakKeyDictionary()


def autocommit(store: Store) -> Any:
    """A connection whose every statement is its own transaction (errors as ``read_conn``).

    The autocommit engine shares the store's pool; it is made once per engine.
    """
    engine = _AUTOCOMMIT.get(store.engine)
    if engine is None:
        engine = store.engine.execution_options(isolation_level="AUTOCOMMIT")
        _AUTOCOMMIT[store.engine] = engine
    return read_conn(engine)
