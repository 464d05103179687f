"""SQLite point inserts come in a fixed set of statement sizes, so a long run's batches of
every size do not fill sqlite3's statement cache with thousands of large statements (the
tracker's own RSS grew ~10 MiB over 100k steps: bench/bench_rss_flat.py)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tracker.store import Store
from tracker.store.metrics import intern_keys, metric_history, write_points
from tracker.store.points import SQLITE_CHUNK, SQLITE_SHAPES, _sqlite_shapes
from tracker.store.runs import create_run


@given(st.integers(min_value=0, max_value=5 * SQLITE_CHUNK + 7))
def test_a_batch_is_split_into_the_fixed_sizes(n: int) -> None:
    sizes = _sqlite_shapes(n)
    assert sum(sizes) == n
    assert set(sizes) <= set(SQLITE_SHAPES)
    assert len(sizes) <= n // SQLITE_CHUNK + len(SQLITE_SHAPES)
    assert len(SQLITE_SHAPES) == 12 and max(SQLITE_SHAPES) == SQLITE_CHUNK


def test_batches_of_every_size_are_stored_whole(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = Store(f"sqlite:///{tmp_path / 'shapes.db'}")
    run = create_run(store, "p")
    key = intern_keys(store, {"x": 0.0})["x"]
    step = 0
    for size in (1, 2, 3, 7, 100, 1023, 1024, 2047, 2048, 2049, 4099):
        write_points(store, [(run.id, key, step + i, 0, float(step + i)) for i in range(size)])
        step += size
    history = metric_history(store, run.id, "x")
    assert [p.step for p in history] == list(range(step))
    assert all(math.isclose(p.value, p.step) for p in history)
    store.close()
