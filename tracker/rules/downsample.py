"""Downsampling of metric series for charts: pure functions, no I/O.

A chart of a million points is drawn from a few hundred buckets, never from a stride sample:
each bucket keeps the first and last step it covers, the min and max over its finite values,
its last value (finite or not), its point count and how many NaN, +Inf and -Inf values fell
into it. So a one-step spike survives as its bucket's max and a NaN is never averaged away: it
is counted and flagged.

This module is the one home of that rule; the store's SQL computes the same thing from the
numbers given here:

* where a bucket's boundaries lie: ``Grid`` (``count`` equal step ranges over a chart window
  ``[lo, hi]``, the index of a step in integer arithmetic) and ``level_bucket`` /
  ``level_buckets`` / ``level_steps`` (the fixed-width levels the store keeps pre-aggregated,
  ``tracker.store.rollups``);
* how points and buckets reduce: ``point_bucket`` and ``combine`` (min of mins, max of maxes,
  last of lasts, sum of counts), applied per bucket index by ``reduce_buckets``.

``downsample`` buckets points on a grid, ``level`` buckets them on a fixed width, and
``merge_buckets`` re-buckets already aggregated buckets on a grid, so the store can keep
coarse pre-aggregated levels and serve any zoom from the finest level that is still coarse
enough. ``tests/core/test_series_rule.py`` checks the store's SQL against these functions.

``to_payload`` turns a ``Series`` into JSON-safe column arrays. Encoding choice: numeric
columns hold only finite numbers or ``null``; non-finite values are carried by integer
columns (``nan``, ``posinf``, ``neginf`` counts and the ``last_kind`` code) instead of the
strings "NaN"/"Infinity", so the arrays stay numeric and a chart library draws ``null`` as a
gap, which is what a NaN should look like.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.errors import InvalidInput

__all__ = [
    "LAST_FINITE",
    "LAST_NAN",
    "LAST_NEGINF",
    "LAST_POSINF",
    "Bucket",
    "BucketColumns",
    "DownsampleError",
    "Grid",
    "Series",
    "check_bucket_count",
    "combine",
    "downsample",
    "level",
    "level_bucket",
    "level_buckets",
    "level_steps",
    "merge_buckets",
    "point_bucket",
    "reduce_buckets",
    "to_payload",
]

# Codes of the ``last_kind`` payload column.
LAST_FINITE = 0
LAST_NAN = 1
LAST_POSINF = 2
LAST_NEGINF = 3


class DownsampleError(InvalidInput):
    """Inputs that break the downsampling rules (lengths, order, window, bucket count)."""

    code = "invalid_downsample_request"


@dataclass(frozen=True)
class Bucket:
    """Aggregate of the points whose steps fall in one step range.

    ``min``/``max`` are over finite values only and ``None`` when the bucket has none;
    ``last`` is the value of the last point and may be NaN or ±Inf.
    """

    first_step: int
    last_step: int
    min: float | None
    max: float | None
    last: float
    count: int
    nan_count: int = 0
    posinf_count: int = 0
    neginf_count: int = 0

    @property
    def has_nan(self) -> bool:
        return self.nan_count > 0

    @property
    def has_inf(self) -> bool:
        return self.posinf_count > 0 or self.neginf_count > 0

    @property
    def has_nonfinite(self) -> bool:
        return self.has_nan or self.has_inf


@dataclass(frozen=True)
class BucketColumns:
    """A series' buckets as columns, what a chart of many runs sends (the workspace): each
    bucket's last step and last value (NaN or ±Inf kept), the min and max of its finite
    values (None when it has none) and how many NaN and ±Inf values it holds."""

    last_step: list[int]
    last: list[float]
    min: list[float | None]
    max: list[float | None]
    nonfinite: list[int]


@dataclass(frozen=True)
class Series:
    """Buckets in step order over the window ``[lo, hi]`` (``None`` when there are no points)."""

    buckets: tuple[Bucket, ...]
    lo: int | None
    hi: int | None

    def columns(self) -> BucketColumns:
        """The buckets as columns (``tracker.rules.point_buckets`` answers this without
        building the buckets)."""
        b = self.buckets
        return BucketColumns(
            [x.last_step for x in b],
            [x.last for x in b],
            [x.min for x in b],
            [x.max for x in b],
            [x.nan_count + x.posinf_count + x.neginf_count for x in b],
        )

    @property
    def full_resolution(self) -> bool:
        """True when every bucket holds exactly one point."""
        return all(b.count == 1 for b in self.buckets)

    @property
    def point_count(self) -> int:
        return sum(b.count for b in self.buckets)


def _as_float(value: float | None) -> float:
    # The store keeps NaN as NULL, so ``None`` arrives here and means NaN.
    return math.nan if value is None else float(value)


def point_bucket(step: int, value: float | None) -> Bucket:
    """The bucket of one point (``None`` means NaN, as the store keeps it)."""
    value = _as_float(value)
    finite = math.isfinite(value)
    if finite:  # the common case, positional: half the cost of the keywords below
        return Bucket(step, step, value, value, value, 1, 0, 0, 0)
    return Bucket(
        first_step=step,
        last_step=step,
        min=value if finite else None,
        max=value if finite else None,
        last=value,
        count=1,
        nan_count=int(math.isnan(value)),
        posinf_count=int(value == math.inf),
        neginf_count=int(value == -math.inf),
    )


def combine(buckets: Sequence[Bucket]) -> Bucket:
    """Merge buckets given in step order into one (min of mins, max of maxes, last of lasts).

    Raises ``DownsampleError`` when ``buckets`` is empty.
    """
    if not buckets:
        raise DownsampleError("buckets: cannot combine an empty list of buckets", field="buckets")
    mins = [b.min for b in buckets if b.min is not None]
    maxs = [b.max for b in buckets if b.max is not None]
    return Bucket(
        first_step=min(b.first_step for b in buckets),
        last_step=max(b.last_step for b in buckets),
        min=min(mins) if mins else None,
        max=max(maxs) if maxs else None,
        last=buckets[-1].last,
        count=sum(b.count for b in buckets),
        nan_count=sum(b.nan_count for b in buckets),
        posinf_count=sum(b.posinf_count for b in buckets),
        neginf_count=sum(b.neginf_count for b in buckets),
    )


def reduce_buckets(buckets: Iterable[Bucket], index: Callable[[int], int]) -> tuple[Bucket, ...]:
    """The one reduction: ``combine`` the buckets (given in step order) that share
    ``index(first_step)``, one bucket per index that holds any, in index order."""
    groups: dict[int, list[Bucket]] = {}
    for b in buckets:
        groups.setdefault(index(b.first_step), []).append(b)
    return tuple(combine(groups[i]) for i in sorted(groups))


def check_bucket_count(max_buckets: int) -> None:
    """Raises ``DownsampleError`` unless ``max_buckets`` is an integer >= 1."""
    if isinstance(max_buckets, bool) or not isinstance(max_buckets, int) or max_buckets < 1:
        raise DownsampleError(
            f"max_buckets: got {max_buckets!r}; it must be an integer >= 1", field="max_buckets"
        )


@dataclass(frozen=True)
class Grid:
    """``count`` equal step ranges over the chart window ``lo..hi`` (both included).

    Step ``s`` falls in bucket ``(s - lo) * count // span`` (``span = hi - lo + 1``): integer
    arithmetic, so the database computes the same index from ``lo``, ``count`` and ``span``
    (steps are >= 0 and never below ``lo`` there, where integer division agrees with ``//``).
    A step before ``lo`` counts as ``lo``: a pre-aggregated bucket that starts before the
    window belongs to its first bucket.
    """

    lo: int
    hi: int
    count: int

    @classmethod
    def over(cls, lo: int, hi: int, count: int) -> Grid:
        """Raises ``DownsampleError`` when ``lo > hi`` or ``count < 1``."""
        check_bucket_count(count)
        if lo > hi:
            raise DownsampleError(
                f"lo/hi: window [{lo}, {hi}] is empty; lo must be <= hi", field="lo"
            )
        return cls(lo, hi, count)

    @property
    def span(self) -> int:
        """Steps in the window."""
        return self.hi - self.lo + 1

    def index(self, step: int) -> int:
        """The bucket of ``step`` (0 .. count - 1 for a step within the window)."""
        return (max(step, self.lo) - self.lo) * self.count // self.span


def level_bucket(step: int, width: int) -> int:
    """The bucket of ``step`` on a level of fixed ``width`` steps: ``step // width`` (bucket
    0 starts at step 0; steps are >= 0, so the database's integer division agrees)."""
    return step // width


def level_buckets(lo: int, hi: int, width: int) -> tuple[int, int]:
    """The first and last bucket of a level of ``width`` that hold a step of ``lo..hi``."""
    return level_bucket(lo, width), level_bucket(hi, width)


def level_steps(lo: int, hi: int, width: int) -> tuple[int, int]:
    """The steps the buckets of a level of ``width`` that hold a step of ``lo..hi`` cover:
    the first one's first step to the last one's last."""
    first, last = level_buckets(lo, hi, width)
    return first * width, (last + 1) * width - 1


def _check_window(
    first: int | None, last: int | None, max_buckets: int, lo: int | None, hi: int | None
) -> Grid | None:
    check_bucket_count(max_buckets)
    lo = first if lo is None else lo
    hi = last if hi is None else hi
    if lo is None or hi is None:
        return None
    return Grid.over(lo, hi, max_buckets)


def downsample(
    steps: Sequence[int],
    values: Sequence[float | None],
    max_buckets: int,
    lo: int | None = None,
    hi: int | None = None,
) -> Series:
    """Bucket points sorted by step into at most ``max_buckets`` equal step ranges.

    Only points with ``lo <= step <= hi`` are kept (the window defaults to the data's first
    and last step). If they fit in ``max_buckets``, each point is its own bucket (full
    resolution). ``None`` in ``values`` means NaN (that is how the store keeps NaN). Empty
    buckets are left out.

    Raises ``DownsampleError`` when the lengths differ, steps are not sorted, ``lo > hi`` or
    ``max_buckets < 1``.
    """
    if len(steps) != len(values):
        raise DownsampleError(
            f"steps/values: lengths differ ({len(steps)} steps, {len(values)} values); "
            "each step needs exactly one value",
            field="values",
        )
    for i in range(1, len(steps)):
        if steps[i] < steps[i - 1]:
            raise DownsampleError(
                f"steps[{i}]: step {steps[i]} comes after step {steps[i - 1]}; "
                "steps must be sorted in non-decreasing order",
                field="steps",
            )
    first = steps[0] if steps else None
    last = steps[-1] if steps else None
    grid = _check_window(first, last, max_buckets, lo, hi)
    if grid is None:
        return Series(buckets=(), lo=None, hi=None)
    points = [
        point_bucket(int(s), v)
        for s, v in zip(steps, values, strict=True)
        if grid.lo <= s <= grid.hi
    ]
    if len(points) <= max_buckets:
        return Series(tuple(points), lo=grid.lo, hi=grid.hi)
    return Series(reduce_buckets(points, grid.index), lo=grid.lo, hi=grid.hi)


def level(steps: Sequence[int], values: Sequence[float | None], width: int) -> tuple[Bucket, ...]:
    """Points sorted by step bucketed on a level of fixed ``width`` (``level_bucket``): what
    the store keeps pre-aggregated (``tracker.store.rollups``). ``None`` means NaN."""
    points = [point_bucket(int(s), v) for s, v in zip(steps, values, strict=True)]
    return reduce_buckets(points, lambda step: level_bucket(step, width))


def merge_buckets(
    buckets: Sequence[Bucket],
    max_buckets: int,
    lo: int | None = None,
    hi: int | None = None,
) -> Series:
    """Re-bucket pre-aggregated buckets (sorted by ``first_step``) into at most ``max_buckets``.

    A bucket is kept when its step range overlaps ``[lo, hi]`` and is assigned whole to the
    target bucket of its ``first_step`` (clamped into the window), so coarse input buckets at
    the window's edges are kept rather than cut. Kept buckets that fall in one target bucket
    are combined even when they would fit as they are (as the database groups rollup rows).

    Raises ``DownsampleError`` when buckets are out of order, ``lo > hi`` or ``max_buckets < 1``.
    """
    for i in range(1, len(buckets)):
        if buckets[i].first_step < buckets[i - 1].first_step:
            raise DownsampleError(
                f"buckets[{i}]: first_step {buckets[i].first_step} comes after "
                f"{buckets[i - 1].first_step}; buckets must be sorted by first_step",
                field="buckets",
            )
    first = buckets[0].first_step if buckets else None
    last = max(b.last_step for b in buckets) if buckets else None
    grid = _check_window(first, last, max_buckets, lo, hi)
    if grid is None:
        return Series(buckets=(), lo=None, hi=None)
    kept = [b for b in buckets if b.last_step >= grid.lo and b.first_step <= grid.hi]
    return Series(reduce_buckets(kept, grid.index), lo=grid.lo, hi=grid.hi)


def _last_kind(value: float) -> int:
    if math.isnan(value):
        return LAST_NAN
    if value == math.inf:
        return LAST_POSINF
    if value == -math.inf:
        return LAST_NEGINF
    return LAST_FINITE


def to_payload(series: Series) -> dict[str, Any]:
    """Column arrays for the JSON API; every number in it is finite or ``null``.

    Keys: ``resolution`` ("full" or "bucketed"), ``lo``, ``hi``, and one array per column,
    all of the same length: ``first_step``, ``last_step``, ``min``, ``max`` (``null`` when the
    bucket has no finite value), ``last`` (``null`` when not finite), ``last_kind`` (0 finite,
    1 NaN, 2 +Inf, 3 -Inf), ``count``, ``nan``, ``posinf``, ``neginf`` (counts per bucket).
    """
    b = series.buckets
    return {
        "resolution": "full" if series.full_resolution else "bucketed",
        "lo": series.lo,
        "hi": series.hi,
        "first_step": [x.first_step for x in b],
        "last_step": [x.last_step for x in b],
        "min": [x.min for x in b],
        "max": [x.max for x in b],
        "last": [x.last if math.isfinite(x.last) else None for x in b],
        "last_kind": [_last_kind(x.last) for x in b],
        "count": [x.count for x in b],
        "nan": [x.nan_count for x in b],
        "posinf": [x.posinf_count for x in b],
        "neginf": [x.neginf_count for x in b],
    }
