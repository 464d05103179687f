"""Plain frozen dataclasses the store hands out (ORM rows never leave it) and the client
and the dashboard pass around: no SQLAlchemy, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RUN_STATUSES = ("queued", "running", "finished", "failed", "killed", "crashed")
FINAL_RUN_STATUSES = ("finished", "failed", "killed", "crashed")


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


@dataclass(frozen=True)
class RunMeta:
    """The run columns MLflow params and tags map onto (``tracker.web.mlflow_compat``)."""

    name: str
    config: dict[str, Any]
    tags: list[str]
    git_commit: str | None = None


@dataclass(frozen=True)
class LogChunk:
    id: int
    job_id: int
    attempt: int
    stream: str  # "stdout", "stderr" or "meta" (the runner's own notes, e.g. trimmed output)
    at: float
    text: str
