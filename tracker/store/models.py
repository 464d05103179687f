"""SQLAlchemy 2 models: the one MetaData that Alembic migrates.

Timestamps are stored as float seconds since the epoch (UTC): comparisons such as
``lease_expires_at < now`` are then plain numeric comparisons on every dialect.
Metric values keep NaN as SQL NULL (SQLite cannot store NaN; NULL also keeps MIN/MAX
aggregates honest); +Inf and -Inf are stored natively on both dialects, and so is the sign
of -0.0 (:class:`SignedDouble`).
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JsonType = sa.JSON().with_variant(JSONB(), "postgresql")


class SignedDouble(sa.Float):  # type: ignore[type-arg]
    """A double precision float that keeps the sign of -0.0 on SQLite too.

    A SQLite column declared REAL (or FLOAT, DOUBLE) stores a float with no fractional part
    as an integer, and the integer 0 has no sign: -0.0 came back as +0.0. Declared ``BLOB``
    the column has no type affinity, so SQLite stores the 8-byte double it is given. Values
    are always bound as doubles (the raw ingest SQL casts; see ``tracker.store.points``), so
    the column never holds anything else. PostgreSQL: plain ``double precision``.
    """


@compiles(SignedDouble, "sqlite")
def _signed_double_on_sqlite(type_: SignedDouble, compiler: Any, **kw: Any) -> str:
    return "BLOB"


class MetricValue(sa.types.TypeDecorator[float]):
    """A double that keeps NaN (written as NULL, read back as NaN) and the sign of zero."""

    impl = SignedDouble(precision=53)
    cache_ok = True

    def process_bind_param(self, value: float | None, dialect: sa.Dialect) -> float | None:
        if value is None or math.isnan(value):
            return None
        return float(value)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> float:
        return math.nan if value is None else float(value)


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class ProjectRow(Base):
    __tablename__ = "projects"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200), unique=True)
    created_at: Mapped[float]
    # soft delete (tracker.store.lifecycle): NULL while active; MLflow experiment tags
    deleted_at: Mapped[float | None]
    tags: Mapped[Any | None] = mapped_column(JsonType)


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(sa.ForeignKey("projects.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(250))
    status: Mapped[str] = mapped_column(sa.String(16), index=True)
    config: Mapped[Any] = mapped_column(JsonType)
    tags: Mapped[Any] = mapped_column(JsonType)
    created_at: Mapped[float] = mapped_column(index=True)
    started_at: Mapped[float | None]
    ended_at: Mapped[float | None]
    heartbeat_at: Mapped[float | None]
    host: Mapped[str | None] = mapped_column(sa.String(255))
    pid: Mapped[int | None]
    git_commit: Mapped[str | None] = mapped_column(sa.String(64))
    command: Mapped[Any | None] = mapped_column(JsonType)
    exit_code: Mapped[int | None]
    failure_class: Mapped[str | None] = mapped_column(sa.String(64))
    failure_hint: Mapped[str | None] = mapped_column(sa.Text)
    error: Mapped[str | None] = mapped_column(sa.Text)
    # soft delete (tracker.store.lifecycle): NULL while active
    deleted_at: Mapped[float | None] = mapped_column(index=True)
    # the last write of a run without heartbeats (MLflow's): the idle sweep reads it
    written_at: Mapped[float | None]
    # a person's notes on the run (MLflow's tag mlflow.note.content) and star
    # (tracker.store.annotations)
    notes: Mapped[str | None] = mapped_column(sa.Text)
    starred: Mapped[bool] = mapped_column(default=False, server_default=sa.false(), index=True)


class MetricKeyRow(Base):
    __tablename__ = "metric_keys"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(250), unique=True)


class MetricPointRow(Base):
    """One value of one metric at one step (several, by ``seq``, when logged through MLflow).
    WITHOUT ROWID on SQLite: the key is the row.

    No foreign keys on purpose: per-row referential checks halve PostgreSQL ingest, and
    the only writer (the run's own writer, via ``metrics.write_points``) uses ids it has
    just created or interned. ``store.purge`` removes a purged run's points explicitly.
    """

    __tablename__ = "metric_points"
    __table_args__ = {"sqlite_with_rowid": False}  # noqa: RUF012 - read once by SQLAlchemy
    run_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    key_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    step: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    # 0 for the tracker's own writes (the same step again overwrites it); the MLflow route
    # appends every further value at a step with the next seq (MLflow keeps them all).
    seq: Mapped[int] = mapped_column(
        primary_key=True, autoincrement=False, default=0, server_default=sa.text("0")
    )
    wall_ms: Mapped[int] = mapped_column(sa.BigInteger)
    value: Mapped[float] = mapped_column(MetricValue, nullable=True)


class MetricSummaryRow(Base):
    """Last value per run and key, kept up to date on ingest for run tables."""

    __tablename__ = "metric_summaries"
    run_id: Mapped[int] = mapped_column(
        sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    key_id: Mapped[int] = mapped_column(sa.ForeignKey("metric_keys.id"), primary_key=True)
    last_step: Mapped[int] = mapped_column(sa.BigInteger)
    last_wall_ms: Mapped[int] = mapped_column(sa.BigInteger)
    last_value: Mapped[float] = mapped_column(MetricValue, nullable=True)
    __table_args__ = (sa.Index("ix_metric_summaries_key_value", "key_id", "last_value"),)


class MetricChunkRow(Base):
    """Sealed points of one metric series (``tracker.rules.chunk_codec``,
    docs/CHUNK_FORMAT.md), keyed by the first step they hold; the other columns are the
    chunk's header (the bucket rule over its points, as ``metric_rollups`` keeps it), so a
    chart at coarse zoom need not decode it. Chunks of one series never share a step; a
    newer row of ``metric_points`` at a sealed (step, seq) wins over the chunk's
    (``tracker.store.chunks``). No foreign keys, like ``metric_points``.
    """

    __tablename__ = "metric_chunks"
    __table_args__ = {"sqlite_with_rowid": False}  # noqa: RUF012 - read once by SQLAlchemy
    run_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    key_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    first_step: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    last_step: Mapped[int] = mapped_column(sa.BigInteger)
    count: Mapped[int] = mapped_column(sa.BigInteger)
    min_value: Mapped[float | None] = mapped_column(SignedDouble(precision=53), nullable=True)
    max_value: Mapped[float | None] = mapped_column(SignedDouble(precision=53), nullable=True)
    last_value: Mapped[float] = mapped_column(MetricValue, nullable=True)
    last_wall_ms: Mapped[int] = mapped_column(sa.BigInteger)
    nan_count: Mapped[int] = mapped_column(sa.BigInteger)
    posinf_count: Mapped[int] = mapped_column(sa.BigInteger)
    neginf_count: Mapped[int] = mapped_column(sa.BigInteger)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)


class MetricRollupRow(Base):
    """Pre-aggregated buckets of one metric series, kept up to date on ingest.

    ``width`` is the bucket width in steps (one of ``tracker.store.rollups.LEVELS``) and
    ``bucket`` is ``step // width`` (``tracker.rules.downsample.level_bucket``).
    ``min_value``/``max_value`` are over finite values only (NULL when the bucket has none);
    ``last_value`` is the value at ``last_step`` (NaN kept).
    Like ``metric_points``, no foreign keys: it is written on the ingest hot path.
    """

    __tablename__ = "metric_rollups"
    __table_args__ = {"sqlite_with_rowid": False}  # noqa: RUF012 - read once by SQLAlchemy
    run_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    key_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    width: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    bucket: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    first_step: Mapped[int] = mapped_column(sa.BigInteger)
    last_step: Mapped[int] = mapped_column(sa.BigInteger)
    last_wall_ms: Mapped[int] = mapped_column(sa.BigInteger)
    min_value: Mapped[float | None] = mapped_column(SignedDouble(precision=53), nullable=True)
    max_value: Mapped[float | None] = mapped_column(SignedDouble(precision=53), nullable=True)
    last_value: Mapped[float] = mapped_column(MetricValue, nullable=True)
    count: Mapped[int] = mapped_column(sa.BigInteger)
    nan_count: Mapped[int] = mapped_column(sa.BigInteger)
    posinf_count: Mapped[int] = mapped_column(sa.BigInteger)
    neginf_count: Mapped[int] = mapped_column(sa.BigInteger)


class CheckpointRow(Base):
    __tablename__ = "checkpoints"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(sa.BigInteger)
    path: Mapped[str] = mapped_column(sa.Text)
    bytes: Mapped[int] = mapped_column(sa.BigInteger)
    sha256: Mapped[str] = mapped_column(sa.String(64))
    metrics: Mapped[Any] = mapped_column(JsonType)
    state: Mapped[str] = mapped_column(sa.String(16))
    created_at: Mapped[float]
    __table_args__ = (sa.Index("ix_checkpoints_run_step", "run_id", "step"),)


class ArtifactRow(Base):
    """A file of a run (``tracker.store.artifacts``): its bytes are the blob ``sha256`` in the
    artifact root, shared by every row with the same hash."""

    __tablename__ = "artifacts"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(sa.String(2048))
    size: Mapped[int] = mapped_column(sa.BigInteger)
    sha256: Mapped[str] = mapped_column(sa.String(64), index=True)
    media_type: Mapped[str] = mapped_column(sa.String(255))
    step: Mapped[int | None] = mapped_column(sa.BigInteger)
    created_at: Mapped[float]
    meta: Mapped[Any] = mapped_column(JsonType)
    # the stored token that uploaded it (per-token quota); NULL: written without one
    token_id: Mapped[int | None] = mapped_column(index=True)
    __table_args__ = (sa.UniqueConstraint("run_id", "path"),)


class SnapshotRow(Base):
    """The code a job runs (``tracker.store.snapshots``): a file list whose bytes are blobs
    of the artifact root, stored once per distinct tree (``digest``), shared by every job
    submitted with it."""

    __tablename__ = "snapshots"
    id: Mapped[int] = mapped_column(primary_key=True)
    digest: Mapped[str] = mapped_column(sa.String(64), unique=True)
    files: Mapped[int]
    bytes: Mapped[int] = mapped_column(sa.BigInteger)
    git_commit: Mapped[str | None] = mapped_column(sa.String(64))
    git_diff: Mapped[str | None] = mapped_column(sa.Text)
    root_name: Mapped[str] = mapped_column(sa.String(255))
    created_at: Mapped[float]


class SnapshotFileRow(Base):
    """One file of a snapshot: its path (``/``-separated, relative to the project root),
    blob, size and whether it is executable."""

    __tablename__ = "snapshot_files"
    snapshot_id: Mapped[int] = mapped_column(
        sa.ForeignKey("snapshots.id", ondelete="CASCADE"), primary_key=True
    )
    path: Mapped[str] = mapped_column(sa.String(1024), primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), index=True)
    size: Mapped[int] = mapped_column(sa.BigInteger)
    executable: Mapped[bool] = mapped_column(default=False)


class RunEventRow(Base):
    __tablename__ = "run_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    at: Mapped[float]
    kind: Mapped[str] = mapped_column(sa.String(32))
    message: Mapped[str] = mapped_column(sa.Text)
    data: Mapped[Any | None] = mapped_column(JsonType)
    # diagnoses only (tracker.store.diagnoses): the health code and "code:metric", unique
    # per run so that re-running the doctor updates instead of adding
    code: Mapped[str | None] = mapped_column(sa.String(40))
    dedupe_key: Mapped[str | None] = mapped_column(sa.String(300))
    __table_args__ = (
        sa.Index("ix_run_events_run_at", "run_id", "at"),
        sa.Index("uq_run_events_run_dedupe_key", "run_id", "dedupe_key", unique=True),
        sa.Index("ix_run_events_code", "code"),
    )


class LoggedModelRow(Base):
    """An MLflow logged model (``mlflow.<flavor>.log_model``): metadata here, its files are
    artifacts of its source run under ``mlflow-models/<id>/`` (tracker.store.logged_models)."""

    __tablename__ = "logged_models"
    id: Mapped[str] = mapped_column(sa.String(34), primary_key=True)
    project_id: Mapped[int] = mapped_column(sa.ForeignKey("projects.id"), index=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(sa.String(250))
    model_type: Mapped[str | None] = mapped_column(sa.String(250))
    status: Mapped[str] = mapped_column(sa.String(16))
    status_message: Mapped[str | None] = mapped_column(sa.Text)
    tags: Mapped[Any] = mapped_column(JsonType)
    params: Mapped[Any] = mapped_column(JsonType)
    created_at: Mapped[float]
    updated_at: Mapped[float]


class WorkerRow(Base):
    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(sa.String(120), primary_key=True)
    host: Mapped[str] = mapped_column(sa.String(255))
    pid: Mapped[int]
    gpus: Mapped[Any] = mapped_column(JsonType)
    max_jobs: Mapped[int]
    status: Mapped[str] = mapped_column(sa.String(16))
    started_at: Mapped[float]
    heartbeat_at: Mapped[float]
    # "local" (tracker worker) or the cluster scheduler a dispatcher hands jobs to ("slurm")
    executor: Mapped[str] = mapped_column(sa.String(32), default="local", server_default="local")


class JobRow(Base):
    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(primary_key=True)
    project: Mapped[str] = mapped_column(sa.String(200))
    status: Mapped[str] = mapped_column(sa.String(16))
    priority: Mapped[int] = mapped_column(default=0)
    argv: Mapped[Any] = mapped_column(JsonType)
    cwd: Mapped[str | None] = mapped_column(sa.Text)
    project_root: Mapped[str | None] = mapped_column(sa.Text)
    config: Mapped[Any] = mapped_column(JsonType)
    resources: Mapped[Any] = mapped_column(JsonType)
    env: Mapped[Any] = mapped_column(JsonType)
    timeout_s: Mapped[float | None]
    max_retries: Mapped[int] = mapped_column(default=0)
    retry_on_failure: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    # which diagnoses fail an exit 0: tracker.rules.fail_on's canonical text
    fail_on: Mapped[str] = mapped_column(sa.String(200), default="errors", server_default="errors")
    attempt: Mapped[int] = mapped_column(default=0)
    nproc_per_node: Mapped[int | None]
    not_before: Mapped[float | None]
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    lease_owner: Mapped[str | None] = mapped_column(sa.String(120))
    lease_token: Mapped[str | None] = mapped_column(sa.String(64))
    lease_expires_at: Mapped[float | None]
    run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runs.id", ondelete="SET NULL"))
    schedule_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("schedules.id", ondelete="SET NULL")
    )
    parent_job_id: Mapped[int | None] = mapped_column(index=True)  # a job page lists clones
    exit_code: Mapped[int | None]
    failure_class: Mapped[str | None] = mapped_column(sa.String(64))
    failure_hint: Mapped[str | None] = mapped_column(sa.Text)
    pending_reason: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[float]
    started_at: Mapped[float | None]
    ended_at: Mapped[float | None]
    # the code it runs (tracker.store.snapshots); NULL: from the worker's file system
    snapshot_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("snapshots.id", ondelete="RESTRICT"), index=True
    )
    __table_args__ = (
        sa.Index("ix_jobs_claim", "status", "priority", "id"),
        sa.Index("ix_jobs_run_id", "run_id"),
        sa.Index("ix_jobs_lease", "status", "lease_expires_at"),
    )


class JobAttemptRow(Base):
    __tablename__ = "job_attempts"
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int]
    worker_id: Mapped[str | None] = mapped_column(sa.String(120))
    status: Mapped[str] = mapped_column(sa.String(16))
    started_at: Mapped[float]
    ended_at: Mapped[float | None]
    exit_code: Mapped[int | None]
    failure_class: Mapped[str | None] = mapped_column(sa.String(64))
    failure_hint: Mapped[str | None] = mapped_column(sa.Text)
    resume_checkpoint: Mapped[str | None] = mapped_column(sa.Text)
    # the cluster scheduler's id of this attempt (Slurm's job id); None for local attempts
    external_id: Mapped[str | None] = mapped_column(sa.String(64))
    __table_args__ = (sa.UniqueConstraint("job_id", "attempt"),)


class JobLogChunkRow(Base):
    __tablename__ = "job_log_chunks"
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int]
    stream: Mapped[str] = mapped_column(sa.String(8))
    at: Mapped[float]
    text: Mapped[str] = mapped_column(sa.Text)
    __table_args__ = (sa.Index("ix_job_log_chunks_job_id_id", "job_id", "id"),)


class RunLogChunkRow(Base):
    """Console output of a run started by hand, teed by the client (tracker/client/console.py)."""

    __tablename__ = "run_log_chunks"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    stream: Mapped[str] = mapped_column(sa.String(8))
    at: Mapped[float]
    text: Mapped[str] = mapped_column(sa.Text)
    __table_args__ = (sa.Index("ix_run_log_chunks_run_id_id", "run_id", "id"),)


class ScheduleRow(Base):
    __tablename__ = "schedules"
    id: Mapped[int] = mapped_column(primary_key=True)
    # unique: a name tells schedules apart in `tracker schedule ls` and the dashboard
    name: Mapped[str] = mapped_column(sa.String(200), unique=True)
    cron: Mapped[str] = mapped_column(sa.String(120))
    timezone: Mapped[str] = mapped_column(sa.String(64), default="UTC")
    spec: Mapped[Any] = mapped_column(JsonType)
    paused: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[float]
    last_fire_at: Mapped[float | None]


class ScheduleFireRow(Base):
    """One row per (schedule, fire time): the unique key makes each fire enqueue exactly once."""

    __tablename__ = "schedule_fires"
    schedule_id: Mapped[int] = mapped_column(
        sa.ForeignKey("schedules.id", ondelete="CASCADE"), primary_key=True
    )
    fire_at: Mapped[float] = mapped_column(primary_key=True)
    job_id: Mapped[int | None] = mapped_column(sa.ForeignKey("jobs.id", ondelete="SET NULL"))


class SweepRow(Base):
    """A sweep that learns (``tracker.store.sweeps``): the search, its budget and the job
    spec every trial shares; the trials are ``sweep_trials`` rows."""

    __tablename__ = "sweeps"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    project: Mapped[str] = mapped_column(sa.String(200))
    status: Mapped[str] = mapped_column(sa.String(16))  # running | stopped | finished
    method: Mapped[str] = mapped_column(sa.String(16))
    metric: Mapped[str] = mapped_column(sa.String(250))
    goal: Mapped[str] = mapped_column(sa.String(8))
    objective: Mapped[str] = mapped_column(sa.String(8))  # last | best
    trials: Mapped[int]
    parallel: Mapped[int]
    prune: Mapped[str] = mapped_column(sa.String(16))
    seed: Mapped[int] = mapped_column(sa.BigInteger)
    space: Mapped[Any] = mapped_column(JsonType)  # the -c override texts
    spec: Mapped[Any] = mapped_column(JsonType)  # the job fields (schedules' spec_to_dict)
    created_at: Mapped[float]
    ended_at: Mapped[float | None]
    note: Mapped[str | None] = mapped_column(sa.Text)
    __table_args__ = (sa.Index("ix_sweeps_status", "status"),)


class SweepTrialRow(Base):
    """One trial of a sweep. The key (sweep, number) is what makes a trial queued exactly
    once however many controllers run: the row and its job are inserted together."""

    __tablename__ = "sweep_trials"
    sweep_id: Mapped[int] = mapped_column(
        sa.ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    job_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("jobs.id", ondelete="SET NULL"), index=True
    )
    params: Mapped[Any] = mapped_column(JsonType)
    state: Mapped[str] = mapped_column(sa.String(16))  # running | complete | pruned | failed
    value: Mapped[float | None]  # finite or NULL: a NaN objective fails the trial
    pruned_step: Mapped[int | None] = mapped_column(sa.BigInteger)
    note: Mapped[str | None] = mapped_column(sa.Text)
    # the sampler's and pruner's own bookkeeping (Optuna's trial system attrs) and the
    # metric's values at its steps, kept when the trial ends (thinned, see sweeps.py)
    system_attrs: Mapped[Any] = mapped_column(JsonType)
    intermediate: Mapped[Any] = mapped_column(JsonType)
    created_at: Mapped[float]
    ended_at: Mapped[float | None]


class TokenRow(Base):
    """An access token: only its sha256 is kept (see :mod:`tracker.store.tokens`)."""

    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    scope: Mapped[str] = mapped_column(sa.String(16))
    sha256: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_at: Mapped[float]
    revoked_at: Mapped[float | None]
    last_used_at: Mapped[float | None]
    # a job's own token (tracker.store.tokens.create_job_token): valid for this run only,
    # and only while this attempt of the job runs; NULL for a token a person created
    run_id: Mapped[int | None]
    job_id: Mapped[int | None] = mapped_column(index=True)
    attempt: Mapped[int | None]


class AuthSessionRow(Base):
    """A dashboard sign-in. ``id`` is the sha256 of the random session id in the cookie;
    ``token_id`` is the stored token signed in with, NULL for the token configured at start
    (then ``configured_mark`` ties the session to that token)."""

    __tablename__ = "auth_sessions"
    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    token_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("tokens.id", ondelete="CASCADE"), index=True
    )
    configured_mark: Mapped[str | None] = mapped_column(sa.String(64))
    scope: Mapped[str] = mapped_column(sa.String(16))
    created_at: Mapped[float]
    expires_at: Mapped[float] = mapped_column(index=True)
    revoked_at: Mapped[float | None]


class InstallationSecretRow(Base):
    """Random per-installation secrets (the session-signing key), generated once."""

    __tablename__ = "installation_secrets"
    name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    value: Mapped[str] = mapped_column(sa.String(128))
    created_at: Mapped[float]


metadata = Base.metadata


class SavedViewRow(Base):
    """A named workspace view (``tracker.store.views``): the layout of the runs page's
    workspace -- chosen metrics, columns, smoothing, x axis, group-by -- and the table's
    query, as the JSON ``state``. ``project`` is ``""`` for a view of all projects."""

    __tablename__ = "saved_views"
    __table_args__ = (sa.UniqueConstraint("project", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    project: Mapped[str] = mapped_column(sa.String(250))
    name: Mapped[str] = mapped_column(sa.String(100))
    state: Mapped[dict[str, Any]] = mapped_column(JsonType)
    created_at: Mapped[float]
    updated_at: Mapped[float]
    updated_by: Mapped[str | None] = mapped_column(sa.String(200))


class SavedViewEventRow(Base):
    """The audit trail of saved views: who saved or deleted which view, when. Kept when the
    view is deleted (no foreign key)."""

    __tablename__ = "saved_view_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[float] = mapped_column(index=True)
    action: Mapped[str] = mapped_column(sa.String(16))  # "created", "updated", "deleted"
    project: Mapped[str] = mapped_column(sa.String(250))
    name: Mapped[str] = mapped_column(sa.String(100))
    by: Mapped[str | None] = mapped_column(sa.String(200))


class ProfileRow(Base):
    """A request to profile a running run's next ``steps`` steps, and what came of it
    (``tracker.store.profiles``). The run's client learns of it from its heartbeat's answer,
    stores each rank's trace as an artifact (``traces``) and reports here; the summary is
    computed from the trace on the server, once, when first read."""

    __tablename__ = "profiles"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    steps: Mapped[int]
    ranks: Mapped[str] = mapped_column(sa.String(8))  # "0" or "all"
    # requested -> running -> stored | failed; requested/running are "open" (one per run)
    state: Mapped[str] = mapped_column(sa.String(16))
    requested_at: Mapped[float]
    requested_by: Mapped[str | None] = mapped_column(sa.String(200))
    started_at: Mapped[float | None]
    ended_at: Mapped[float | None]
    first_step: Mapped[int | None] = mapped_column(sa.BigInteger)
    last_step: Mapped[int | None] = mapped_column(sa.BigInteger)
    expected: Mapped[int | None]  # traces to wait for: 1, or the world size under "all"
    traces: Mapped[list[Any]] = mapped_column(JsonType)  # [{"rank", "path", "bytes"}]
    message: Mapped[str | None] = mapped_column(sa.Text)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
