"""The job queue in the store: enqueue, claim, renew, poll, finish and reap expired leases.
Every way into the queue -- the CLI, the dashboard's clone (:mod:`tracker.store.clone`) --
enqueues through :func:`enqueue_many`, and a cron schedule's fire through the same
``check_spec`` and ``insert_job``, so every job passes the same checks. A person's cancel
and requeue are in :mod:`tracker.store.jobs`.

Concurrency lives in the database, not in Python:

* A claim is atomic and exclusive: ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, a
  ``BEGIN IMMEDIATE`` write transaction on SQLite (``write_begin``), so two workers never
  take the same job. Claims without GPU placement and successful ends, nearly all of
  them, run as prewritten SQL (:mod:`tracker.store.queue_fast`); this module is the general path.
* A claim writes a lease: owner, a fresh random token and an expiry. Every later change a
  worker makes is an ``UPDATE ... WHERE id = :job AND lease_token = :token``; when that
  matches no row the worker has lost the job (the reaper declared it crashed, or another
  worker holds it now) and must kill its process without writing anything else.
* The lease reaper (:func:`reap_expired_leases`) ends jobs whose lease expired as
  ``crashed`` and requeues them when the caller's retry rule allows it.

Whether a failed attempt runs again is not decided here: ``finish`` and the reaper take a
``RetryRule`` (the runner passes ``tracker.runner.retry.RetryPolicy.next_retry``); without
one, nothing is retried.

Highest priority runs first, then the oldest job (lowest id). Each job owns one run, created
``queued`` at enqueue so the dashboard shows it at once; every attempt of the job continues
that run (a retry resumes from its last verified checkpoint).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from tracker.entities import (
    RUN_STATUS_FOR_JOB,
    ClaimedJob,
    Failure,
    FinishResult,
    JobInfo,
    JobSpec,
    JobStatus,
    LeaseState,
    RunStatus,
    job_status_for,
)
from tracker.errors import Conflict
from tracker.store import models as m
from tracker.store import queue_fast, tokens
from tracker.store.engine import read_conn, write_begin
from tracker.store.jobs import (
    JOB_COLUMNS,
    check_spec,
    create_job_run,
    insert_job,
    job_info,
    jobs_by_id,
)
from tracker.store.pruned import mark_pruned_failure
from tracker.store.rows import dialect_insert

if TYPE_CHECKING:
    from tracker.store.store import Store

__all__ = [
    "LeaseLost",
    "RetryRule",
    "adopt",
    "claim",
    "enqueue",
    "enqueue_many",
    "finish",
    "poll",
    "reap_expired_leases",
    "release",
    "renew",
    "set_pending_reason",
    "set_resume_checkpoint",
]


class LeaseLost(Conflict):
    """The lease token no longer matches: another worker or the reaper owns the job."""

    code = "lease_lost"


class RetryRule(Protocol):
    """When a failed attempt runs again (epoch seconds), or ``None`` for never."""

    def __call__(
        self,
        failure_cls: str,
        attempt: int,
        max_retries: int,
        now: float,
        *,
        retry_on_failure: bool,
    ) -> float | None: ...


def enqueue(store: Store, spec: JobSpec, *, now: float | None = None) -> JobInfo:
    """Queue one job (and create its run as ``queued``). Returns the stored job.

    Raises:
        InvalidInput: a field of ``spec`` breaks a rule (the message names it).
        StoreUnavailable: the database cannot be reached.
    """
    return enqueue_many(store, [spec], now=now)[0]


def enqueue_many(
    store: Store, specs: Sequence[JobSpec], *, now: float | None = None
) -> list[JobInfo]:
    """Queue several jobs in one transaction (all or none), in order. Raises as ``enqueue``."""
    checked = [check_spec(s) for s in specs]
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        ids = [insert_job(conn, spec, now) for spec in checked]
    return jobs_by_id(store, ids)


# -------------------------------------------------------------------------- claim


def _gpus_wanted() -> sa.ColumnElement[int]:
    """SQL expression: the GPU count a job asks for (0 when not given)."""
    return sa.func.coalesce(m.JobRow.resources["gpus"].as_integer(), 0)


Fits = Callable[[Mapping[str, Any]], tuple[int, ...] | None]


def claim(
    store: Store,
    worker_id: str,
    *,
    lease_s: float,
    max_gpus: int = 0,
    fits: Fits | None = None,
    host: str | None = None,
    now: float | None = None,
) -> tuple[ClaimedJob, tuple[int, ...]] | None:
    """Take the best ready job this worker can run, or ``None`` when there is none.

    Ready: ``queued``, its ``not_before`` passed, asking for at most ``max_gpus`` GPUs.
    ``fits(resources)`` may refine the choice (e.g. free GPU memory): it returns the device
    indices to assign, or ``None`` to skip the job. Returns the claim and the devices.
    The job becomes ``running`` with a new lease, a new attempt row, and its run ``running``.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    now = store.now() if now is None else now
    if fits is None and queue_fast.supported(store):
        return _claim_fast(store, worker_id, lease_s, max_gpus, host, now)
    ready = sa.and_(
        m.JobRow.status == JobStatus.QUEUED,
        sa.or_(m.JobRow.not_before.is_(None), m.JobRow.not_before <= now),
        _gpus_wanted() <= max_gpus,
    )
    if store.dialect == "sqlite":  # a cheap read first: an idle poll takes no write lock
        with read_conn(store.engine) as conn:
            if conn.execute(sa.select(m.JobRow.id).where(ready).limit(1)).first() is None:
                return None
    candidates = (
        sa.select(*JOB_COLUMNS)
        .where(ready)
        .order_by(m.JobRow.priority.desc(), m.JobRow.id)
        .limit(1 if fits is None else 16)
        .with_for_update(skip_locked=True)
    )
    with write_begin(store.engine) as conn:
        chosen, devices = None, tuple[int, ...]()
        for row in conn.execute(candidates).all():
            placed = () if fits is None else fits(row.resources or {})
            if placed is not None:
                chosen, devices = row, placed
                break
        if chosen is None:
            return None
        claimed = _take(conn, chosen, worker_id, lease_s, host, now)
    return claimed, tuple(devices)


