"""Jobs in the store, shared by the runner and the dashboard: the job entities, turning job
rows into them, validating a job, inserting a job with its ``queued`` run, reading jobs and
cancelling one.

The runner's queue (claim, lease, finish) builds on these; the dashboard writes the same
rows when it clones a run into the queue. ORM rows stop here: callers get the frozen
dataclasses below.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.errors import InvalidInput, NotFound, StoreUnavailable
from tracker.rules.config import normalize_config
from tracker.store import models as m
from tracker.store.engine import is_unavailable, write_begin
from tracker.store.engine import read_conn as engine_read_conn
from tracker.store.rows import project_id

if TYPE_CHECKING:
    from tracker.store.store import Store

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "timed_out", "crashed")
FINAL_JOB_STATUSES = ("succeeded", "failed", "cancelled", "timed_out", "crashed")

# The run status a job's run gets when the job ends in each final state.
RUN_STATUS_FOR_JOB = {
    "succeeded": "finished",
    "failed": "failed",
    "cancelled": "killed",
    "timed_out": "killed",
    "crashed": "crashed",
}

RESERVED_ENV = frozenset(
    {
        "TRACKER_RUN_ID",
        "TRACKER_JOB_ID",
        "TRACKER_ATTEMPT",
        "TRACKER_CONFIG",
        "TRACKER_PROJECT",
        "TRACKER_URI",
        "TRACKER_RESUME_CHECKPOINT",
        "CUDA_VISIBLE_DEVICES",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
    }
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
JOB_COLUMNS = [c for c in m.Job.__table__.columns if c.name != "lease_token"]


@dataclass(frozen=True)
class JobSpec:
    """What to run: everything a new job needs. ``argv`` is run as is, never by a shell.

    ``config`` holds the submitted overrides (nested); the client deep-merges them over the
    script's own config. ``env`` adds variables to the job's environment.
    ``gpu_memory_bytes`` is the free memory each assigned GPU must have (checked with NVML).
    """

    argv: list[str]
    project: str = "default"
    cwd: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    gpus: int = 0
    gpu_memory_bytes: int | None = None
    timeout_s: float | None = None
    max_retries: int = 0
    retry_on_failure: bool = False
    env: dict[str, str] = field(default_factory=dict)
    nproc_per_node: int | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    schedule_id: int | None = None
    parent_job_id: int | None = None
    not_before: float | None = None


@dataclass(frozen=True)
class JobInfo:
    id: int
    project: str
    status: str
    priority: int
    argv: list[str]
    cwd: str | None
    config: dict[str, Any]
    resources: dict[str, Any]
    env: dict[str, str]
    timeout_s: float | None
    max_retries: int
    retry_on_failure: bool
    attempt: int
    nproc_per_node: int | None
    not_before: float | None
    cancel_requested: bool
    lease_owner: str | None
    lease_expires_at: float | None
    run_id: int | None
    schedule_id: int | None
    parent_job_id: int | None
    exit_code: int | None
    failure_class: str | None
    failure_hint: str | None
    pending_reason: str | None
    created_at: float
    started_at: float | None
    ended_at: float | None

    @property
    def gpus(self) -> int:
        return int(self.resources.get("gpus") or 0)

    @property
    def gpu_memory_bytes(self) -> int | None:
        value = self.resources.get("gpu_memory_bytes")
        return None if value is None else int(value)

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_JOB_STATUSES


@dataclass(frozen=True)
class JobAttemptInfo:
    job_id: int
    attempt: int
    worker_id: str | None
    status: str
    started_at: float
    ended_at: float | None
    exit_code: int | None
    failure_class: str | None
    failure_hint: str | None
    resume_checkpoint: str | None


@dataclass(frozen=True)
class CancelResult:
    """``outcome``: ``cancelled`` (it was queued), ``cancel_requested`` (it is running: its
    worker stops it within about a second) or ``unchanged`` (it had already ended);
    ``status``: the job's status now."""

    outcome: str
    status: str


# ---------------------------------------------------------------------- connections


def engine_of(source: Store | sa.Engine) -> sa.Engine:
    """The engine of a Store, or the engine itself."""
    return source if isinstance(source, sa.Engine) else source.engine


@contextlib.contextmanager
def read_conn(source: Store | sa.Engine) -> Iterator[sa.Connection]:
    """A connection for reads; a lost or locked database becomes StoreUnavailable."""
    try:
        with engine_of(source).connect() as conn:
            yield conn
    except sa.exc.DBAPIError as exc:
        if is_unavailable(exc):
            raise StoreUnavailable(f"the store is unavailable: {exc.orig}") from exc
        raise


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
    config = normalize_config(dict(spec.config))
    return dataclasses.replace(spec, argv=list(spec.argv), config=config, tags=tuple(spec.tags))


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


