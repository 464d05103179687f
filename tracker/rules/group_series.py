"""Group runs by a config key or a tag, and aggregate their series step by step: pure, no I/O.

The workspace's "group by" (``GET /api/v1/workspace/series?group=config.lr``) draws one line
per group of runs -- the mean or the median of the members' values -- with a band (min..max,
or mean ± one standard deviation), and names the group with its size (``lr=0.01 (5 runs)``).

Two rules live here:

* :func:`group_runs`: which group a run falls in. ``config.<dotted key>`` groups by the value
  of that key in the flattened config (:func:`tracker.rules.config.flatten`); values equal by
  meaning form one group (``1`` and ``1.0``: :mod:`tracker.rules.config_diff`'s comparison);
  ``tag.<key>`` groups by the value of the ``key=value`` tag (:func:`tracker.rules.tags.split_tag`);
  ``tags`` groups by the whole set of tags. A run without the key forms the group
  ``<key>=(none)``: it is never dropped.
* :func:`group_table`: the runs table's group rows (``GET /api/v1/runs?group=config.lr``):
  the groups of :func:`group_runs`, in the order the table shows their first member (the
  "(none)" group last), each with its status counts and, per metric column, the mean, min
  and max of the members' last values (finite ones only: ``n`` says how many counted).
* :func:`aggregate`: how member series combine. Runs log at different steps, so the members
  are first aligned on one :class:`~tracker.rules.downsample.Grid` (the chart window cut into
  equal step ranges; every member read on the same window): each member's buckets are reduced
  to one per grid index by the one bucket rule (:func:`~tracker.rules.downsample.reduce_buckets`,
  so a member's value in a grid bucket is its last value there), then the members' finite
  values at each index are aggregated. A member that has no finite value at an index (it
  ended earlier, started later, or logged NaN there) does not count there: ``n`` says how many
  did. An index where no member has a finite value is left out (a gap, as a NaN is).

Failure mode: :class:`GroupError` (HTTP 400) naming the field and the rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.errors import InvalidInput
from tracker.rules.config import flatten
from tracker.rules.config_diff import MISSING, canonical
from tracker.rules.downsample import Grid, Series, reduce_buckets
from tracker.rules.tags import split_tag

__all__ = [
    "BANDS",
    "CENTERS",
    "GroupError",
    "GroupSeries",
    "MetricSummary",
    "RunGroup",
    "TableGroup",
    "TableRun",
    "aggregate",
    "check_group_by",
    "group_runs",
    "group_table",
    "summarize",
]

CENTERS = ("mean", "median")
BANDS = ("minmax", "std", "none")
NONE_LABEL = "(none)"


class GroupError(InvalidInput):
    """A group-by key, centre or band that breaks the rules above."""

    code = "invalid_group"


@dataclass(frozen=True)
class RunGroup:
    """The runs that share one value of the group-by key, in the order given."""

    label: str  # "lr=0.01"
    value: Any  # the value (MISSING-free: None for "(none)")
    run_ids: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.run_ids)


@dataclass(frozen=True)
class GroupSeries:
    """One group's aggregated series: one entry per grid index that any member has.

    ``step`` is the last step any member logged in that grid bucket; ``center`` the mean or
    median of the members' values there; ``lo``/``hi`` the band (``None`` when ``band`` is
    "none"); ``n`` how many members had a finite value there.
    """

    step: tuple[int, ...]
    center: tuple[float, ...]
    lo: tuple[float | None, ...]
    hi: tuple[float | None, ...]
    n: tuple[int, ...]


def check_group_by(by: str) -> str:
    """``by`` when it names something to group by: ``config.<key>``, ``tag.<key>`` or ``tags``.

    Raises:
        GroupError: any other text.
    """
    if by == "tags":
        return by
    for prefix in ("config.", "tag."):
        if by.startswith(prefix) and len(by) > len(prefix):
            return by
    raise GroupError(
        f"group: got {by!r}; group by config.<key> (a config key, dotted), tag.<key> "
        "(the value of a key=value tag) or tags (the whole set of tags)",
        field="group",
    )


def _value_of(by: str, config: Mapping[str, Any], tags: Sequence[str]) -> Any:
    if by == "tags":
        return tuple(sorted(tags)) if tags else MISSING
    if by.startswith("config."):
        return flatten(config).get(by[len("config.") :], MISSING)
    key = by[len("tag.") :]
    for tag in tags:
        name, value = split_tag(tag)
        if name == key:
            return value
    return MISSING


def _show(value: Any) -> str:
    if value is MISSING:
        return NONE_LABEL
    if isinstance(value, tuple):
        return ",".join(value) if value else NONE_LABEL
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return repr(value)
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return repr(value)


def _order(value: Any) -> tuple[int, Any]:
    # numbers by size, then text, then the rest; "(none)" last
    if value is MISSING:
        return (3, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, _show(value))


def group_runs(
    by: str, runs: Sequence[tuple[int, Mapping[str, Any], Sequence[str]]]
) -> list[RunGroup]:
    """The groups of ``runs`` (``(run id, config, tags)``) by ``by``: numbers in ascending
    order, then text, then other values, the runs without the key last.

    Raises:
        GroupError: ``by`` breaks :func:`check_group_by`.
        ConfigFlattenError: a config cannot be flattened (``tracker.rules.config.flatten``).
    """
    check_group_by(by)
    name = "tags" if by == "tags" else by.split(".", 1)[1]
    found: dict[Any, tuple[Any, list[int]]] = {}
    for run_id, config, tags in runs:
        value = _value_of(by, config, tags)
        found.setdefault(canonical(value), (value, []))[1].append(run_id)
    groups = sorted(found.values(), key=lambda item: _order(item[0]))
    return [
        RunGroup(
            label=f"{name}={_show(value)}",
            value=None if value is MISSING else value,
            run_ids=tuple(ids),
        )
        for value, ids in groups
    ]


def _check_choice(value: str, allowed: tuple[str, ...], field: str) -> None:
    if value not in allowed:
        raise GroupError(
            f"{field}: got {value!r}; it must be one of {', '.join(allowed)}", field=field
        )


def _mean(values: list[float]) -> float:
    """The mean of finite values, itself finite: the exact sum divided, or (when the sum
    overflows, 1e308 + 1e308) the mean of the values scaled by a power of two (exact) into
    [-1, 1], kept between their min and max, and scaled back."""
    try:
        return math.fsum(values) / len(values)
    except OverflowError:
        exp = math.frexp(max(abs(v) for v in values))[1]
        scaled = [math.ldexp(v, -exp) for v in values]
        mean = min(max(math.fsum(scaled) / len(values), min(scaled)), max(scaled))
        return math.ldexp(mean, exp)


def _median(values: list[float]) -> float:
    """The median; of an even count, the mean of the two middle values (by ``_mean``: the
    median of 8e307 and 1e308 is finite)."""
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else _mean(ordered[half - 1 : half + 1])


def _std(values: list[float]) -> float:
    """The population standard deviation, computed on values scaled into [-1, 1]."""
    scale = max(abs(v) for v in values)
    if len(values) < 2 or scale == 0:
        return 0.0
    return scale * statistics.pstdev([v / scale for v in values])


def aggregate(
    members: Sequence[Series], grid: Grid, *, center: str = "mean", band: str = "minmax"
) -> GroupSeries:
    """The members' series (each read on ``grid``'s window) aggregated per grid index.

    Raises:
        GroupError: ``center`` not in :data:`CENTERS` or ``band`` not in :data:`BANDS`.
    """
    _check_choice(center, CENTERS, "agg")
    _check_choice(band, BANDS, "band")
    values: dict[int, list[float]] = {}
    steps: dict[int, int] = {}
    for series in members:
        for bucket in reduce_buckets(series.buckets, grid.index):
            i = grid.index(bucket.first_step)
            steps[i] = max(steps.get(i, bucket.last_step), bucket.last_step)
            if math.isfinite(bucket.last):
                values.setdefault(i, []).append(bucket.last)
    out: dict[str, list[Any]] = {"step": [], "center": [], "lo": [], "hi": [], "n": []}
    for i in sorted(values):
        got = values[i]
        mean = _mean(got)
        mid = mean if center == "mean" else _median(got)
        lo: float | None = None
        hi: float | None = None
        if band == "minmax":
            lo, hi = min(got), max(got)
        elif band == "std":
            lo, hi = mean - _std(got), mean + _std(got)
        if not all(v is None or math.isfinite(v) for v in (lo, hi)):
            continue  # mean + std past the largest float (1e308 and -1e308): nothing to draw
        out["step"].append(steps[i])
        out["center"].append(mid)
        out["lo"].append(lo)
        out["hi"].append(hi)
        out["n"].append(len(got))
    return GroupSeries(**{k: tuple(v) for k, v in out.items()})


# ------------------------------------------------------------------ the runs table's groups


@dataclass(frozen=True)
class TableRun:
    """One row of the runs table as grouping sees it: ``config`` holds at least the
    group-by key (when the run has it), ``metrics`` the metric columns' last values."""

    id: int
    status: str
    config: Mapping[str, Any]
    tags: Sequence[str]
    metrics: Mapping[str, Any]


