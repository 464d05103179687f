"""Soft delete and restore of runs and projects, project renames and project tags.

A deleted run or project keeps every row; ``deleted_at`` hides it from listings (the runs
table, ``tracker runs ls``, the MLflow searches) until it is restored, or until ``tracker gc``
purges it after a grace period (:mod:`tracker.store.purge`). Deleting a project deletes its
active runs with the same time; restoring a project restores all of its runs (MLflow's
semantics for experiments). A deleted project keeps its name: no new project can take it
until it is purged.

Reads raise StoreUnavailable (503) when the database cannot be reached, writes too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tracker.entities import ProjectInfo
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store

__all__ = [
    "MAX_PROJECT_TAG_KEY",
    "MAX_PROJECT_TAG_VALUE",
    "delete_project",
    "delete_project_tag",
    "delete_runs",
    "project_info",
    "rename_project",
    "restore_project",
    "restore_runs",
    "set_project_tag",
]

MAX_PROJECT_TAG_KEY = 250  # MLflow's limits for experiment tags
MAX_PROJECT_TAG_VALUE = 5000
MAX_PROJECT_NAME = 200  # projects.name
PROJECT_COLUMNS = (
    m.ProjectRow.id,
    m.ProjectRow.name,
    m.ProjectRow.created_at,
    m.ProjectRow.deleted_at,
    m.ProjectRow.tags,
)
_COLUMNS = PROJECT_COLUMNS


def project_info(row: Any) -> ProjectInfo:
    """A row with the projects columns id, name, created_at, deleted_at, tags."""
    tags = row.tags if isinstance(row.tags, dict) else {}
    return ProjectInfo(row.id, row.name, row.created_at, row.deleted_at, dict(tags))


def _missing_runs(conn: sa.Connection, run_ids: Sequence[int]) -> list[int]:
    found = set(conn.execute(sa.select(m.RunRow.id).where(m.RunRow.id.in_(run_ids))).scalars())
    return sorted(set(run_ids) - found)


def _set_runs_deleted(store: Store, run_ids: Sequence[int], deleted_at: float | None) -> list[int]:
    ids = sorted(set(run_ids))
    if not ids:
        return []
    before = (
        m.RunRow.deleted_at.is_(None)
        if deleted_at is not None
        else m.RunRow.deleted_at.is_not(None)
    )
    with write_begin(store.engine) as conn:
        missing = _missing_runs(conn, ids)
        if missing:  # nothing changes when one id is wrong
            names = ", ".join(str(i) for i in missing[:10])
            raise NotFound(f"run(s) {names} do not exist", field="run")
        changed = conn.execute(
            sa.update(m.RunRow)
            .where(m.RunRow.id.in_(ids), before)
            .values(deleted_at=deleted_at)
            .returning(m.RunRow.id)
        ).scalars()
        return sorted(changed)


def delete_runs(store: Store, run_ids: Sequence[int], *, now: float | None = None) -> list[int]:
    """Soft-delete runs; returns the ids that were active (deleting a deleted run is a no-op).

    Raises:
        NotFound: one of the ids is no run (then nothing is deleted).
    """
    return _set_runs_deleted(store, run_ids, time.time() if now is None else now)


def restore_runs(store: Store, run_ids: Sequence[int]) -> list[int]:
    """Restore soft-deleted runs; returns the ids that were deleted.

    Raises:
        NotFound: one of the ids is no run (then nothing is restored).
    """
    return _set_runs_deleted(store, run_ids, None)


def _project_for_update(conn: sa.Connection, project_id: int) -> Any:
    row = conn.execute(
        sa.select(*_COLUMNS).where(m.ProjectRow.id == project_id).with_for_update()
    ).first()
    if row is None:
        raise NotFound(f"project {project_id} does not exist", field="experiment_id")
    return row


def delete_project(store: Store, project_id: int, *, now: float | None = None) -> ProjectInfo:
    """Soft-delete a project and its active runs (one time for all).

    Raises:
        NotFound: no such project. Conflict: it is deleted already.
    """
    now = time.time() if now is None else now
    with write_begin(store.engine) as conn:
        row = _project_for_update(conn, project_id)
        if row.deleted_at is not None:
            raise Conflict(f"project {row.name!r} is deleted already", field="experiment_id")
        conn.execute(
            sa.update(m.ProjectRow).where(m.ProjectRow.id == project_id).values(deleted_at=now)
        )
        conn.execute(
            sa.update(m.RunRow)
            .where(m.RunRow.project_id == project_id, m.RunRow.deleted_at.is_(None))
            .values(deleted_at=now)
        )
    return _get(store, project_id)


def restore_project(store: Store, project_id: int) -> ProjectInfo:
    """Restore a deleted project and all of its runs.

    Raises:
        NotFound: no such project. Conflict: it is not deleted.
    """
    with write_begin(store.engine) as conn:
        row = _project_for_update(conn, project_id)
        if row.deleted_at is None:
            raise Conflict(f"project {row.name!r} is not deleted", field="experiment_id")
        conn.execute(
            sa.update(m.ProjectRow).where(m.ProjectRow.id == project_id).values(deleted_at=None)
        )
        conn.execute(
            sa.update(m.RunRow).where(m.RunRow.project_id == project_id).values(deleted_at=None)
        )
    return _get(store, project_id)


def rename_project(store: Store, project_id: int, new_name: str) -> ProjectInfo:
    """Rename an active project (queued and past jobs of the project follow the name).

    Raises:
        NotFound: no such project. InvalidInput: a blank or too long name.
        Conflict: the project is deleted, or another project (deleted or not) has the name.
    """
    if not new_name.strip() or len(new_name) > MAX_PROJECT_NAME:
        raise InvalidInput(
            f"project name must be 1 to {MAX_PROJECT_NAME} characters, not {len(new_name)}",
            field="name",
        )
    with write_begin(store.engine) as conn:
        row = _project_for_update(conn, project_id)
        if row.deleted_at is not None:
            raise Conflict(f"project {row.name!r} is deleted: restore it first", field="name")
        old = row.name
        if old == new_name:
            return project_info(row)
        taken = conn.execute(
            sa.select(m.ProjectRow.deleted_at).where(m.ProjectRow.name == new_name)
        ).first()
        if taken is not None:
            state = "a deleted project" if taken.deleted_at is not None else "another project"
            raise Conflict(f"{state} is named {new_name!r}", field="name")
        conn.execute(
            sa.update(m.ProjectRow).where(m.ProjectRow.id == project_id).values(name=new_name)
        )
        conn.execute(sa.update(m.JobRow).where(m.JobRow.project == old).values(project=new_name))
    return _get(store, project_id)


def _change_tags(store: Store, project_id: int, key: str, value: str | None) -> ProjectInfo:
    with write_begin(store.engine) as conn:
        row = _project_for_update(conn, project_id)
        if row.deleted_at is not None:
            raise Conflict(f"project {row.name!r} is deleted: restore it first", field="tags")
        tags = dict(row.tags) if isinstance(row.tags, dict) else {}
        if value is None:
            if key not in tags:
                raise NotFound(f"project {row.name!r} has no tag {key!r}", field="key")
            del tags[key]
        else:
            tags[key] = value
        conn.execute(sa.update(m.ProjectRow).where(m.ProjectRow.id == project_id).values(tags=tags))
    return _get(store, project_id)


def set_project_tag(store: Store, project_id: int, key: str, value: str) -> ProjectInfo:
    """Set one tag of an active project.

    Raises:
        NotFound: no such project. Conflict: it is deleted.
        InvalidInput: an empty or too long key, a too long value.
    """
    if not key or len(key) > MAX_PROJECT_TAG_KEY:
        raise InvalidInput(
            f"tag key must be 1 to {MAX_PROJECT_TAG_KEY} characters, not {len(key)}", field="key"
        )
    if len(value) > MAX_PROJECT_TAG_VALUE:
        raise InvalidInput(
            f"tag {key!r}: the value has {len(value)} characters; at most {MAX_PROJECT_TAG_VALUE}",
            field="value",
        )
    return _change_tags(store, project_id, key, value)


def delete_project_tag(store: Store, project_id: int, key: str) -> ProjectInfo:
    """Remove one tag of an active project.

    Raises:
        NotFound: no such project, or no such tag. Conflict: the project is deleted.
    """
    return _change_tags(store, project_id, key, None)


def _get(store: Store, project_id: int) -> ProjectInfo:
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(*_COLUMNS).where(m.ProjectRow.id == project_id)).first()
    if row is None:
        raise NotFound(f"project {project_id} does not exist", field="experiment_id")
    return project_info(row)
