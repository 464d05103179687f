"""Plain frozen dataclasses the runner hands out: ORM rows never leave its store modules.

The job, attempt, worker and schedule entities are shared with the dashboard and live in
``tracker.store``; they are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracker.errors import Conflict
from tracker.store.jobs import (
    FINAL_JOB_STATUSES,
    JOB_STATUSES,
    RUN_STATUS_FOR_JOB,
    CancelResult,
    JobAttemptInfo,
    JobInfo,
    JobSpec,
)
from tracker.store.schedules import ScheduleInfo
from tracker.store.workers import WorkerInfo

__all__ = [
    "FINAL_JOB_STATUSES",
    "JOB_STATUSES",
    "RUN_STATUS_FOR_JOB",
    "CancelResult",
    "ClaimedJob",
    "FinishResult",
    "GpuDevice",
    "JobAttemptInfo",
    "JobInfo",
    "JobSpec",
    "LeaseLost",
    "LeaseState",
    "RetryPolicy",
    "ScheduleInfo",
    "WorkerInfo",
]


@dataclass(frozen=True)
class ClaimedJob:
    """A job this worker now holds: ``lease_token`` fences every later change it makes."""

    job: JobInfo
    lease_token: str
    attempt: int
    run_id: int


@dataclass(frozen=True)
class FinishResult:
    """How ``finish`` left the job: its status and, when a retry was queued, when it may run."""

    status: str
    retry_at: float | None = None


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str | None = None
    total_bytes: int | None = None


class LeaseLost(Conflict):
    """The lease token no longer matches: another worker or the sweeper owns the job."""

    code = "lease_lost"


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff settings handed to :func:`tracker.runner.retry.next_attempt`."""

    base_delay_s: float = 10.0
    max_delay_s: float = 600.0


@dataclass(frozen=True)
class LeaseState:
    held: bool
    cancel_requested: bool