@dataclass(frozen=True)
class MetricSummary:
    """The members' last values of one metric: ``mean``/``min``/``max`` of the finite ones
    (``None`` when none is), ``n`` how many were finite."""

    mean: float | None
    min: float | None
    max: float | None
    n: int


@dataclass(frozen=True)
class TableGroup:
    """One group row: its runs in table order, ``statuses`` (status -> count, most first),
    ``metrics`` (metric column -> :class:`MetricSummary`)."""

    label: str
    value: Any
    run_ids: tuple[int, ...]
    statuses: dict[str, int]
    metrics: dict[str, MetricSummary]

    @property
    def size(self) -> int:
        return len(self.run_ids)


def summarize(values: Sequence[Any]) -> MetricSummary:
    """Mean, min and max of the finite numbers among ``values`` (NaN, infinities, ``None``
    and anything not a number are left out; booleans too)."""
    finite = [
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]
    if not finite:
        return MetricSummary(mean=None, min=None, max=None, n=0)
    return MetricSummary(mean=_mean(finite), min=min(finite), max=max(finite), n=len(finite))


def group_table(
    by: str, runs: Sequence[TableRun], metric_keys: Sequence[str] = ()
) -> list[TableGroup]:
    """The group rows of ``runs`` (in the table's order) grouped by ``by``: every run in
    exactly one group; groups ordered by their first member's place in ``runs``, the group
    of runs without the key last.

    Raises:
        GroupError: ``by`` breaks :func:`check_group_by`.
        ConfigFlattenError: a config cannot be flattened.
    """
    groups = group_runs(by, [(r.id, r.config, r.tags) for r in runs])
    place = {r.id: i for i, r in enumerate(runs)}
    by_id = {r.id: r for r in runs}

    def order(g: RunGroup) -> tuple[bool, int]:
        missing = g.value is None and g.label.endswith("=" + NONE_LABEL)
        return (missing, min(place[i] for i in g.run_ids))

    out = []
    for g in sorted(groups, key=order):
        ids = tuple(sorted(g.run_ids, key=place.__getitem__))
        members = [by_id[i] for i in ids]
        counts: dict[str, int] = {}
        for r in members:
            counts[r.status] = counts.get(r.status, 0) + 1
        out.append(
            TableGroup(
                label=g.label,
                value=g.value,
                run_ids=ids,
                statuses=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
                metrics={k: summarize([r.metrics.get(k) for r in members]) for k in metric_keys},
            )
        )
    return out