def insert_job(conn: sa.Connection, spec: JobSpec, now: float) -> int:
    """Insert a job and its ``queued`` run inside an open write transaction; returns the job id.

    The spec must already be validated (``check_spec``, or the caller's own rules).
    """
    resources: dict[str, Any] = {"gpus": spec.gpus}
    if spec.gpu_memory_bytes is not None:
        resources["gpu_memory_bytes"] = spec.gpu_memory_bytes
    job_id = conn.execute(
        sa.insert(m.Job)
        .values(
            project=spec.project,
            status="queued",
            priority=spec.priority,
            argv=list(spec.argv),
            cwd=spec.cwd,
            config=spec.config,
            resources=resources,
            env=dict(spec.env),
            timeout_s=spec.timeout_s,
            max_retries=spec.max_retries,
            retry_on_failure=spec.retry_on_failure,
            attempt=0,
            nproc_per_node=spec.nproc_per_node,
            not_before=spec.not_before,
            cancel_requested=False,
            schedule_id=spec.schedule_id,
            parent_job_id=spec.parent_job_id,
            created_at=now,
        )
        .returning(m.Job.id)
    ).scalar_one()
    run_id = create_job_run(conn, job_id, spec, now)
    conn.execute(sa.update(m.Job).where(m.Job.id == job_id).values(run_id=run_id))
    return job_id


def create_job_run(conn: sa.Connection, job_id: int, spec: JobSpec, now: float) -> int:
    """Create the ``queued`` run a job logs into; every attempt of the job continues it."""
    argv = list(spec.argv)
    return conn.execute(
        sa.insert(m.Run)
        .values(
            project_id=project_id(conn, spec.project, now),
            name=spec.name or _default_run_name(argv, job_id),
            status="queued",
            config=spec.config,
            tags=list(spec.tags),
            created_at=now,
            command=argv,
        )
        .returning(m.Run.id)
    ).scalar_one()


def _default_run_name(argv: Sequence[str], job_id: int) -> str:
    script = next((a for a in argv[1:] if a.endswith(".py")), None)
    stem = (script or (argv or ["job"])[0]).rsplit("/", 1)[-1].removesuffix(".py")
    return f"{stem[:200]}-job{job_id}"


# -------------------------------------------------------------------------- reads


def job_info(row: Any) -> JobInfo:
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
    )


def jobs_by_id(source: Store | sa.Engine, ids: Sequence[int]) -> list[JobInfo]:
    """Jobs in the order asked (every id must exist)."""
    with read_conn(source) as conn:
        rows = conn.execute(sa.select(*JOB_COLUMNS).where(m.Job.id.in_(list(ids)))).all()
    by_id = {r.id: job_info(r) for r in rows}
    return [by_id[i] for i in ids]


def get_job(source: Store | sa.Engine, job_id: int) -> JobInfo:
    """Raises NotFound when there is no job with this id."""
    with read_conn(source) as conn:
        row = conn.execute(sa.select(*JOB_COLUMNS).where(m.Job.id == job_id)).first()
    if row is None:
        raise NotFound(f"job {job_id} does not exist", field="job")
    return job_info(row)


def check_statuses(statuses: Sequence[str]) -> None:
    """Raises InvalidInput (field ``status``) for a name that is not a job status."""
    for s in statuses:
        if s not in JOB_STATUSES:
            raise InvalidInput(
                f"status {s!r} is not a job status; use one of {', '.join(JOB_STATUSES)}",
                field="status",
            )


def list_jobs(
    source: Store | sa.Engine,
    *,
    status: str | Sequence[str] | None = None,
    project: str | None = None,
    limit: int = 100,
    offset: int = 0,
    newest_first: bool = True,
) -> list[JobInfo]:
    """Jobs filtered by status (one or several) and project. Raises InvalidInput on a bad status."""
    query = sa.select(*JOB_COLUMNS)
    if status is not None:
        wanted = [status] if isinstance(status, str) else list(status)
        check_statuses(wanted)
        query = query.where(m.Job.status.in_(wanted))
    if project is not None:
        query = query.where(m.Job.project == project)
    order = m.Job.id.desc() if newest_first else m.Job.id
    query = query.order_by(order).limit(limit).offset(offset)
    with read_conn(source) as conn:
        return [job_info(r) for r in conn.execute(query)]


def count_jobs(source: Store | sa.Engine) -> dict[str, int]:
    """Number of jobs per status."""
    query = sa.select(m.Job.status, sa.func.count()).group_by(m.Job.status)
    with read_conn(source) as conn:
        return {s: n for s, n in conn.execute(query)}


