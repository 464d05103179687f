"""SQL for the MLflow-compatible API that the core Store does not have: projects by id and
name (MLflow experiments), atomic read-modify-write of a run's params and tags, metric history
pages, runs of projects. ORM rows stop here; callers get frozen dataclasses.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from tracker.entities import MetricPoint, RunInfo
from tracker.errors import NotFound, StoreUnavailable
from tracker.store import Store
from tracker.store import models as m
from tracker.store.engine import is_unavailable, write_begin
from tracker.store.rows import dialect_insert
from tracker.web.mlflow_compat import MlflowError, RunMeta

__all__ = [
    "Project",
    "create_project",
    "create_run",
    "ensure_project",
    "find_project",
    "get_project",
    "metric_page",
    "metric_summaries",
    "run_ids_of_projects",
    "search_projects",
    "update_run_meta",
]


@dataclass(frozen=True)
class Project:
    id: int
    name: str
    created_at: float


@dataclass(frozen=True)
class MetricSummary:
    key: str
    last_step: int
    last_wall_time: float
    last_value: float | None


@contextlib.contextmanager
def _reading(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A read connection; an unreachable database becomes StoreUnavailable (503)."""
    try:
        with engine.connect() as conn:
            yield conn
    except sa.exc.OperationalError as exc:
        if is_unavailable(exc):
            raise StoreUnavailable(f"the store is unavailable: {exc.orig}") from exc
        raise


_PROJECT_COLUMNS = (m.Project.id, m.Project.name, m.Project.created_at)


def get_project(engine: sa.Engine, project_id: int) -> Project:
    """Raises NotFound (-> RESOURCE_DOES_NOT_EXIST) for an unknown id."""
    with _reading(engine) as conn:
        row = conn.execute(sa.select(*_PROJECT_COLUMNS).where(m.Project.id == project_id)).first()
    if row is None:
        raise NotFound(f"experiment {project_id} does not exist", field="experiment_id")
    return Project(*row)


def find_project(engine: sa.Engine, name: str) -> Project | None:
    with _reading(engine) as conn:
        row = conn.execute(sa.select(*_PROJECT_COLUMNS).where(m.Project.name == name)).first()
    return None if row is None else Project(*row)


def _insert_project(engine: sa.Engine, name: str, now: float) -> bool:
    """Insert the project unless it exists (the unique name decides); True if inserted."""
    statement = (
        dialect_insert(engine)(m.Project)
        .values(name=name, created_at=now)
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(m.Project.id)
    )
    with write_begin(engine) as conn:  # (rowcount is not reliable here on PostgreSQL)
        return conn.execute(statement).first() is not None


def create_project(engine: sa.Engine, name: str, now: float) -> Project:
    """Raises MlflowError RESOURCE_ALREADY_EXISTS when a project has this name."""
    if not _insert_project(engine, name, now):
        raise MlflowError(
            "RESOURCE_ALREADY_EXISTS", f"experiment {name!r} already exists", field="name"
        )
    return _found(find_project(engine, name), name)


def ensure_project(engine: sa.Engine, name: str, now: float) -> Project:
    """The project ``name``, created when missing (MLflow's Default experiment always exists)."""
    project = find_project(engine, name)
    if project is None:
        _insert_project(engine, name, now)
        project = find_project(engine, name)
    return _found(project, name)


def _found(project: Project | None, name: str) -> Project:
    if project is None:  # deleted between the insert and the read: nothing deletes projects
        raise NotFound(f"experiment {name!r} does not exist", field="name")
    return project


def search_projects(
    engine: sa.Engine, *, name: str | None, like: str | None, limit: int, offset: int
) -> list[Project]:
    """Projects, newest first; ``name`` matches exactly, ``like`` with SQL LIKE
    (case-insensitive)."""
    query = sa.select(*_PROJECT_COLUMNS).order_by(m.Project.id.desc()).limit(limit).offset(offset)
    if name is not None:
        query = query.where(m.Project.name == name)
    if like is not None:
        query = query.where(sa.func.lower(m.Project.name).like(like.lower()))
    with _reading(engine) as conn:
        return [Project(*row) for row in conn.execute(query)]