def _claim_fast(
    store: Store, worker_id: str, lease_s: float, max_gpus: int, host: str | None, now: float
) -> tuple[ClaimedJob, tuple[int, ...]] | None:
    """The prewritten claim (:mod:`tracker.store.queue_fast`); a job row that has no run gets one
    afterwards, fenced by the new lease."""
    got = queue_fast.claim(store, worker_id, lease_s=lease_s, max_gpus=max_gpus, host=host, now=now)
    if got is None:
        return None
    row, token = got
    job, run_id = job_info(row), row.run_id
    if run_id is None:
        with write_begin(store.engine) as conn:
            spec = JobSpec(argv=list(job.argv or ["job"]), project=job.project, config=job.config)
            run_id = create_job_run(conn, job.id, spec, now)
            fenced = sa.and_(m.JobRow.id == job.id, m.JobRow.lease_token == token)
            conn.execute(sa.update(m.JobRow).where(fenced).values(run_id=run_id))
            _start_attempt(conn, job.id, job.attempt, run_id, worker_id, host, now)
        job = dataclasses.replace(job, run_id=run_id)
    claimed = ClaimedJob(job=job, lease_token=token, attempt=job.attempt, run_id=run_id)
    return claimed, ()


def _take(
    conn: sa.Connection, row: Any, worker_id: str, lease_s: float, host: str | None, now: float
) -> ClaimedJob:
    token = uuid.uuid4().hex
    attempt = row.attempt + 1
    run_id = row.run_id
    if run_id is None:  # a job row written by someone else without a run
        spec = JobSpec(argv=list(row.argv or ["job"]), project=row.project, config=row.config or {})
        run_id = create_job_run(conn, row.id, spec, now)
    conn.execute(
        sa.update(m.JobRow)
        .where(m.JobRow.id == row.id, m.JobRow.status == JobStatus.QUEUED)
        .values(
            status=JobStatus.RUNNING,
            attempt=attempt,
            lease_owner=worker_id,
            lease_token=token,
            lease_expires_at=now + lease_s,
            started_at=now,
            ended_at=None,
            exit_code=None,
            pending_reason=None,
            run_id=run_id,
        )
    )
    _start_attempt(conn, row.id, attempt, run_id, worker_id, host, now)
    job = dataclasses.replace(
        job_info(row),
        status=JobStatus.RUNNING,
        attempt=attempt,
        run_id=run_id,
        lease_owner=worker_id,
        lease_expires_at=now + lease_s,
        started_at=now,
    )
    return ClaimedJob(job=job, lease_token=token, attempt=attempt, run_id=run_id)


