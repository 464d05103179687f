"""Plain frozen dataclasses the store hands out (ORM rows never leave it) and the client,
the runner and the dashboard pass around: no SQLAlchemy, no I/O.

The status vocabularies are here too, once: ``RunStatus``, ``JobStatus`` (str-valued enums,
so the stored strings are these values) and the one table that maps between them and the
failure classes (``RUN_STATUS_FOR_JOB``, ``job_status_for``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tracker.rules.failure import Failure as Failure  # re-exported: a pure rule


class RunStatus(StrEnum):
    """What a run is doing; every value but ``queued`` and ``running`` is final."""

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    KILLED = "killed"  # stopped from outside: SIGTERM, Ctrl-C, a cancel or a timeout
    CRASHED = "crashed"  # went silent: its process or host died


class JobStatus(StrEnum):
    """Where a job is in the queue: ``queued -> running -> one of the final states``."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    CRASHED = "crashed"
    PRUNED = "pruned"  # a sweep's pruner stopped it (tracker.store.sweeps)


RUN_STATUSES = tuple(s.value for s in RunStatus)
FINAL_RUN_STATUSES = tuple(s.value for s in RunStatus if s not in ("queued", "running"))
JOB_STATUSES = tuple(s.value for s in JobStatus)
FINAL_JOB_STATUSES = tuple(s.value for s in JobStatus if s not in ("queued", "running"))

# The run status a job's run gets when the job ends in each final state.
RUN_STATUS_FOR_JOB: dict[str, RunStatus] = {
    JobStatus.SUCCEEDED: RunStatus.FINISHED,
    JobStatus.FAILED: RunStatus.FAILED,
    JobStatus.CANCELLED: RunStatus.KILLED,
    JobStatus.TIMED_OUT: RunStatus.KILLED,
    JobStatus.CRASHED: RunStatus.CRASHED,
    JobStatus.PRUNED: RunStatus.KILLED,  # with failure class ``pruned``
}

# The job status an attempt ends in for the failure classes that have their own; every
# other failure class ends the attempt ``failed`` (see ``job_status_for``).
_JOB_STATUS_FOR_FAILURE = {
    "cancelled": JobStatus.CANCELLED,
    "timeout": JobStatus.TIMED_OUT,
    "crashed": JobStatus.CRASHED,
    "preempted": JobStatus.CRASHED,  # the cluster took the job away: retried
    "node_fail": JobStatus.CRASHED,
    "pruned": JobStatus.PRUNED,
}


def job_status_for(failure_class: str | None) -> JobStatus:
    """The job state an attempt ends in: succeeded (no failure), cancelled, pruned,
    timed_out, crashed or failed."""
    if failure_class is None:
        return JobStatus.SUCCEEDED
    return _JOB_STATUS_FOR_FAILURE.get(failure_class, JobStatus.FAILED)


@dataclass(frozen=True)
class RunInfo:
    id: int
    project: str
    name: str
    status: str
    config: dict[str, Any]
    tags: list[str]
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    heartbeat_at: float | None = None
    host: str | None = None
    pid: int | None = None
    git_commit: str | None = None
    command: list[str] | None = None
    exit_code: int | None = None
    failure_class: str | None = None
    failure_hint: str | None = None
    error: str | None = None
    last_metrics: dict[str, float] = field(default_factory=dict)
    deleted_at: float | None = None  # soft-deleted (hidden unless asked for) since then
    notes: str | None = None  # a person's notes on the run (tracker.store.annotations)
    starred: bool = False

    @property
    def duration(self) -> float | None:
        return run_duration(self.started_at, self.ended_at, self.heartbeat_at)


def run_duration(
    started_at: float | None, ended_at: float | None, heartbeat_at: float | None
) -> float | None:
    """Seconds a run ran: until its end, or its last heartbeat while it runs; None unknown."""
    if started_at is None:
        return None
    end = ended_at if ended_at is not None else heartbeat_at
    return None if end is None else max(0.0, end - started_at)


@dataclass(frozen=True)
class MetricPoint:
    step: int
    wall_time: float
    value: float


@dataclass(frozen=True)
class CheckpointInfo:
    id: int
    run_id: int
    step: int
    path: str
    bytes: int
    sha256: str
    metrics: dict[str, Any]
    state: str
    created_at: float


