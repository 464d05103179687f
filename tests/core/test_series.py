"""Rollup levels kept on ingest, and the chart reads built on them, checked against the pure
downsampling functions on real SQLite and PostgreSQL."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from tracker.rules.downsample import Bucket, downsample, level, merge_buckets
from tracker.store import Store, chunks
from tracker.store.engine import _migrations_dir, create_engine, upgrade
from tracker.store.metrics import intern_keys, write_points
from tracker.store.rollups import LEVELS
from tracker.store.runs import create_run
from tracker.store.series import read_series

SPECIALS = (math.nan, math.inf, -math.inf)


def write(store: Store, run_id: int, values: dict[int, float], key: str = "m", batch: int = 997):
    kid = intern_keys(store, [key])[key]
    steps = list(values)
    for i in range(0, len(steps), batch):
        rows = [
            (run_id, kid, s, 1000 * s, None if math.isnan(values[s]) else values[s])
            for s in steps[i : i + batch]
        ]
        write_points(store, rows)


def expected_level(values: dict[int, float], width: int) -> list[Bucket]:
    steps = sorted(values)
    return list(level(steps, [values[s] for s in steps], width))


def stored_level(store: Store, run_id: int, width: int) -> list[Bucket]:
    query = sa.text(
        "SELECT first_step, last_step, min_value, max_value, last_value, count, nan_count, "
        "posinf_count, neginf_count FROM metric_rollups WHERE run_id = :r AND width = :w "
        "ORDER BY bucket"
    )
    with store.engine.connect() as conn:
        rows = conn.execute(query, {"r": run_id, "w": width}).all()
    return [
        Bucket(int(a), int(b), c, d, math.nan if e is None else e, *map(int, rest))
        for a, b, c, d, e, *rest in rows
    ]


def same(a: list[Bucket], b: list[Bucket]) -> bool:
    """Bucket lists equal, NaN equal to NaN."""

    def key(x: Bucket) -> tuple:
        last = "nan" if math.isnan(x.last) else x.last
        return (x.first_step, x.last_step, x.min, x.max, last, x.count, x.nan_count,
                x.posinf_count, x.neginf_count)  # fmt: skip

    return [key(x) for x in a] == [key(x) for x in b]


@pytest.mark.parametrize("sealed", [False, True], ids=["rows", "sealed"])
def test_rollups_stay_exact_through_shuffled_batches_and_rewrites(
    store: Store, sealed: bool
) -> None:
    rng = random.Random(7)
    run = create_run(store, "p")
    values = {s: rng.choice([rng.random(), rng.random(), *SPECIALS]) for s in range(0, 20000, 3)}
    shuffled = dict(rng.sample(sorted(values.items()), len(values)))
    write(store, run.id, shuffled)
    if sealed:  # the rewrites below land on sealed steps
        chunks.seal_run(store, run.id, batch_points=2_000)
    write(store, run.id, shuffled, batch=5000)  # a retried batch changes nothing
    rewrites = {s: -5.0 for s in range(300, 9000, 3)}  # a resumed run logs steps again
    values.update(rewrites)
    write(store, run.id, rewrites)
    for width in LEVELS:
        assert same(stored_level(store, run.id, width), expected_level(values, width)), width
    if sealed:
        assert chunks.seal_run(store, run.id)[1]
    # every point at full resolution, then grouped: the pure rule's buckets
    steps = sorted(values)
    for buckets in (7_000, 500):
        got = read_series(store, run.id, "m", lo=0, hi=19_999, max_buckets=buckets).series
        want = downsample(steps, [values[s] for s in steps], buckets, 0, 19_999)
        assert same(list(got.buckets), list(want.buckets)), buckets


def test_points_read_equals_pure_downsample(store: Store) -> None:
    run = create_run(store, "p")
    rng = random.Random(1)
    values = {s: rng.random() for s in range(5000)}
    values[4321] = 1e6
    values[17] = math.nan
    write(store, run.id, values)
    steps = sorted(values)
    got = read_series(store, run.id, "m", max_buckets=700)
    zoom = read_series(store, run.id, "m", lo=4000, hi=4500, max_buckets=700)
    want = downsample(steps, [values[s] for s in steps], 700)
    assert got.source == "points" and same(list(got.series.buckets), list(want.buckets))
    assert max(b.max for b in got.series.buckets) == 1e6
    assert zoom.series.full_resolution and len(zoom.series.buckets) == 501
    assert zoom.wall_ms == [1000 * s for s in range(4000, 4501)]


def test_large_series_read_from_a_level_equals_merge_buckets(store: Store) -> None:
    run = create_run(store, "p")
    values = {s: math.sin(s / 1000) for s in range(150_000)}
    values[77_777] = 50.0  # one-step spike
    values[123_456] = math.nan
    values[140_000] = -math.inf
    write(store, run.id, values, batch=20_000)
    got = read_series(store, run.id, "m", max_buckets=1000)
    window = read_series(store, run.id, "m", lo=10_000, hi=110_000, max_buckets=1000)
    assert got.source == f"rollup-{LEVELS[0]}"
    level = expected_level(values, LEVELS[0])
    assert same(list(got.series.buckets), list(merge_buckets(level, 1000).buckets))
    want = merge_buckets(level, 1000, lo=10_000, hi=110_000)
    assert same(list(window.series.buckets), list(want.buckets))
    buckets = got.series.buckets
    assert len(buckets) <= 1000 and sum(b.count for b in buckets) == 150_000
    assert max(b.max for b in buckets) == 50.0
    assert sum(b.nan_count for b in buckets) == 1 and sum(b.neginf_count for b in buckets) == 1
    assert got.wall_ms[-1] == 1000 * 149_999
    # a bucket as wide as a coarser level: that level, every bucket still given a row
    # (the workspace's overlay of many long runs reads 30x fewer rows); the spike is kept
    for buckets, width in ((15, 8192), (100, 1024)):  # 10,000 and 1,500 steps a bucket
        coarse = read_series(store, run.id, "m", max_buckets=buckets)
        assert coarse.source == f"rollup-{width}", buckets
        wide = expected_level(values, width)
        assert same(list(coarse.series.buckets), list(merge_buckets(wide, buckets).buckets))
        assert len(coarse.series.buckets) == buckets
        assert max(b.max for b in coarse.series.buckets) == 50


def test_migration_fills_rollups_for_points_stored_before_it(empty_store_url: str) -> None:
    engine = create_engine(empty_store_url)
    upgrade(engine, "0002")
    values = {s: float(s % 11) for s in range(3000)}
    values[5] = math.nan
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO metric_points (run_id, key_id, step, wall_ms, value) "
                "VALUES (1, 1, :s, :w, :v)"
            ),
            [{"s": s, "w": s, "v": None if math.isnan(v) else v} for s, v in values.items()],
        )
    engine.dispose()
    store = Store(empty_store_url)  # upgrades to head, filling the rollups
    for width in LEVELS:
        assert same(stored_level(store, 1, width), expected_level(values, width)), width
    store.close()


def test_the_1024_level_is_filled_from_the_256_level_and_dropped_again(
    empty_store_url: str,
) -> None:
    """0026_rollup_level_1024 on a store whose series were stored before it: the level is
    the rule's (spike, NaN and infinity counted); the downgrade
    deletes it and keeps every other level."""
    store = Store(empty_store_url)
    run = create_run(store, "p")
    rng = random.Random(3)
    values = {s: rng.random() for s in range(0, 12_000, 2)}
    values.update({4001: 80.0, 1501: math.nan, 7777: math.inf})
    write(store, run.id, values)
    store.close()
    cfg = Config()
    cfg.set_main_option("script_location", str(_migrations_dir()))
    engine = create_engine(empty_store_url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0025_metric_chunks")
        widths = conn.execute(sa.text("SELECT DISTINCT width FROM metric_rollups")).scalars()
        assert sorted(widths) == [w for w in LEVELS if w != 1024]
    engine.dispose()
    store = Store(empty_store_url)  # upgrades again: the level is back, by the rule
    for width in LEVELS:
        assert same(stored_level(store, run.id, width), expected_level(values, width)), width
    store.close()


@pytest.mark.parametrize("max_buckets", [1, 7, 1500])
def test_bucket_bounds(store: Store, max_buckets: int) -> None:
    run = create_run(store, "p")
    write(store, run.id, {s: float(s) for s in range(0, 30_000, 2)})
    got = read_series(store, run.id, "m", max_buckets=max_buckets)
    buckets = got.series.buckets
    assert 1 <= len(buckets) <= max_buckets
    assert buckets[0].first_step == 0 and buckets[-1].last_step == 29_998
    assert all(a.last_step < b.first_step for a, b in pairwise(buckets))