def _start_attempt(
    conn: sa.Connection,
    job_id: int,
    attempt: int,
    run_id: int,
    worker_id: str,
    host: str | None,
    now: float,
) -> None:
    conn.execute(
        dialect_insert(conn)(m.JobAttemptRow)
        .values(job_id=job_id, attempt=attempt, worker_id=worker_id, status=JobStatus.RUNNING,
                started_at=now)
        .on_conflict_do_nothing()
    )  # fmt: skip
    conn.execute(
        sa.update(m.RunRow)
        .where(m.RunRow.id == run_id)
        .values(
            status=RunStatus.RUNNING,
            started_at=sa.func.coalesce(m.RunRow.started_at, now),
            heartbeat_at=now,
            ended_at=None,
            host=host,
        )
    )


def set_resume_checkpoint(store: Store, claim_: ClaimedJob, path: str | None) -> bool:
    """Record which checkpoint this attempt resumes from. False when the lease was lost."""
    with write_begin(store.engine) as conn:
        if not _hold(conn, claim_):
            return False
        conn.execute(
            sa.update(m.JobAttemptRow)
            .where(
                m.JobAttemptRow.job_id == claim_.job.id, m.JobAttemptRow.attempt == claim_.attempt
            )
            .values(resume_checkpoint=path)
        )
    return True


def set_external_id(store: Store, claim_: ClaimedJob, external_id: str) -> bool:
    """Record the cluster scheduler's id of this attempt (Slurm's job id), shown by ``tracker
    jobs show``, the API and the job page. False when the lease was lost."""
    with write_begin(store.engine) as conn:
        if not _hold(conn, claim_):
            return False
        conn.execute(
            sa.update(m.JobAttemptRow)
            .where(
                m.JobAttemptRow.job_id == claim_.job.id, m.JobAttemptRow.attempt == claim_.attempt
            )
            .values(external_id=str(external_id)[:64])
        )
    return True


def _hold(conn: sa.Connection, claim_: ClaimedJob) -> bool:
    """Inside a write transaction: lock the job row if this lease still holds it."""
    found = conn.execute(
        sa.select(m.JobRow.id)
        .where(m.JobRow.id == claim_.job.id, m.JobRow.lease_token == claim_.lease_token)
        .with_for_update()
    ).first()
    return found is not None


# An attempt's owner counts as gone once its lease has run into its last third: the owner
# renews every third of a lease, so it has then missed a whole renewal. Adopting before the
# lease expires matters: at expiry a reaper ends the attempt as crashed and the job runs again.
ADOPT_REMAINING = 1 / 3


@dataclasses.dataclass(frozen=True)
class LiveOwner:
    """``adopt``'s answer for an attempt whose owner is alive: leave it alone, ask again at
    ``recheck_at`` (its lease may lapse by then)."""

    owner: str
    recheck_at: float