def attempts(source: Store | sa.Engine, job_id: int) -> list[JobAttemptInfo]:
    """Every attempt of a job, oldest first."""
    query = (
        sa.select(*m.JobAttempt.__table__.columns)
        .where(m.JobAttempt.job_id == job_id)
        .order_by(m.JobAttempt.attempt)
    )
    with read_conn(source) as conn:
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
            )
            for r in conn.execute(query)
        ]


# ------------------------------------------------------------------------- cancel


def cancel(source: Store | sa.Engine, job_id: int, *, now: float | None = None) -> CancelResult:
    """Cancel a job; see :class:`CancelResult`. A queued job ends ``cancelled`` and its run
    ``killed``; a running one gets ``cancel_requested`` (its worker stops it).

    Raises:
        NotFound: no such job.
        StoreUnavailable: the database cannot be reached.
    """
    now = time.time() if now is None else now
    with write_begin(engine_of(source)) as conn:
        row = conn.execute(
            sa.select(m.Job.status, m.Job.run_id).where(m.Job.id == job_id).with_for_update()
        ).first()
        if row is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        if row.status == "running":
            conn.execute(sa.update(m.Job).where(m.Job.id == job_id).values(cancel_requested=True))
            return CancelResult("cancel_requested", "running")
        if row.status != "queued":
            return CancelResult("unchanged", row.status)
        hint = "The job was cancelled before it started."
        conn.execute(
            sa.update(m.Job)
            .where(m.Job.id == job_id)
            .values(
                status="cancelled",
                ended_at=now,
                failure_class="cancelled",
                failure_hint=hint,
                pending_reason=None,
                not_before=None,
            )
        )
        if row.run_id is not None:
            conn.execute(
                sa.update(m.Run)
                .where(m.Run.id == row.run_id)
                .values(status="killed", ended_at=now, failure_class="cancelled", failure_hint=hint)
            )
    return CancelResult("cancelled", "cancelled")


# ------------------------------------------------------- reads with queue position


@dataclass(frozen=True)
class JobPage:
    """One page of jobs, newest first. ``positions``: the 1-based place in the claim order of
    each queued job on the page; ``total``: the jobs matching; ``counts``: every job by status."""

    jobs: list[JobInfo]
    positions: dict[int, int]
    total: int
    counts: dict[str, int]


def _positions(conn: sa.Connection) -> dict[int, int]:
    """Place of each queued job in the claim order: highest priority first, then oldest."""
    query = (
        sa.select(m.Job.id)
        .where(m.Job.status == "queued")
        .order_by(m.Job.priority.desc(), m.Job.id)
    )
    return {job_id: i for i, job_id in enumerate(conn.execute(query).scalars(), start=1)}


def job_page(
    store: Store,
    *,
    statuses: Sequence[str] = (),
    project: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> JobPage:
    """Jobs filtered by status (any of ``statuses``) and project, with their queue positions.

    Raises InvalidInput for an unknown status, StoreUnavailable.
    """
    check_statuses(statuses)
    where: list[Any] = []
    if statuses:
        where.append(m.Job.status.in_(list(statuses)))
    if project:
        where.append(m.Job.project == project)
    query = (
        sa.select(*JOB_COLUMNS).where(*where).order_by(m.Job.id.desc()).limit(limit).offset(offset)
    )
    with engine_read_conn(store.engine) as conn:
        rows = conn.execute(query).all()
        total = conn.execute(
            sa.select(sa.func.count()).select_from(m.Job).where(*where)
        ).scalar_one()
        counts = dict(
            conn.execute(sa.select(m.Job.status, sa.func.count()).group_by(m.Job.status)).all()
        )
        positions = _positions(conn) if any(r.status == "queued" for r in rows) else {}
    jobs = [job_info(r) for r in rows]
    return JobPage(jobs, {j.id: positions[j.id] for j in jobs if j.id in positions}, total, counts)


def job_with_position(store: Store, job_id: int) -> tuple[JobInfo, int | None]:
    """A job and, while it is queued, its 1-based place in the claim order.

    Raises NotFound for an unknown id, StoreUnavailable.
    """
    with engine_read_conn(store.engine) as conn:
        row = conn.execute(sa.select(*JOB_COLUMNS).where(m.Job.id == job_id)).first()
        if row is None:
            raise NotFound(f"job {job_id} does not exist", field="job")
        positions = _positions(conn) if row.status == "queued" else {}
    return job_info(row), positions.get(job_id)


def job_for_run(store: Store, run_id: int) -> JobInfo | None:
    """The (newest) job that logs into this run; None for a run not started by a job."""
    query = sa.select(*JOB_COLUMNS).where(m.Job.run_id == run_id).order_by(m.Job.id.desc())
    with engine_read_conn(store.engine) as conn:
        row = conn.execute(query.limit(1)).first()
    return None if row is None else job_info(row)
