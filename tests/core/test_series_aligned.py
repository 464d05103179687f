"""The workspace's read of many runs at once (``tracker.store.series.read_aligned``) gives,
for each run, exactly what the one-run read gives on the same window, whichever source each
run's read takes (points as they are, points grouped in SQL, a rollup level), on real SQLite
and PostgreSQL."""

from __future__ import annotations

import math

import pytest

from tracker.store import Store
from tracker.store import series as store_series
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run
from tracker.store.series import read_aligned, read_series


def log(store: Store, run_id: int, key: str, steps: range, every_nan: int = 0) -> None:
    kid = intern_keys(store, [key])[key]
    rows = []
    for s in steps:
        value = None if every_nan and s % every_nan == 0 else math.sin(s / 50) + s * 1e-4
        if every_nan and s % (every_nan * 7) == 1:
            value = math.inf
        rows.append((run_id, kid, s, 1000 * s, value))
    write_points(store, rows)


@pytest.mark.parametrize("buckets", [1, 7, 100])
def test_each_run_of_a_batch_reads_as_it_does_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch, buckets: int
) -> None:
    monkeypatch.setattr(store_series, "ROW_BUDGET", 2_000)
    runs = [create_run(store, "p", f"r{i}").id for i in range(4)]
    log(store, runs[0], "loss", range(0, 60))  # full resolution for most bucket counts
    log(store, runs[1], "loss", range(5, 1_500), every_nan=13)  # grouped points
    log(store, runs[2], "loss", range(0, 40_000, 3))  # a rollup level
    log(store, runs[3], "other", range(0, 10))  # never logged "loss"
    log(store, runs[0], "other", range(100, 300))
    (loss, other), unknown = read_aligned(
        store, runs, ["loss", "other", "gone"], max_buckets=buckets
    )
    assert unknown == ["gone"]
    assert list(loss.reads) == runs[:3] and list(other.reads) == [runs[0], runs[3]]
    assert loss.grid is not None and (loss.grid.lo, loss.grid.hi) == (0, 39_999)
    sources = set()
    for aligned in (loss, other):
        assert aligned.grid is not None
        for run_id, got in aligned.reads.items():
            alone = read_series(
                store,
                run_id,
                aligned.key,
                lo=aligned.grid.lo,
                hi=aligned.grid.hi,
                max_buckets=buckets,
            )
            assert got.series == alone.series or _same(got.series, alone.series)
            assert (got.wall_ms, got.source) == (alone.wall_ms, alone.source)
            sources.add(got.source)
    if buckets == 7:
        assert {"points"} < sources and any(s.startswith("rollup-") for s in sources)


def _same(a: store_series.Series, b: store_series.Series) -> bool:
    """Equal, NaN equal to NaN."""
    if (a.lo, a.hi, len(a.buckets)) != (b.lo, b.hi, len(b.buckets)):
        return False
    for x, y in zip(a.buckets, b.buckets, strict=True):
        if x.last != y.last and not (math.isnan(x.last) and math.isnan(y.last)):
            return False
        if (x.first_step, x.last_step, x.min, x.max, x.count, x.nan_count) != (
            y.first_step, y.last_step, y.min, y.max, y.count, y.nan_count,
        ):  # fmt: skip
            return False
    return True


def test_no_run_logged_the_key_gives_no_grid(store: Store) -> None:
    run = create_run(store, "p", "r").id
    log(store, run, "loss", range(3))
    other = create_run(store, "p", "s").id
    ((found,), unknown) = read_aligned(store, [other], ["loss"], max_buckets=10)
    assert (found.grid, found.reads, unknown) == (None, {}, [])