def adopt(
    store: Store, job_id: int, token: str, owner: str, *, lease_s: float, now: float | None = None
) -> ClaimedJob | LiveOwner | None:
    """Take over a running attempt whose lease token is known (a restarted dispatcher finds it
    in the cluster scheduler's job comment) and whose owner is gone: the lease moves to
    ``owner`` and is extended.

    The owner is gone when it is ``owner`` itself, when its worker row says ``stopped``, or
    when its lease has run into its last third (``ADOPT_REMAINING`` of ``lease_s``: the owner
    missed a whole renewal). Otherwise returns :class:`LiveOwner`: several dispatchers on
    one store see each other's jobs on every poll, and must not follow them twice.

    Returns ``None`` when ``token`` no longer holds the job (the reaper crashed it, or a
    later attempt holds it): then the caller must stop that attempt, not adopt it.
    Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    fenced = sa.and_(
        m.JobRow.id == job_id, m.JobRow.lease_token == token, m.JobRow.status == JobStatus.RUNNING
    )
    with write_begin(store.engine) as conn:
        row = conn.execute(sa.select(*JOB_COLUMNS).where(fenced).with_for_update()).first()
        if row is None or row.run_id is None:
            return None
        lapse_at = (row.lease_expires_at or 0.0) - lease_s * ADOPT_REMAINING
        if row.lease_owner not in (None, owner) and now < lapse_at:
            said = conn.execute(
                sa.select(m.WorkerRow.status).where(m.WorkerRow.id == row.lease_owner)
            ).scalar()
            if said != "stopped":
                recheck = min(lapse_at, now + lease_s * ADOPT_REMAINING)
                return LiveOwner(row.lease_owner, recheck)
        conn.execute(
            sa.update(m.JobRow)
            .where(fenced)
            .values(lease_owner=owner, lease_expires_at=now + lease_s)
        )
    job = dataclasses.replace(job_info(row), lease_owner=owner, lease_expires_at=now + lease_s)
    return ClaimedJob(job=job, lease_token=token, attempt=row.attempt, run_id=row.run_id)


def set_pending_reason(store: Store, claim_: ClaimedJob, reason: str | None) -> bool:
    """Why a claimed job still waits in a cluster scheduler (shown on the Queue page like a
    queued job's reason); ``None`` clears it. False (nothing written) when the lease was lost.
    """
    with write_begin(store.engine) as conn:
        done = conn.execute(
            sa.update(m.JobRow)
            .where(m.JobRow.id == claim_.job.id, m.JobRow.lease_token == claim_.lease_token)
            .values(pending_reason=reason)
        )
    return done.rowcount == 1


def release(
    store: Store,
    claim_: ClaimedJob,
    *,
    reason: str,
    not_before: float,
    now: float | None = None,
) -> bool:
    """Undo a claim whose attempt never started (the cluster scheduler could not be reached
    to take it): the job is queued again with the same attempt number, not before
    ``not_before``, with ``reason`` as its pending reason; the attempt's row goes, and the
    run is queued again with an event saying why. Returns False (nothing written) when the
    lease was lost. Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    job_id, attempt = claim_.job.id, claim_.attempt
    fenced = sa.and_(m.JobRow.id == job_id, m.JobRow.lease_token == claim_.lease_token)
    with write_begin(store.engine) as conn:
        if not _hold(conn, claim_):
            return False
        conn.execute(
            sa.update(m.JobRow)
            .where(fenced)
            .values(
                status=JobStatus.QUEUED,
                attempt=attempt - 1,
                lease_owner=None,
                lease_token=None,
                lease_expires_at=None,
                started_at=None,
                not_before=not_before,
                pending_reason=reason,
            )
        )
        conn.execute(
            sa.delete(m.JobAttemptRow).where(
                m.JobAttemptRow.job_id == job_id, m.JobAttemptRow.attempt == attempt
            )
        )
        # The attempt number comes again with the next claim: a token made for this one (a
        # job the scheduler took after all, its reply lost) must not come back to life.
        tokens.revoke_attempt_tokens(conn, job_id, attempt, now)
        run_values: dict[str, Any] = {"status": RunStatus.QUEUED, "ended_at": None}
        if attempt == 1:  # it never started at all
            run_values.update(started_at=None, host=None)
        conn.execute(sa.update(m.RunRow).where(m.RunRow.id == claim_.run_id).values(**run_values))
        conn.execute(
            sa.insert(m.RunEventRow).values(
                run_id=claim_.run_id,
                at=now,
                kind="job_attempt",
                message=f"attempt {attempt} was not started: {reason}",
                data={"attempt": attempt, "status": str(JobStatus.QUEUED), "retry_at": not_before},
            )
        )
    return True


# ---------------------------------------------------------------- leases and polls


def renew(
    store: Store, claims: Iterable[ClaimedJob], *, lease_s: float, now: float | None = None
) -> set[int]:
    """Extend the leases of running jobs and heartbeat their runs; returns the ids *lost*.

    A lost job was taken over (crashed by the reaper, possibly claimed again): its worker
    must kill the process and write nothing more about it.
    """
    now = store.now() if now is None else now
    claims = list(claims)
    lost: set[int] = set()
    if not claims:
        return lost
    with write_begin(store.engine) as conn:
        for c in claims:
            done = conn.execute(
                sa.update(m.JobRow)
                .where(
                    m.JobRow.id == c.job.id,
                    m.JobRow.lease_token == c.lease_token,
                    m.JobRow.status == JobStatus.RUNNING,
                )
                .values(lease_expires_at=now + lease_s)
            )
            if done.rowcount != 1:
                lost.add(c.job.id)
        held = [c.run_id for c in claims if c.job.id not in lost]
        if held:
            conn.execute(
                sa.update(m.RunRow)
                .where(m.RunRow.id.in_(held), m.RunRow.status == RunStatus.RUNNING)
                .values(heartbeat_at=now)
            )
    return lost


def poll(store: Store, claims: Iterable[ClaimedJob]) -> dict[int, LeaseState]:
    """For each claimed job: does this lease still hold it, and was a cancel requested?"""
    tokens = {c.job.id: c.lease_token for c in claims}
    if not tokens:
        return {}
    query = sa.select(m.JobRow.id, m.JobRow.lease_token, m.JobRow.cancel_requested).where(
        m.JobRow.id.in_(list(tokens))
    )
    with read_conn(store.engine) as conn:
        rows = {r.id: r for r in conn.execute(query)}
    out = {}
    for job_id, token in tokens.items():
        row = rows.get(job_id)
        if row is None or row.lease_token != token:
            out[job_id] = LeaseState(False, False)
        else:
            out[job_id] = LeaseState(True, bool(row.cancel_requested))
    return out


# ------------------------------------------------------------------------- ending


def finish(
    store: Store,
    claim_: ClaimedJob,
    *,
    exit_code: int | None,
    failure: Failure | None,
    retry: RetryRule | None = None,
    now: float | None = None,
) -> FinishResult | None:
    """End this worker's attempt: the job, its attempt row and its run get their state.

    ``failure`` is ``None`` for success, else the classifier's verdict (its class maps to
    the job state by ``tracker.entities.job_status_for``). When ``retry`` gives a time, the
    job is requeued with that ``not_before`` (``FinishResult.retry_at``). Returns ``None``
    when the lease was lost: then nothing was written.

    Raises StoreUnavailable.
    """
    now = store.now() if now is None else now
    # The common case, prewritten; when it writes nothing (the lease is lost, or a cancel
    # was asked: a pruned trial's job ends pruned) the full way below tells which.
    fast = failure is None and queue_fast.supported(store)
    if fast and queue_fast.succeed(store, claim_.job.id, claim_.lease_token, exit_code, now):
        return FinishResult(JobStatus.SUCCEEDED)
    with write_begin(store.engine) as conn:
        row = conn.execute(
            sa.select(*JOB_COLUMNS)
            .where(m.JobRow.id == claim_.job.id, m.JobRow.lease_token == claim_.lease_token)
            .with_for_update()
        ).first()
        if row is None:
            return None
        try:
            return _end_attempt(conn, row, claim_.lease_token, exit_code, failure, retry, now)
        except LeaseLost:
            return None


def _retry_at(
    row: Any, failure: Failure | None, retry: RetryRule | None, now: float
) -> float | None:
    """When the failed attempt of ``row`` runs again (the caller's rule decides), or None."""
    if failure is None or retry is None:
        return None
    return retry(
        failure.cls,
        max(row.attempt, 1),
        row.max_retries,
        now,
        retry_on_failure=bool(row.retry_on_failure),
    )


def _end_attempt(
    conn: sa.Connection,
    row: Any,
    token: str,
    exit_code: int | None,
    failure: Failure | None,
    retry: RetryRule | None,
    now: float,
) -> FinishResult:
    """Write the end of the running attempt of ``row`` (locked by the caller).

    The job's update is fenced by ``token`` as well, so it can never end another lease.
    """
    failure = mark_pruned_failure(conn, row.id, failure)
    status = job_status_for(failure.cls if failure else None)
    retry_at = _retry_at(row, failure, retry, now)
    cls = failure.cls if failure else None
    hint = failure.hint if failure else None
    values: dict[str, Any] = {
        "lease_owner": None,
        "lease_token": None,
        "lease_expires_at": None,
        "exit_code": exit_code,
        "failure_class": cls,
        "failure_hint": hint,
        "cancel_requested": False,
    }
    if retry_at is None:
        values.update(status=status, ended_at=now, not_before=None, pending_reason=None)
    else:
        stamp = dt.datetime.fromtimestamp(retry_at).strftime("%H:%M:%S")
        reason = (
            f"retry {row.attempt + 1} of {row.max_retries + 1} after {status} ({cls}); "
            f"not before {stamp}"
        )
        values.update(
            status=JobStatus.QUEUED, ended_at=None, not_before=retry_at, pending_reason=reason
        )
    fenced = sa.and_(m.JobRow.id == row.id, m.JobRow.lease_token == token)
    if conn.execute(sa.update(m.JobRow).where(fenced).values(**values)).rowcount != 1:
        raise LeaseLost(f"job {row.id}: the lease changed under a locked row")
    conn.execute(
        sa.update(m.JobAttemptRow)
        .where(m.JobAttemptRow.job_id == row.id, m.JobAttemptRow.attempt == row.attempt)
        .values(
            status=status, ended_at=now, exit_code=exit_code, failure_class=cls, failure_hint=hint
        )
    )
    tokens.revoke_attempt_tokens(conn, row.id, row.attempt, now)
    if row.run_id is not None:
        _end_run(conn, row.run_id, status, exit_code, cls, hint, retry_at, row.attempt, now)
    return FinishResult(status if retry_at is None else JobStatus.QUEUED, retry_at)


def _end_run(
    conn: sa.Connection,
    run_id: int,
    status: JobStatus,
    exit_code: int | None,
    cls: str | None,
    hint: str | None,
    retry_at: float | None,
    attempt: int,
    now: float,
) -> None:
    run_values: dict[str, Any] = {"exit_code": exit_code}
    if cls is not None:
        run_values.update(failure_class=cls, failure_hint=hint)
    if retry_at is None:
        run_values.update(status=RUN_STATUS_FOR_JOB[status], ended_at=now)
    else:  # it will run again: the dashboard shows it waiting, not dead
        run_values.update(status=RunStatus.QUEUED, ended_at=None)
    conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**run_values))
    if cls is not None:
        then = " -- retrying" if retry_at is not None else ""
        conn.execute(
            sa.insert(m.RunEventRow).values(
                run_id=run_id,
                at=now,
                kind="job_attempt",
                message=f"attempt {attempt} {status} ({cls}): {hint}{then}",
                data={
                    "attempt": attempt,
                    "status": str(status),
                    "failure_class": cls,
                    "exit_code": exit_code,
                    "retry_at": retry_at,
                },
            )
        )


