"""Projects (MLflow's experiments): the one home of their rows -- created when a run or job
first names one (``project_id``), found by id or name, created, searched, renamed, tagged,
soft-deleted and restored with their runs (a deleted project keeps its name until ``tracker
gc`` purges it, :mod:`tracker.store.purge`).

ORM rows stop here; callers get :class:`tracker.entities.ProjectInfo`. Reads raise
StoreUnavailable (503) when the database cannot be reached, writes too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from tracker.entities import ProjectInfo
from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.rows import dialect_insert

if TYPE_CHECKING:
    from tracker.store.store import Store

__all__ = [
    "MAX_PROJECT_TAG_KEY",
    "MAX_PROJECT_TAG_VALUE",
    "create_project",
    "delete_project",
    "delete_project_tag",
    "ensure_project",
    "find_project",
    "get_project",
    "list_project_names",
    "project_id",
    "project_info",
    "rename_project",
    "restore_project",
    "search_projects",
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


def project_info(row: Any) -> ProjectInfo:
    """A row with the projects columns id, name, created_at, deleted_at, tags."""
    tags = row.tags if isinstance(row.tags, dict) else {}
    return ProjectInfo(row.id, row.name, row.created_at, row.deleted_at, dict(tags))


def project_id(conn: sa.Connection, name: str, now: float) -> int:
    """The id of the project called ``name``, created if missing (safe under concurrency).

    Called when a run or job is created in it: a soft-deleted project becomes active again
    (a new run shows it; its deleted runs stay deleted). The MLflow API refuses runs in a
    deleted experiment before it gets here, as MLflow does.
    """
    found = conn.execute(
        sa.select(m.ProjectRow.id, m.ProjectRow.deleted_at).where(m.ProjectRow.name == name)
    ).first()
    if found is not None:
        if found.deleted_at is not None:
            conn.execute(
                sa.update(m.ProjectRow).where(m.ProjectRow.id == found.id).values(deleted_at=None)
            )
        return int(found.id)
    insert = dialect_insert(conn)(m.ProjectRow).values(name=name, created_at=now)
    conn.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
    return int(
        conn.execute(sa.select(m.ProjectRow.id).where(m.ProjectRow.name == name)).scalar_one()
    )


def list_project_names(store: Store) -> list[str]:
    """Names of the projects that are not deleted, sorted."""
    query = (
        sa.select(m.ProjectRow.name)
        .where(m.ProjectRow.deleted_at.is_(None))
        .order_by(m.ProjectRow.name)
    )
    with read_conn(store.engine) as conn:
        return list(conn.execute(query).scalars())


def get_project(store: Store, project_id: int) -> ProjectInfo:
    """Raises NotFound (-> RESOURCE_DOES_NOT_EXIST) for an unknown id."""
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(*PROJECT_COLUMNS).where(m.ProjectRow.id == project_id)).first()
    if row is None:
        raise NotFound(f"experiment {project_id} does not exist", field="experiment_id")
    return project_info(row)


def find_project(store: Store, name: str) -> ProjectInfo | None:
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(*PROJECT_COLUMNS).where(m.ProjectRow.name == name)).first()
    return None if row is None else project_info(row)


def _insert_project(store: Store, name: str, now: float) -> bool:
    """Insert the project unless it exists (the unique name decides); True if inserted."""
    statement = (
        dialect_insert(store.engine)(m.ProjectRow)
        .values(name=name, created_at=now)
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(m.ProjectRow.id)
    )
    with write_begin(store.engine) as conn:  # (rowcount is not reliable here on PostgreSQL)
        return conn.execute(statement).first() is not None


def create_project(store: Store, name: str, now: float) -> ProjectInfo:
    """Raises Conflict when a project has this name (MLflow: RESOURCE_ALREADY_EXISTS)."""
    if not _insert_project(store, name, now):
        raise Conflict(f"experiment {name!r} already exists", field="name")
    return _found(find_project(store, name), name)


def ensure_project(store: Store, name: str, now: float) -> ProjectInfo:
    """The project ``name``, created when missing (MLflow's Default experiment always exists)."""
    project = find_project(store, name)
    if project is None:
        _insert_project(store, name, now)
        project = find_project(store, name)
    return _found(project, name)


def _found(project: ProjectInfo | None, name: str) -> ProjectInfo:
    if project is None:  # purged between the insert and the read
        raise NotFound(f"experiment {name!r} does not exist", field="name")
    return project


PROJECT_ORDER = ("name", "id", "created_at", "updated_at")  # updated: deleted, else created


def search_projects(
    store: Store,
    *,
    name: str | None,
    like: str | None,
    limit: int,
    offset: int,
    deleted: bool | None = False,
    order: Sequence[tuple[str, bool]] = (("id", False),),
    listed_as: tuple[str, str, int] | None = None,
) -> list[ProjectInfo]:
    """Projects, newest first unless ``order`` says otherwise: ``(column, ascending)`` pairs,
    columns of :data:`PROJECT_ORDER` (``updated_at``: when it was deleted, else created);
    ``name`` matches exactly, ``like`` with SQL LIKE (case-insensitive). ``deleted``: False
    active ones only, True deleted only, None all. ``listed_as`` (stored name, listed name,
    listed id) orders one project by what its caller lists it as (MLflow's Default
    experiment: stored ``default``, listed ``Default`` with id 0).

    Raises InvalidInput for a column not in :data:`PROJECT_ORDER`."""
    p = m.ProjectRow
    columns: dict[str, Any] = {  # SQL expressions, ordered by
        "name": p.name,
        "id": p.id,
        "created_at": p.created_at,
        "updated_at": sa.func.coalesce(p.deleted_at, p.created_at),
    }
    if listed_as is not None:
        stored, shown, shown_id = listed_as
        columns["name"] = sa.case((p.name == stored, sa.literal(shown)), else_=p.name)
        columns["id"] = sa.case((p.name == stored, sa.literal(shown_id)), else_=p.id)
    clauses = []
    for by, ascending in order:
        if by not in columns:
            raise InvalidInput(
                f"projects cannot be ordered by {by!r}: use {', '.join(PROJECT_ORDER)}",
                field="order_by",
            )
        clauses.append(columns[by].asc() if ascending else columns[by].desc())
    query = sa.select(*PROJECT_COLUMNS).order_by(*clauses, p.id.desc()).limit(limit).offset(offset)
    if deleted is not None:
        column = m.ProjectRow.deleted_at
        query = query.where(column.is_not(None) if deleted else column.is_(None))
    if name is not None:
        query = query.where(m.ProjectRow.name == name)
    if like is not None:
        query = query.where(sa.func.lower(m.ProjectRow.name).like(like.lower()))
    with read_conn(store.engine) as conn:
        return [project_info(row) for row in conn.execute(query)]


def _project_for_update(conn: sa.Connection, project_id: int) -> Any:
    row = conn.execute(
        sa.select(*PROJECT_COLUMNS).where(m.ProjectRow.id == project_id).with_for_update()
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
    return get_project(store, project_id)


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
    return get_project(store, project_id)


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
    return get_project(store, project_id)


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
    return get_project(store, project_id)


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