@dataclass(frozen=True)
class ArtifactInfo:
    """One stored file of a run: ``path`` is relative posix (``tracker.rules.artifact_paths``),
    unique per run; the bytes live in the blob store under ``sha256`` (shared across runs)."""

    run_id: int
    path: str
    size: int
    sha256: str
    media_type: str
    step: int | None
    created_at: float
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BlobGcReport:
    """What ``tracker gc`` found (and removed unless ``dry_run``): blobs no artifact refers to."""

    blobs: int  # blobs in the artifact root
    referenced: int  # of which some artifact row refers to
    unreferenced: int  # candidates: no row refers to them
    unreferenced_bytes: int
    young: int  # unreferenced but younger than the grace period: kept (may be mid-upload)
    deleted: int  # 0 on a dry run
    dry_run: bool
    temporary: int = 0  # leftover temporary files past the grace period (removed unless dry_run)


@dataclass(frozen=True)
class RunEventInfo:
    id: int
    run_id: int
    at: float
    kind: str
    message: str
    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class MetricSummary:
    """The last point of one metric of a run (``last_value`` None: it was NaN)."""

    key: str
    last_step: int
    last_wall_time: float
    last_value: float | None


@dataclass(frozen=True)
class ProjectInfo:
    id: int
    name: str
    created_at: float
    deleted_at: float | None = None  # soft-deleted since then (its runs are deleted too)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunMeta:
    """The run columns MLflow params and tags map onto (``tracker.web.core.mlflow_compat``)."""

    name: str
    config: dict[str, Any]
    tags: list[str]
    git_commit: str | None = None
    notes: str | None = None  # MLflow's tag mlflow.note.content


# ------------------------------------------------------------------ jobs and the queue


@dataclass(frozen=True)
class JobSpec:
    """What to run: everything a new job needs. ``argv`` is run as is, never by a shell.

    ``config`` holds the submitted overrides (nested); the client deep-merges them over the
    script's own config. ``env`` adds variables to the job's environment.
    ``gpu_memory_bytes`` is the free memory each assigned GPU must have (checked with NVML).
    ``fail_on`` is the policy that says which of the doctor's diagnoses fail the job after
    an exit 0 (``errors``, ``none`` or a comma list of kinds: ``tracker.rules.fail_on``).
    """

    argv: list[str]
    project: str = "default"
    cwd: str | None = None
    # The project root on the submitting host (absolute): a worker given no --project-root
    # resolves a relative ``cwd`` there when that directory exists on its host.
    project_root: str | None = None
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
    # For a cluster scheduler (``tracker dispatcher``); a local worker ignores them.
    cpus: int | None = None
    memory_bytes: int | None = None
    sbatch: tuple[str, ...] = ()  # extra sbatch options, checked by tracker.rules.slurm
    fail_on: str = "errors"  # which diagnoses fail an exit 0 (tracker.rules.fail_on)
    # The code it runs (tracker.store.snapshots): written into a fresh directory per attempt;
    # None: the job runs from the worker's file system (``--no-snapshot``).
    snapshot_id: int | None = None


@dataclass(frozen=True)
class JobInfo:
    """A stored job. ``position`` is its 1-based place in the claim order while it is
    queued (``None`` otherwise, or when the read did not compute it)."""

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
    position: int | None = None
    project_root: str | None = None  # on the submitting host (see JobSpec.project_root)
    fail_on: str = "errors"  # which diagnoses fail an exit 0 (see JobSpec.fail_on)
    snapshot_id: int | None = None  # the code it runs (see JobSpec.snapshot_id)

    @property
    def gpus(self) -> int:
        return int(self.resources.get("gpus") or 0)

    @property
    def cpus(self) -> int | None:
        value = self.resources.get("cpus")
        return None if value is None else int(value)

    @property
    def memory_bytes(self) -> int | None:
        value = self.resources.get("memory_bytes")
        return None if value is None else int(value)

    @property
    def sbatch(self) -> tuple[str, ...]:
        return tuple(self.resources.get("sbatch") or ())

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
    external_id: str | None = None  # the cluster scheduler's id (Slurm's job id)


@dataclass(frozen=True)
class CancelResult:
    """``outcome``: ``cancelled`` (it was queued), ``cancel_requested`` (it is running: its
    worker stops it within about a second) or ``unchanged`` (it had already ended);
    ``status``: the job's status now."""

    outcome: str
    status: str


@dataclass(frozen=True)
class ClaimedJob:
    """A job this worker now holds: ``lease_token`` fences every later change it makes."""

    job: JobInfo
    lease_token: str
    attempt: int
    run_id: int


@dataclass(frozen=True)
class AttemptFence:
    """Which attempt of which job a process writes for (``TRACKER_JOB_ID``,
    ``TRACKER_ATTEMPT``): the store takes its writes into the job's run only while that job
    is ``running`` that attempt (:mod:`tracker.store.fencing`)."""

    job_id: int
    attempt: int