def reap_expired_leases(
    store: Store,
    *,
    retry: RetryRule | None = None,
    now: float | None = None,
    limit: int = 100,
) -> list[tuple[int, str]]:
    """End running jobs whose lease expired (their worker died or hung) as ``crashed``.

    A job with a pending cancel request ends ``cancelled`` instead. Crashes are requeued
    when ``retry`` gives a time. Safe with many reapers at once (rows are locked and
    skipped; every update is fenced by the expired token). Returns (job id, new status).

    The attempts' end is stamped once their rows are locked (``now`` when given): every
    write of a crashed attempt that committed was made before that stamp (see
    :mod:`tracker.store.fencing`), so none of its points is logged after its end.

    Raises StoreUnavailable.
    """
    given = now
    now = store.now() if given is None else given
    expired = (
        sa.select(*JOB_COLUMNS, m.JobRow.lease_token)
        .where(m.JobRow.status == JobStatus.RUNNING, m.JobRow.lease_expires_at < now)
        .order_by(m.JobRow.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    with read_conn(store.engine) as conn:
        probe = sa.select(m.JobRow.id).where(
            m.JobRow.status == JobStatus.RUNNING, m.JobRow.lease_expires_at < now
        )
        if conn.execute(probe.limit(1)).first() is None:
            return []
    done = []
    with write_begin(store.engine) as conn:
        rows = conn.execute(expired).all()
        ended = store.now() if given is None else given  # after the lock (see above)
        for row in rows:
            who = row.lease_owner or "its worker"
            if row.cancel_requested:
                hint = f"The job was cancelled; worker {who} had stopped renewing its lease."
                failure = Failure("cancelled", hint)
            else:
                failure = Failure(
                    "crashed",
                    f"worker {who} stopped renewing the lease (the worker or its host died, "
                    "hung, or lost the database).",
                )
            result = _end_attempt(conn, row, row.lease_token, None, failure, retry, ended)
            done.append((row.id, str(result.status)))
    return done
