"""Job rows in the store, shared by the runner, the CLI and the dashboard: validating a job
(``check_spec``, the one set of rules every enqueue applies), inserting a job with its
``queued`` run, reading jobs (with their queue position) and attempts, and a person's
decisions about a job: cancel (one for the CLI and the dashboard) and requeue.

The queue's lease lifecycle (enqueue, claim, renew, finish, reap) is in
:mod:`tracker.store.queue`; cloning a job or run in :mod:`tracker.store.clone`. ORM rows
stop here: callers get the frozen dataclasses of :mod:`tracker.entities`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import (
    FINAL_JOB_STATUSES,
    JOB_STATUSES,
    RUN_STATUS_FOR_JOB,
    CancelResult,
    JobAttemptInfo,
    JobInfo,
    JobSpec,
    JobStatus,
    RunStatus,
)
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.rules.config import normalize_config
from tracker.rules.fail_on import parse_fail_on
from tracker.rules.slurm import check_extra_options
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.runs import insert_run

if TYPE_CHECKING:
    from tracker.store.store import Store

RESERVED_ENV = frozenset(
    {
        "TRACKER_RUN_ID",
        "TRACKER_JOB_ID",
        "TRACKER_ATTEMPT",
        "TRACKER_CONFIG",
        "TRACKER_PROJECT",
        "TRACKER_URI",
        "TRACKER_RESUME_CHECKPOINT",
        "TRACKER_SNAPSHOT_ID",
        "CUDA_VISIBLE_DEVICES",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
    }
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
JOB_COLUMNS = [c for c in m.JobRow.__table__.columns if c.name != "lease_token"]


def check_spec(spec: JobSpec) -> JobSpec:
    """Validate a spec; returns it with a JSON-safe config. Raises InvalidInput naming the field."""
    if not isinstance(spec.argv, list | tuple) or not spec.argv:
        raise InvalidInput("argv must be a non-empty list of strings", field="argv")
    for i, arg in enumerate(spec.argv):
        if not isinstance(arg, str) or "\0" in arg:
            raise InvalidInput(f"argv[{i}] {arg!r}: must be a string without NUL", field="argv")
    if not spec.argv[0]:
        raise InvalidInput("argv[0] is empty: it must name the program to run", field="argv")
    if not isinstance(spec.project, str) or not 0 < len(spec.project) <= 200:
        raise InvalidInput("project must be a name of 1 to 200 characters", field="project")
    _check_int("priority", spec.priority, -1_000_000, 1_000_000)
    _check_int("gpus", spec.gpus, 0, 1024)
    _check_int("max_retries", spec.max_retries, 0, 1000)
    if spec.gpu_memory_bytes is not None:
        _check_int("gpu_memory_bytes", spec.gpu_memory_bytes, 1, 1 << 50)
    if spec.nproc_per_node is not None:
        _check_int("nproc_per_node", spec.nproc_per_node, 1, 1024)
    if spec.timeout_s is not None and not (
        isinstance(spec.timeout_s, int | float) and 0 < spec.timeout_s < float("inf")
    ):
        raise InvalidInput(f"timeout {spec.timeout_s!r}: must be seconds > 0", field="timeout")
    _check_env(spec.env)
    if spec.cpus is not None:
        _check_int("cpus", spec.cpus, 1, 1 << 20)
    if spec.memory_bytes is not None:
        _check_int("memory", spec.memory_bytes, 1, 1 << 60)
    if spec.snapshot_id is not None:
        _check_int("snapshot_id", spec.snapshot_id, 1, (1 << 63) - 1)
    sbatch = check_extra_options(list(spec.sbatch))
    config = normalize_config(dict(spec.config))
    fail_on = parse_fail_on(spec.fail_on)
    return dataclasses.replace(
        spec,
        argv=list(spec.argv),
        config=config,
        tags=tuple(spec.tags),
        sbatch=sbatch,
        fail_on=fail_on,
    )


def _check_env(env: dict[str, str]) -> None:
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise InvalidInput(f"env name {key!r}: must match [A-Za-z_][A-Za-z0-9_]*", field="env")
        if key in RESERVED_ENV:
            raise InvalidInput(f"env {key}: is set by the worker and cannot be given", field="env")
        if not isinstance(value, str) or "\0" in value:
            raise InvalidInput(f"env {key}: the value must be a string without NUL", field="env")


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidInput(f"{name} {value!r}: must be an integer from {lo} to {hi}", field=name)


def check_snapshot(conn: sa.Connection, snapshot_id: int | None) -> None:
    """Raise InvalidInput (field ``snapshot_id``) when ``snapshot_id`` names no stored
    snapshot; nothing for None."""
    if snapshot_id is None:
        return
    known = sa.select(m.SnapshotRow.id).where(m.SnapshotRow.id == snapshot_id)
    if conn.execute(known).first() is None:
        raise InvalidInput(
            f"snapshot {snapshot_id} does not exist: upload the code first (tracker submit does)",
            field="snapshot_id",
        )


def insert_job(conn: sa.Connection, spec: JobSpec, now: float) -> int:
    """Insert a job and its ``queued`` run inside an open write transaction; returns the job id.

    The spec must already have passed ``check_spec`` (every enqueue does).

    Raises:
        InvalidInput: ``spec.snapshot_id`` names no stored snapshot.
    """
    check_snapshot(conn, spec.snapshot_id)
    resources: dict[str, Any] = {"gpus": spec.gpus}
    if spec.gpu_memory_bytes is not None:
        resources["gpu_memory_bytes"] = spec.gpu_memory_bytes
    if spec.cpus is not None:
        resources["cpus"] = spec.cpus
    if spec.memory_bytes is not None:
        resources["memory_bytes"] = spec.memory_bytes
    if spec.sbatch:
        resources["sbatch"] = list(spec.sbatch)
    job_id = conn.execute(
        sa.insert(m.JobRow)
        .values(
            project=spec.project,
            status=JobStatus.QUEUED,
            priority=spec.priority,
            argv=list(spec.argv),
            cwd=spec.cwd,
            project_root=spec.project_root,
            config=spec.config,
            resources=resources,
            env=dict(spec.env),
            timeout_s=spec.timeout_s,
            max_retries=spec.max_retries,
            retry_on_failure=spec.retry_on_failure,
            fail_on=spec.fail_on,
            attempt=0,
            nproc_per_node=spec.nproc_per_node,
            not_before=spec.not_before,
            cancel_requested=False,
            schedule_id=spec.schedule_id,
            parent_job_id=spec.parent_job_id,
            snapshot_id=spec.snapshot_id,
            created_at=now,
        )
        .returning(m.JobRow.id)
    ).scalar_one()
    run_id = create_job_run(conn, job_id, spec, now)
    if spec.snapshot_id is not None:  # the commit the code was taken at, on the run
        commit = sa.select(m.SnapshotRow.git_commit).where(m.SnapshotRow.id == spec.snapshot_id)
        conn.execute(
            sa.update(m.RunRow)
            .where(m.RunRow.id == run_id)
            .values(git_commit=commit.scalar_subquery())
        )
    conn.execute(sa.update(m.JobRow).where(m.JobRow.id == job_id).values(run_id=run_id))
    return job_id


def create_job_run(conn: sa.Connection, job_id: int, spec: JobSpec, now: float) -> int:
    """Create the ``queued`` run a job logs into; every attempt of the job continues it."""
    argv = list(spec.argv)
    return insert_run(
        conn, spec.project, now, name=spec.name or _default_run_name(argv, job_id),
        status=JobStatus.QUEUED, config=spec.config, tags=spec.tags, command=argv,
    )  # fmt: skip


def _default_run_name(argv: Sequence[str], job_id: int) -> str:
    script = next((a for a in argv[1:] if a.endswith(".py")), None)
    stem = (script or (argv or ["job"])[0]).rsplit("/", 1)[-1].removesuffix(".py")
    return f"{stem[:200]}-job{job_id}"


# -------------------------------------------------------------------------- reads


def job_info(row: Any, position: int | None = None) -> JobInfo:
    """A job row (selected with ``JOB_COLUMNS``) as a JobInfo."""
    return JobInfo(
        id=row.id,
        project=row.project,
        status=row.status,
        priority=row.priority,
        argv=list(row.argv or []),
        cwd=row.cwd,
        config=row.config or {},
        resources=row.resources or {},
        env=row.env or {},
        timeout_s=row.timeout_s,
        max_retries=row.max_retries,
        retry_on_failure=bool(row.retry_on_failure),
        attempt=row.attempt,
        nproc_per_node=row.nproc_per_node,
        not_before=row.not_before,
        cancel_requested=bool(row.cancel_requested),
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        run_id=row.run_id,
        schedule_id=row.schedule_id,
        parent_job_id=row.parent_job_id,
        exit_code=row.exit_code,
        failure_class=row.failure_class,
        failure_hint=row.failure_hint,
        pending_reason=row.pending_reason,
        created_at=row.created_at,
        started_at=row.started_at,
        ended_at=row.ended_at,
        position=position,
        project_root=row.project_root,
        fail_on=row.fail_on,
        snapshot_id=row.snapshot_id,
    )


def queue_positions(conn: sa.Connection) -> dict[int, int]:
    """Place of each queued job in the claim order (1-based): highest priority first, then
    oldest -- the order ``tracker.store.queue.claim`` takes them in."""
    query = (
        sa.select(m.JobRow.id)
        .where(m.JobRow.status == JobStatus.QUEUED)
        .order_by(m.JobRow.priority.desc(), m.JobRow.id)
    )
    return {job_id: i for i, job_id in enumerate(conn.execute(query).scalars(), start=1)}


def jobs_by_id(store: Store, ids: Sequence[int]) -> list[JobInfo]:
    """Jobs in the order asked (every id must exist)."""
    with read_conn(store.engine) as conn:
        rows = conn.execute(sa.select(*JOB_COLUMNS).where(m.JobRow.id.in_(list(ids)))).all()
    by_id = {r.id: job_info(r) for r in rows}
    return [by_id[i] for i in ids]


def get_job(store: Store, job_id: int) -> JobInfo:
    """The job, with its queue position while queued. Raises NotFound for an unknown id."""
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(*JOB_COLUMNS).where(m.JobRow.id == job_id)).first()
        if row is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        positions = queue_positions(conn) if row.status == JobStatus.QUEUED else {}
    return job_info(row, positions.get(job_id))


def check_statuses(statuses: Sequence[str]) -> None:
    """Raises InvalidInput (field ``status``) for a name that is not a job status."""
    for s in statuses:
        if s not in JOB_STATUSES:
            raise InvalidInput(
                f"status {s!r} is not a job status; use one of {', '.join(JOB_STATUSES)}",
                field="status",
            )


def list_jobs(
    store: Store,
    *,
    status: str | Sequence[str] | None = None,
    project: str | None = None,
    limit: int = 100,
    offset: int = 0,
    newest_first: bool = True,
) -> list[JobInfo]:
    """Jobs filtered by status (one or several) and project, the queued ones with their queue
    position. Raises InvalidInput on a bad status."""
    query = sa.select(*JOB_COLUMNS)
    if status is not None:
        wanted = [status] if isinstance(status, str) else list(status)
        check_statuses(wanted)
        query = query.where(m.JobRow.status.in_(wanted))
    if project is not None:
        query = query.where(m.JobRow.project == project)
    order = m.JobRow.id.desc() if newest_first else m.JobRow.id
    query = query.order_by(order).limit(limit).offset(offset)
    with read_conn(store.engine) as conn:
        rows = conn.execute(query).all()
        queued = any(r.status == JobStatus.QUEUED for r in rows)
        positions = queue_positions(conn) if queued else {}
    return [job_info(r, positions.get(r.id)) for r in rows]


def count_jobs(store: Store, *, project: str | None = None) -> dict[str, int]:
    """Number of jobs per status (of one project when ``project`` is given)."""
    query = sa.select(m.JobRow.status, sa.func.count()).group_by(m.JobRow.status)
    if project is not None:
        query = query.where(m.JobRow.project == project)
    with read_conn(store.engine) as conn:
        return {s: n for s, n in conn.execute(query)}


@dataclass(frozen=True)
class JobPage:
    """One page of jobs, newest first (queued ones with their ``position``); ``total``: the
    jobs matching the filters; ``counts``: every job by status."""

    jobs: list[JobInfo]
    total: int
    counts: dict[str, int]


def job_page(
    store: Store,
    *,
    statuses: Sequence[str] = (),
    project: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> JobPage:
    """A page of :func:`list_jobs` with the counts a queue view shows.

    Raises InvalidInput for an unknown status, StoreUnavailable.
    """
    found = list_jobs(
        store, status=list(statuses) or None, project=project, limit=limit, offset=offset
    )
    counts = count_jobs(store)
    matching = count_jobs(store, project=project) if project is not None else counts
    total = sum(n for s, n in matching.items() if not statuses or s in statuses)
    return JobPage(found, total, counts)


def job_for_run(store: Store, run_id: int) -> JobInfo | None:
    """The (newest) job that logs into this run; None for a run not started by a job."""
    query = sa.select(*JOB_COLUMNS).where(m.JobRow.run_id == run_id).order_by(m.JobRow.id.desc())
    with read_conn(store.engine) as conn:
        row = conn.execute(query.limit(1)).first()
    return None if row is None else job_info(row)


def external_ids(store: Store, job_ids: Sequence[int]) -> dict[int, str]:
    """The cluster scheduler's id (Slurm's job id) of each job's latest attempt that has one,
    by job id (one query for a page of jobs)."""
    if not job_ids:
        return {}
    a = m.JobAttemptRow
    query = (
        sa.select(a.job_id, a.external_id)
        .where(a.job_id.in_(list(job_ids)), a.external_id.is_not(None))
        .order_by(a.job_id, a.attempt)
    )
    with read_conn(store.engine) as conn:
        return {int(job_id): str(ext) for job_id, ext in conn.execute(query)}  # latest wins


def attempts(store: Store, job_id: int) -> list[JobAttemptInfo]:
    """Every attempt of a job, oldest first."""
    query = (
        sa.select(*m.JobAttemptRow.__table__.columns)
        .where(m.JobAttemptRow.job_id == job_id)
        .order_by(m.JobAttemptRow.attempt)
    )
    with read_conn(store.engine) as conn:
        return [
            JobAttemptInfo(
                r.job_id,
                r.attempt,
                r.worker_id,
                r.status,
                r.started_at,
                r.ended_at,
                r.exit_code,
                r.failure_class,
                r.failure_hint,
                r.resume_checkpoint,
                r.external_id,
            )
            for r in conn.execute(query)
        ]


# ----------------------------------------------------------------- cancel, requeue


def _lock_job(conn: sa.Connection, job_id: int) -> Any:
    """The job's (status, run_id), locked for this transaction. Raises NotFound."""
    row = conn.execute(
        sa.select(m.JobRow.status, m.JobRow.run_id).where(m.JobRow.id == job_id).with_for_update()
    ).first()
    if row is None:
        raise NotFound(f"job {job_id} does not exist", field="job")
    return row