@dataclass(frozen=True)
class LeaseState:
    """What a poll tells a worker about a job it claimed."""

    held: bool
    cancel_requested: bool


@dataclass(frozen=True)
class FinishResult:
    """How ``finish`` left the job: its status and, when a retry was queued, when it may run."""

    status: str
    retry_at: float | None = None


@dataclass(frozen=True)
class LogChunk:
    id: int
    job_id: int | None  # None: console output of a run started by hand (no job)
    attempt: int
    stream: str  # "stdout", "stderr" or "meta" (the runner's own notes, e.g. trimmed output)
    at: float
    text: str


# ---------------------------------------------------------------- workers, schedules


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str | None = None
    total_bytes: int | None = None


@dataclass(frozen=True)
class WorkerInfo:
    """A registered worker. ``status``: ``running``, ``draining`` or ``stopped`` as the worker
    wrote it, or ``lost`` when a worker not stopped missed its heartbeats. ``executor``:
    ``local`` (``tracker worker`` runs the jobs) or the cluster scheduler a dispatcher hands
    them to (``slurm``; ``gpus`` is then empty: the scheduler has them)."""

    id: str
    host: str
    pid: int
    gpus: list[dict[str, Any]]
    max_jobs: int
    status: str
    started_at: float
    heartbeat_at: float
    running_jobs: list[int] = field(default_factory=list)
    executor: str = "local"


@dataclass(frozen=True)
class ScheduleInfo:
    """A cron schedule; ``spec`` holds the job fields under ``JobSpec``'s names and
    ``next_fire_at`` is None while paused."""

    id: int
    name: str
    cron: str
    timezone: str
    spec: dict[str, Any]
    paused: bool
    created_at: float
    last_fire_at: float | None
    next_fire_at: float | None = None


@dataclass(frozen=True)
class SweepInfo:
    """A sweep that learns (``tracker sweep --method``): its settings, where it stands and
    its best trial so far. ``space`` holds the ``-c`` override texts it searches; ``spec``
    the job fields every trial shares (``JobSpec``'s names). ``status`` is ``running``,
    ``stopped`` (by a person; ``tracker sweeps resume`` goes on) or ``finished``."""

    id: int
    name: str
    project: str
    status: str
    method: str
    metric: str
    goal: str
    objective: str
    trials: int
    parallel: int
    prune: str
    seed: int
    space: list[str]
    spec: dict[str, Any]
    created_at: float
    ended_at: float | None
    note: str | None
    counts: dict[str, int] = field(default_factory=dict)  # trials by state
    best: TrialInfo | None = None


@dataclass(frozen=True)
class TrialInfo:
    """One trial of a sweep: the params its sampler chose, the job that ran them and how it
    ended. ``state`` is ``running`` (queued or running), ``complete``, ``pruned`` (at
    ``pruned_step``) or ``failed``; ``value`` the objective (the pruned value for a pruned
    trial)."""

    sweep_id: int
    number: int
    params: dict[str, Any]
    state: str
    value: float | None
    job_id: int | None
    run_id: int | None
    job_status: str | None
    pruned_step: int | None
    note: str | None
    created_at: float
    ended_at: float | None


@dataclass(frozen=True)
class TokenInfo:
    """An access token as stored: never the token itself, only what it may do."""

    id: int
    name: str
    scope: str  # "log" or "admin"
    created_at: float
    revoked_at: float | None = None
    last_used_at: float | None = None
    # a job's own token: it may touch this run only, while this attempt of the job runs
    run_id: int | None = None
    job_id: int | None = None
    attempt: int | None = None


@dataclass(frozen=True)
class SessionInfo:
    """A live dashboard sign-in (see ``tracker.store.tokens.get_session``)."""

    scope: str
    token_id: int | None  # None: signed in with the token configured at start
    configured_mark: str | None
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class LoggedModelInfo:
    """An MLflow logged model: its files are artifacts of run ``run_id`` under
    ``mlflow-models/<id>/`` (``tracker.store.logged_models``)."""

    id: str
    project_id: int
    run_id: int
    name: str
    model_type: str | None
    status: str  # PENDING, READY or UPLOAD_FAILED
    status_message: str | None
    tags: dict[str, str]
    params: dict[str, str]
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class SnapshotInfo:
    """The code a job runs (``tracker.store.snapshots``): ``files`` files of ``bytes`` bytes
    under a project root named ``root_name``; the git commit and uncommitted diff when it was
    taken in a git work tree (a diff over a million characters is cut for display; the
    files themselves are exact)."""

    id: int
    digest: str
    files: int
    bytes: int
    git_commit: str | None
    git_diff: str | None
    root_name: str
    created_at: float
