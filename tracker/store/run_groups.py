"""The runs table grouped by a config key or a tag (``GET /api/v1/runs?group=config.lr``).

One read: the runs the table's search selects (its query, filters and sort), at most
:data:`MAX_GROUPED_RUNS` of them from the first, with the group-by config key read as one
more config column; then the pure rule :func:`tracker.rules.group_series.group_table` makes
the group rows (status counts, and per metric column the mean, min and max of the members'
last values). Grouping has no pages: the table shows every group with its members, so the
cap bounds the work and the answer; ``truncated`` says when more runs matched.

Failure modes: those of :func:`tracker.store.run_search.search_runs` (400 for a bad query,
sort or filter, 503 when the database cannot be reached), and ``GroupError`` (400,
``invalid_group``) for a group-by key that is not ``config.<key>``, ``tag.<key>`` or ``tags``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tracker.rules.group_series import TableGroup, TableRun, check_group_by, group_table
from tracker.store.run_search import MAX_LIMIT, RunHit, RunSearch, search_runs
from tracker.store.store import Store

__all__ = ["MAX_GROUPED_RUNS", "GroupedRuns", "search_groups"]

MAX_GROUPED_RUNS = MAX_LIMIT  # one search page: the table's largest


@dataclass(frozen=True)
class GroupedRuns:
    """The runs read (table order), their groups, how many runs matched in all, and
    whether that is more than were read."""

    runs: list[RunHit]
    groups: list[TableGroup]
    total: int
    query: str
    truncated: bool


def search_groups(store: Store, spec: RunSearch, by: str) -> GroupedRuns:
    """The first :data:`MAX_GROUPED_RUNS` runs ``spec`` selects (its ``limit`` and
    ``offset`` are not used), grouped by ``by``.

    Raises:
        GroupError (400): ``by`` is not a group-by key.
        QueryError, InvalidInput (400), StoreUnavailable (503): as ``search_runs``.
    """
    check_group_by(by)
    key = by.split(".", 1)[1] if by.startswith("config.") else None
    columns = spec.config_columns
    if key is not None and key not in columns:
        columns = (*columns, key)
    read = dataclasses.replace(spec, limit=MAX_GROUPED_RUNS, offset=0, config_columns=columns)
    page = search_runs(store, read)
    rows = [
        TableRun(
            id=r.id,
            status=r.status,
            # a null value counts as no value: the "(none)" group
            config={} if key is None or r.config.get(key) is None else {key: r.config[key]},
            tags=r.tags,
            metrics=r.metrics,
        )
        for r in page.runs
    ]
    return GroupedRuns(
        runs=page.runs,
        groups=group_table(by, rows, spec.metric_columns),
        total=page.total,
        query=page.query,
        truncated=page.total > len(page.runs),
    )
