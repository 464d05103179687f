"""Named workspace views: the runs page's workspace layout saved under a name, per project.

A view's ``state`` is what the workspace keeps in the URL (chosen metrics, metric filter,
columns, smoothing, x axis, group-by and its aggregation, the table's query): a JSON object
of at most :data:`MAX_STATE_BYTES` bytes, whose values are strings, numbers, booleans, null
or lists of those (the dashboard writes it; the store checks its shape and size, never its
meaning, so an older view whose metric is gone still opens). ``project`` is ``""`` for a
view of all projects. Saving a name that exists replaces its state.

Every save and delete is one transaction that also writes a ``saved_view_events`` row (the
audit trail: ``created``/``updated``/``deleted``, the view, and ``by`` whom); that row
outlives the view.

Raises: InvalidInput (a name or state that breaks the rules; nothing written), NotFound
(no such view), StoreUnavailable (the database cannot be reached).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from tracker.errors import InvalidInput, NotFound
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store

__all__ = [
    "MAX_NAME",
    "MAX_STATE_BYTES",
    "MAX_VIEWS",
    "SavedView",
    "ViewEvent",
    "check_view",
    "delete_view",
    "list_views",
    "save_view",
    "view_events",
]

MAX_NAME = 100
MAX_STATE_BYTES = 16_384
MAX_VIEWS = 500  # per project: a listing stays one small answer
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class SavedView:
    id: int
    project: str
    name: str
    state: dict[str, Any]
    created_at: float
    updated_at: float
    updated_by: str | None


@dataclass(frozen=True)
class ViewEvent:
    at: float
    action: str
    project: str
    name: str
    by: str | None


def check_view(project: Any, name: Any, state: Any) -> tuple[str, str, dict[str, Any]]:
    """The view's project, name and state, checked.

    Raises:
        InvalidInput: a name that is not 1-100 characters on one line without surrounding
            spaces; a project that is not a string; a state that is not a JSON object of
            scalars and lists of scalars, or is over 16 KiB as JSON.
    """
    if not isinstance(project, str) or len(project) > 250:
        raise InvalidInput(
            'project must be a project name, or "" for all projects', field="project"
        )
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= MAX_NAME
        or name != name.strip()
        or any(ch in name for ch in "\r\n\t")
    ):
        raise InvalidInput(
            f"name: a view's name is 1-{MAX_NAME} characters on one line, without leading "
            "or trailing spaces",
            field="name",
        )
    if not isinstance(state, dict):
        raise InvalidInput("state must be a JSON object", field="state")
    for key, value in state.items():
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, _SCALARS) for v in items):
            raise InvalidInput(
                f"state.{key}: a value is a string, number, boolean, null or a list of those",
                field="state",
            )
    try:
        size = len(json.dumps(state, allow_nan=False).encode())
    except ValueError as exc:  # NaN or Infinity: not JSON, nothing a view needs
        raise InvalidInput("state: NaN and Infinity are not allowed", field="state") from exc
    if size > MAX_STATE_BYTES:
        raise InvalidInput(
            f"state is {size} bytes as JSON; a view keeps at most {MAX_STATE_BYTES}",
            field="state",
        )
    return project, name, state


def _view(row: Any) -> SavedView:
    return SavedView(
        id=row.id,
        project=row.project,
        name=row.name,
        state=dict(row.state),
        created_at=row.created_at,
        updated_at=row.updated_at,
        updated_by=row.updated_by,
    )


def list_views(store: Store, project: str | None = None) -> list[SavedView]:
    """The views of ``project`` (``""``: those of all projects; None: every view), by name.

    Raises StoreUnavailable (503).
    """
    query = sa.select(m.SavedViewRow).order_by(m.SavedViewRow.project, m.SavedViewRow.name)
    if project is not None:
        query = query.where(m.SavedViewRow.project == project)
    with read_conn(store.engine) as conn:
        return [_view(r) for r in conn.execute(query.limit(MAX_VIEWS))]


def _event(conn: sa.Connection, at: float, action: str, project: str, name: str, by: Any) -> None:
    conn.execute(
        sa.insert(m.SavedViewEventRow).values(
            at=at, action=action, project=project, name=name, by=by
        )
    )


def save_view(
    store: Store, project: Any, name: Any, state: Any, *, by: str | None = None
) -> SavedView:
    """Create the view, or replace the state of the view of that project and name.

    Raises:
        InvalidInput (400): :func:`check_view`; or the project already has 500 views.
        StoreUnavailable (503).
    """
    project, name, state = check_view(project, name, state)
    now = store.now()
    t = m.SavedViewRow
    with write_begin(store.engine) as conn:
        found = conn.execute(
            sa.select(t.id).where(t.project == project, t.name == name).with_for_update()
        ).scalar()
        if found is None:
            count = conn.execute(
                sa.select(sa.func.count()).select_from(t).where(t.project == project)
            ).scalar_one()
            if count >= MAX_VIEWS:
                raise InvalidInput(
                    f"name: this project already has {MAX_VIEWS} views; delete one first",
                    field="name",
                )
            conn.execute(
                sa.insert(t).values(
                    project=project,
                    name=name,
                    state=state,
                    created_at=now,
                    updated_at=now,
                    updated_by=by,
                )
            )
            _event(conn, now, "created", project, name, by)
        else:
            conn.execute(
                sa.update(t).where(t.id == found).values(state=state, updated_at=now, updated_by=by)
            )
            _event(conn, now, "updated", project, name, by)
        row = conn.execute(sa.select(t).where(t.project == project, t.name == name)).one()
    return _view(row)


def delete_view(store: Store, project: str, name: str, *, by: str | None = None) -> None:
    """Delete the view (its audit events stay).

    Raises:
        NotFound (404): no view of that name in that project.
        StoreUnavailable (503).
    """
    now = store.now()
    t = m.SavedViewRow
    with write_begin(store.engine) as conn:
        gone = conn.execute(sa.delete(t).where(t.project == project, t.name == name)).rowcount
        if not gone:
            where = f"project {project!r}" if project else "all projects"
            raise NotFound(f"no view named {name!r} for {where}", field="name")
        _event(conn, now, "deleted", project, name, by)


def view_events(store: Store, limit: int = 100) -> list[ViewEvent]:
    """The newest audit events of saved views first. Raises StoreUnavailable (503)."""
    e = m.SavedViewEventRow
    query = sa.select(e).order_by(e.at.desc(), e.id.desc()).limit(limit)
    with read_conn(store.engine) as conn:
        return [ViewEvent(r.at, r.action, r.project, r.name, r.by) for r in conn.execute(query)]
