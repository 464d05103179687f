"""``experiments/search``'s order (pure, no Flask): MLflow's ``order_by`` attributes
(``tracker.rules.mlflow_filter.parse_experiment_order_by``) as the store's project columns,
and where MLflow's Default experiment goes in a page while it is not stored yet.

A real MLflow server creates its Default experiment (id 0) with the database, so it is the
oldest experiment there is: while ours is not stored (no run logged to it), it is listed as
the oldest, with id 0 and the name ``Default``, at its place in the order asked. It is added
to the last page only (where the listing ends), so across pages ordered by name it may come
after a page that an ``A``-named experiment closes; one page (MLflow's default holds 1000)
is exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tracker.entities import ProjectInfo

__all__ = ["STORE_COLUMNS", "insert_default", "store_order"]

STORE_COLUMNS = {
    "name": "name",
    "experiment_id": "id",
    "creation_time": "created_at",
    "last_update_time": "updated_at",
}


def store_order(order: Sequence[tuple[str, bool]]) -> tuple[tuple[str, bool], ...]:
    """MLflow's ``(attribute, ascending)`` pairs as ``tracker.store.projects`` columns."""
    return tuple((STORE_COLUMNS[attribute], ascending) for attribute, ascending in order)


def _value(project: ProjectInfo, attribute: str, default: str, shown: str) -> Any:
    is_default = project.name == default
    if attribute == "name":
        return shown if is_default else project.name
    if attribute == "experiment_id":
        return 0 if is_default else project.id
    if attribute == "creation_time":
        return project.created_at
    return project.deleted_at if project.deleted_at is not None else project.created_at


def _before(
    a: ProjectInfo, b: ProjectInfo, order: Sequence[tuple[str, bool]], default: str, shown: str
) -> bool:
    for attribute, ascending in order:
        x, y = _value(a, attribute, default, shown), _value(b, attribute, default, shown)
        if x != y:
            return (x < y) if ascending else (x > y)
    return False


def insert_default(
    found: list[ProjectInfo],
    unstored_default: ProjectInfo,
    order: Sequence[tuple[str, bool]],
    *,
    shown_name: str,
) -> list[ProjectInfo]:
    """``found`` (one page, in ``order``) with the Default experiment that is not stored yet
    at its place: as the oldest (its times read as minus infinity), id 0, ``shown_name``."""
    oldest = ProjectInfo(
        unstored_default.id, unstored_default.name, -math.inf, None, unstored_default.tags
    )
    at = next(
        (
            i
            for i, p in enumerate(found)
            if _before(oldest, p, order, unstored_default.name, shown_name)
        ),
        len(found),
    )
    return [*found[:at], unstored_default, *found[at:]]