def run_ids_of_projects(
    engine: sa.Engine, project_ids: Sequence[int], *, limit: int, offset: int
) -> list[int]:
    """Ids of the projects' runs, newest first."""
    query = (
        sa.select(m.Run.id)
        .where(m.Run.project_id.in_(list(project_ids)))
        .order_by(m.Run.id.desc())
        .limit(limit)
        .offset(offset)
    )
    with _reading(engine) as conn:
        return list(conn.execute(query).scalars())


def create_run(store: Store, project: str, meta: RunMeta, now: float) -> RunInfo:
    """A running run with MLflow's name, params and tags. It has no heartbeat: MLflow clients
    send none, so the stale-run sweeper must not mark a quiet MLflow run crashed."""
    run = store.create_run(
        project, meta.name or None, meta.config, meta.tags, git_commit=meta.git_commit, now=now
    )
    store.update_run(run.id, heartbeat_at=None)
    return dataclasses.replace(run, heartbeat_at=None)


def update_run_meta(
    engine: sa.Engine, run_id: int, change: Callable[[RunMeta], RunMeta]
) -> RunMeta:
    """Apply ``change`` to a run's name, config, tags and git commit in one transaction (the
    row is locked, so concurrent params and tags of one run never overwrite each other).

    Raises:
        NotFound: no such run. Whatever ``change`` raises (nothing is written then).
    """
    columns = (m.Run.name, m.Run.config, m.Run.tags, m.Run.git_commit)
    with write_begin(engine) as conn:
        row = conn.execute(sa.select(*columns).where(m.Run.id == run_id).with_for_update()).first()
        if row is None:
            raise NotFound(f"run {run_id} does not exist", field="run_id")
        before = RunMeta(row.name, dict(row.config or {}), list(row.tags or []), row.git_commit)
        after = change(before)
        if after != before:
            values: dict[str, Any] = {
                "name": after.name,
                "config": after.config,
                "tags": after.tags,
                "git_commit": after.git_commit,
            }
            conn.execute(sa.update(m.Run).where(m.Run.id == run_id).values(**values))
    return after


def metric_page(
    engine: sa.Engine, run_id: int, key: str, *, after_step: int, limit: int
) -> list[MetricPoint]:
    """Up to ``limit`` points of one metric with step >= ``after_step``, by step."""
    query = (
        sa.select(m.MetricPoint.step, m.MetricPoint.wall_ms, m.MetricPoint.value)
        .join(m.MetricKey, m.MetricKey.id == m.MetricPoint.key_id)
        .where(
            m.MetricPoint.run_id == run_id,
            m.MetricKey.name == key,
            m.MetricPoint.step >= after_step,
        )
        .order_by(m.MetricPoint.step)
        .limit(limit)
    )
    with _reading(engine) as conn:
        return [MetricPoint(s, w / 1000.0, v) for s, w, v in conn.execute(query)]


def metric_summaries(engine: sa.Engine, run_ids: Sequence[int]) -> dict[int, list[MetricSummary]]:
    """The last point of every metric of each run (for MLflow's ``run.data.metrics``)."""
    if not run_ids:
        return {}
    query = (
        sa.select(
            m.MetricSummary.run_id,
            m.MetricKey.name,
            m.MetricSummary.last_step,
            m.MetricSummary.last_wall_ms,
            m.MetricSummary.last_value,
        )
        .join(m.MetricKey, m.MetricKey.id == m.MetricSummary.key_id)
        .where(m.MetricSummary.run_id.in_(list(run_ids)))
        .order_by(m.MetricSummary.run_id, m.MetricKey.name)
    )
    out: dict[int, list[MetricSummary]] = {run_id: [] for run_id in run_ids}
    with _reading(engine) as conn:
        for run_id, key, step, wall_ms, value in conn.execute(query):
            out[run_id].append(MetricSummary(key, step, wall_ms / 1000.0, value))
    return out
