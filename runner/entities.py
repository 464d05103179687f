"""Plain frozen dataclasses the runner hands out: ORM rows never leave its store modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracker.errors import Conflict

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


@dataclass(frozen=True)
class JobSpec:
    """What to run: everything ``enqueue`` needs. ``argv`` is run as is, never by a shell.

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
class ClaimedJob:
    """A job this worker now holds: ``lease_token`` fences every later change it makes."""

    job: JobInfo
    lease_token: str
    attempt: int
    run_id: int


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
class FinishResult:
    """How ``finish`` left the job: its status and, when a retry was queued, when it may run."""

    status: str
    retry_at: float | None = None


@dataclass(frozen=True)
class LogChunk:
    id: int
    job_id: int
    attempt: int
    stream: str  # "stdout", "stderr" or "meta" (the runner's own notes, e.g. trimmed output)
    at: float
    text: str


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str | None = None
    total_bytes: int | None = None


@dataclass(frozen=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    gpus: list[dict[str, Any]]
    max_jobs: int
    status: str
    started_at: float
    heartbeat_at: float
    running_jobs: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ScheduleInfo:
    id: int
    name: str
    cron: str
    timezone: str
    spec: dict[str, Any]
    paused: bool
    created_at: float
    last_fire_at: float | None
    next_fire_at: float | None = None


class LeaseLost(Conflict):
    """The lease token no longer matches: another worker or the sweeper owns the job."""

    code = "lease_lost"


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff settings handed to :func:`runner.retry.next_attempt`."""

    base_delay_s: float = 10.0
    max_delay_s: float = 600.0


@dataclass(frozen=True)
class LeaseState:
    held: bool
    cancel_requested: bool


@dataclass(frozen=True)
class CancelResult:
    """``outcome``: ``cancelled`` (it was queued), ``cancel_requested`` (it is running: its
    worker stops it within about a second) or ``unchanged`` (it had already ended);
    ``status``: the job's status now."""

    outcome: str
    status: str
