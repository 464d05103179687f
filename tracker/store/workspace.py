"""The workspace's one read: many runs x many metrics, downsampled, optionally grouped.

The runs are those the runs table's query selects (``tracker.store.run_search``, its first
``limit`` in the table's order) or given by id (soft-deleted ones left out). Each metric is
read for every run on one shared window cut into ``max_buckets`` equal step ranges
(``tracker.store.series.read_aligned``: the one bucket rule, min/max/last per bucket, from
points or rollups), so the runs' buckets line up and a group's mean is taken over the same
steps (``tracker.rules.group_series``).

Bounds: at most :data:`MAX_RUNS` runs, :data:`MAX_KEYS` metrics, :data:`MAX_BUCKETS` buckets
per series and :data:`MAX_CELLS` buckets in all (runs x metrics x buckets); a request over
them is refused (InvalidInput, 400) naming the field and the limit, before any series is read.

Raises: InvalidInput / QueryError / GroupError (400), NotFound (404: a run id that does not
exist), StoreUnavailable (503).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tracker.entities import RunInfo
from tracker.errors import InvalidInput
from tracker.rules.config_diff import diff_configs
from tracker.rules.downsample import Grid
from tracker.rules.group_series import (
    GroupSeries,
    RunGroup,
    aggregate,
    check_group_by,
    group_runs,
)
from tracker.store import run_reads, run_search
from tracker.store.run_search import RunSearch
from tracker.store.series import AlignedRead, read_aligned
from tracker.store.store import Store

__all__ = [
    "MAX_BUCKETS",
    "MAX_CELLS",
    "MAX_KEYS",
    "MAX_RUNS",
    "WorkspaceRead",
    "WorkspaceRequest",
    "read_workspace",
]

MAX_RUNS = 500
MAX_KEYS = 32
MAX_BUCKETS = 1000
MAX_CELLS = 1_000_000  # buckets in one answer: ~10 MB of JSON at most


@dataclass(frozen=True)
class WorkspaceRequest:
    """What to draw: ``keys`` for the runs ``run_ids`` when given, else for the first
    ``limit`` runs ``search`` selects; grouped by ``group`` when given."""

    keys: tuple[str, ...]
    search: RunSearch = field(default_factory=RunSearch)
    run_ids: tuple[int, ...] | None = None
    limit: int = 100
    max_buckets: int = 200
    group: str | None = None
    agg: str = "mean"
    band: str = "minmax"


@dataclass(frozen=True)
class WorkspaceRead:
    """The runs drawn (in the table's order), how many the query selects in all, the
    config keys whose values differ between the drawn runs, each metric's aligned series,
    the metrics no run logged, and the groups with each metric's aggregate per group."""

    runs: list[RunInfo]
    total: int
    differing: list[str]
    series: list[AlignedRead]
    unknown_keys: list[str]
    groups: list[RunGroup]
    group_series: dict[str, list[GroupSeries]]


def check_request(req: WorkspaceRequest) -> None:
    """Raises InvalidInput (400) naming the field when ``req`` is over a bound."""
    if not req.keys:
        raise InvalidInput("keys is required: the metrics to draw, comma-separated", field="keys")
    if len(req.keys) > MAX_KEYS:
        raise InvalidInput(
            f"keys: {len(req.keys)} metrics asked; one request draws at most {MAX_KEYS}",
            field="keys",
        )
    runs = len(req.run_ids) if req.run_ids is not None else req.limit
    if not 1 <= runs <= MAX_RUNS:
        name = "runs" if req.run_ids is not None else "limit"
        raise InvalidInput(f"{name}: {runs} runs asked; use 1 to {MAX_RUNS}", field=name)
    if not 1 <= req.max_buckets <= MAX_BUCKETS:
        raise InvalidInput(
            f"max_buckets: {req.max_buckets}; use 1 to {MAX_BUCKETS}", field="max_buckets"
        )
    cells = runs * len(req.keys) * req.max_buckets
    if cells > MAX_CELLS:
        raise InvalidInput(
            f"max_buckets: {runs} runs x {len(req.keys)} metrics x {req.max_buckets} buckets "
            f"is {cells:,} buckets; one request reads at most {MAX_CELLS:,} (draw fewer runs "
            "or metrics, or ask for fewer buckets)",
            field="max_buckets",
        )
    if req.group is not None:
        check_group_by(req.group)


def _runs(store: Store, req: WorkspaceRequest) -> tuple[list[RunInfo], int]:
    if req.run_ids is not None:
        runs = [r for r in run_reads.runs_by_ids(store, req.run_ids) if r.deleted_at is None]
        return runs, len(runs)
    spec = replace(req.search, limit=req.limit, offset=0)
    page = run_search.search_runs(store, spec)
    ids = [r.id for r in page.runs]
    return (run_reads.runs_by_ids(store, ids) if ids else []), page.total


def read_workspace(store: Store, req: WorkspaceRequest) -> WorkspaceRead:
    """The runs, their series and groups (see the module's docstring; raises as it says)."""
    check_request(req)
    aggregate([], _NO_GRID, center=req.agg, band=req.band)  # 400 for a bad agg/band first
    runs, total = _runs(store, req)
    ids = [r.id for r in runs]
    series, unknown = read_aligned(store, ids, req.keys, max_buckets=req.max_buckets)
    rows = diff_configs({str(r.id): r.config for r in runs}, only_differing=True)
    groups: list[RunGroup] = []
    by_key: dict[str, list[GroupSeries]] = {}
    if req.group is not None:
        groups = group_runs(req.group, [(r.id, r.config, r.tags) for r in runs])
        for read in series:
            if read.grid is None:
                by_key[read.key] = [_EMPTY for _ in groups]
                continue
            by_key[read.key] = [
                aggregate(
                    [read.reads[i].series for i in g.run_ids if i in read.reads],
                    read.grid,
                    center=req.agg,
                    band=req.band,
                )
                for g in groups
            ]
    return WorkspaceRead(
        runs=runs,
        total=total,
        differing=[row.key for row in rows],
        series=series,
        unknown_keys=unknown,
        groups=groups,
        group_series=by_key,
    )


_EMPTY = GroupSeries((), (), (), (), ())
_NO_GRID = Grid(0, 0, 1)
