"""MLflow logged models (``mlflow.<flavor>.log_model``): create, read, search, update, delete.

A model's files are artifacts of its source run under ``mlflow-models/<id>/`` (written by the
MLflow artifact proxy, ``web/views/mlflow_artifacts.py``); deleting a model deletes them.
ORM rows stop here; callers get :class:`tracker.entities.LoggedModelInfo`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from tracker.entities import LoggedModelInfo
from tracker.errors import NotFound
from tracker.store import models as m
from tracker.store.engine import read_conn, write_begin
from tracker.store.store import Store

__all__ = ["create", "delete", "get", "search", "update"]

_T = m.LoggedModelRow


def _info(row: Any) -> LoggedModelInfo:
    return LoggedModelInfo(
        id=row.id,
        project_id=row.project_id,
        run_id=row.run_id,
        name=row.name,
        model_type=row.model_type,
        status=row.status,
        status_message=row.status_message,
        tags=dict(row.tags or {}),
        params=dict(row.params or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def create(store: Store, info: LoggedModelInfo) -> LoggedModelInfo:
    """Insert ``info`` (its id is new: made by ``web/core/mlflow_artifacts.new_model_id``).

    Raises:
        NotFound: its run does not exist.
    """
    with write_begin(store.engine) as conn:
        if conn.execute(sa.select(m.RunRow.id).where(m.RunRow.id == info.run_id)).first() is None:
            raise NotFound(f"run {info.run_id} does not exist", field="source_run_id")
        conn.execute(
            sa.insert(_T).values(
                id=info.id,
                project_id=info.project_id,
                run_id=info.run_id,
                name=info.name,
                model_type=info.model_type,
                status=info.status,
                status_message=info.status_message,
                tags=info.tags,
                params=info.params,
                created_at=info.created_at,
                updated_at=info.updated_at,
            )
        )
    return info


def get(store: Store, model_id: str) -> LoggedModelInfo:
    """Raises NotFound (-> RESOURCE_DOES_NOT_EXIST) for an unknown id."""
    with read_conn(store.engine) as conn:
        row = conn.execute(sa.select(_T).where(_T.id == model_id)).first()
    if row is None:
        raise NotFound(f"logged model {model_id!r} does not exist", field="model_id")
    return _info(row)


def search(
    store: Store,
    project_ids: Sequence[int],
    *,
    run_id: int | None = None,
    name: str | None = None,
    limit: int,
    offset: int,
) -> list[LoggedModelInfo]:
    """Models of the projects, newest first; optionally of one source run and one name."""
    query = sa.select(_T).where(_T.project_id.in_(list(project_ids)))
    if run_id is not None:
        query = query.where(_T.run_id == run_id)
    if name is not None:
        query = query.where(_T.name == name)
    query = query.order_by(_T.created_at.desc(), _T.id).limit(limit).offset(offset)
    with read_conn(store.engine) as conn:
        return [_info(row) for row in conn.execute(query)]


def update(
    store: Store, model_id: str, change: Callable[[LoggedModelInfo], LoggedModelInfo]
) -> LoggedModelInfo:
    """Apply ``change`` to a model's status, tags and params in one transaction (row locked).

    Raises:
        NotFound: no such model. Whatever ``change`` raises (nothing is written then).
    """
    with write_begin(store.engine) as conn:
        row = conn.execute(sa.select(_T).where(_T.id == model_id).with_for_update()).first()
        if row is None:
            raise NotFound(f"logged model {model_id!r} does not exist", field="model_id")
        after = change(_info(row))
        conn.execute(
            sa.update(_T)
            .where(_T.id == model_id)
            .values(
                status=after.status,
                status_message=after.status_message,
                tags=after.tags,
                params=after.params,
                updated_at=after.updated_at,
            )
        )
    return after


def delete(store: Store, model_id: str) -> LoggedModelInfo:
    """Delete the model's row (its files are the caller's: they are run artifacts).

    Raises:
        NotFound: no such model.
    """
    with write_begin(store.engine) as conn:
        row = conn.execute(sa.select(_T).where(_T.id == model_id)).first()
        if row is None:
            raise NotFound(f"logged model {model_id!r} does not exist", field="model_id")
        conn.execute(sa.delete(_T).where(_T.id == model_id))
    return _info(row)