def cancel(store: Store, job_id: int, *, now: float | None = None) -> CancelResult:
    """Cancel a job; see :class:`tracker.entities.CancelResult`. A queued job ends
    ``cancelled`` and its run ``killed``; a running one gets ``cancel_requested`` (its
    worker stops it); a finished one is left ``unchanged``.

    Raises:
        NotFound: no such job.
        StoreUnavailable: the database cannot be reached.
    """
    now = store.now() if now is None else now
    with write_begin(store.engine) as conn:
        row = _lock_job(conn, job_id)
        if row.status == JobStatus.RUNNING:
            conn.execute(
                sa.update(m.JobRow).where(m.JobRow.id == job_id).values(cancel_requested=True)
            )
            return CancelResult("cancel_requested", JobStatus.RUNNING)
        if row.status != JobStatus.QUEUED:
            return CancelResult("unchanged", row.status)
        hint = "The job was cancelled before it started."
        conn.execute(
            sa.update(m.JobRow)
            .where(m.JobRow.id == job_id)
            .values(
                status=JobStatus.CANCELLED,
                ended_at=now,
                failure_class="cancelled",
                failure_hint=hint,
                pending_reason=None,
                not_before=None,
            )
        )
        if row.run_id is not None:
            conn.execute(
                sa.update(m.RunRow)
                .where(m.RunRow.id == row.run_id)
                .values(
                    status=RUN_STATUS_FOR_JOB[JobStatus.CANCELLED],
                    ended_at=now,
                    failure_class="cancelled",
                    failure_hint=hint,
                )
            )
    return CancelResult("cancelled", JobStatus.CANCELLED)


def requeue(
    store: Store,
    job_id: int,
    *,
    not_before: float | None = None,
    reason: str | None = None,
) -> JobInfo:
    """Put a finished job back in the queue for one more attempt (a person's decision).

    Raises:
        NotFound: no such job.
        Conflict: the job is queued or running.
        StoreUnavailable: the database cannot be reached.
    """
    with write_begin(store.engine) as conn:
        row = _lock_job(conn, job_id)
        if row.status not in FINAL_JOB_STATUSES:
            raise Conflict(f"job {job_id} is {row.status}: only a finished job can be requeued")
        conn.execute(
            sa.update(m.JobRow)
            .where(m.JobRow.id == job_id)
            .values(
                status=JobStatus.QUEUED,
                ended_at=None,
                not_before=not_before,
                cancel_requested=False,
                pending_reason=reason or "requeued",
            )
        )
        if row.run_id is not None:
            conn.execute(
                sa.update(m.RunRow)
                .where(m.RunRow.id == row.run_id)
                .values(status=RunStatus.QUEUED, ended_at=None)
            )
    return get_job(store, job_id)
