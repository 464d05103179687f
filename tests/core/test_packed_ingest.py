"""The client's writer stores a tight loop's batches as packed chunks (issue 30): no row per
point, the rollups computed from the points in the same transaction. Whatever a run logs --
NaN, +-Inf, -0.0, small batches between big ones, a resumed run writing over its steps, a
retried batch, steps logged twice -- every read answers what the same records stored as
rows answer: histories, counts, last values, chart rollups and chart reads at every zoom,
on SQLite and PostgreSQL. A superseded attempt's packed write is refused like its rows."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.series_tables import bits, head_rows, rollup_rows
from tracker.client.sinks import PACK_MIN_RECORDS, SqlSink
from tracker.rules.chunk_codec import Points
from tracker.store import Store, chunks, series
from tracker.store.metrics import count_points, intern_keys, metric_history, write_points
from tracker.store.run_reads import metric_summaries
from tracker.store.runs import create_run

KEYS = ("loss", "acc", "lr")
SPECIAL = [math.nan, math.inf, -math.inf, -0.0, 0.0]


def _records(steps: range | list[int], shift: float = 0.0) -> list[Any]:
    out = []
    for s in steps:
        special = SPECIAL[s % len(SPECIAL)] if s % 97 == 0 else None
        values = {
            "loss": special if special is not None else 2.0 / (s + 1) + shift,
            "acc": math.sin(s / 30) + shift,
            "lr": 1e-3 * (0.999**s),
        }
        out.append((s, 1_750_000_000_000 + 10 * s, values))
    return out


def _as_rows(store: Store, run: int, records: list[Any]) -> None:
    """What the same records store as plain rows (the layout before packing)."""
    ids = intern_keys(store, list(KEYS))
    write_points(
        store, [(run, ids[k], s, w, v) for s, w, items in records for k, v in items.items()]
    )


def _history(store: Store, run: int) -> list[Any]:
    return [
        [(p.step, p.wall_time, bits(p.value)) for p in metric_history(store, run, key)]
        for key in KEYS
    ] + [count_points(store, run)]


def _charts(store: Store, run: int) -> list[Any]:
    out = []
    for kw in ({}, {"max_buckets": 50}, {"lo": 900, "hi": 1300}, {"lo": 3000, "hi": 3030}):
        for key in KEYS:
            read = series.read_series(store, run, key, **kw)
            out.append(
                (read.source, read.wall_ms, [
                    (b.first_step, b.last_step, b.min, b.max, bits(b.last), b.count,
                     b.nan_count, b.posinf_count, b.neginf_count) for b in read.series.buckets
                ])
            )  # fmt: skip
    return out


def _summaries(store: Store, run: int) -> list[Any]:
    """The run's last value of each key (the runs table's columns)."""
    return [
        (s.key, s.last_step, s.last_wall_time, s.last_value)
        for s in sorted(metric_summaries(store, [run])[run], key=lambda s: s.key)
    ]


def _same(store: Store, packed: int, rows: int) -> None:
    assert _history(store, packed) == _history(store, rows)
    assert _summaries(store, packed) == _summaries(store, rows)
    assert rollup_rows(store, packed) == rollup_rows(store, rows)
    assert _charts(store, packed) == _charts(store, rows)


def test_a_tight_loop_is_stored_packed_and_reads_as_rows(store: Store) -> None:
    packed_run, rows_run = create_run(store, "pack").id, create_run(store, "pack").id
    sink = SqlSink(store)
    batches = [
        _records(range(0, PACK_MIN_RECORDS + 1976)),  # packed
        _records(range(3000, 3100)),  # too small: rows
        _records(range(3100, 5200)),  # packed after rows, in the rows' rollup bucket
    ]
    for batch in batches:
        sink.write_metrics(packed_run, batch)
        _as_rows(store, rows_run, batch)
    while not sink.settle():
        pass
    assert chunks.sealed_series(store, packed_run) != []
    # the small batch's rows, and the chunk its rollup refresh moved back beside them
    assert head_rows(store, packed_run) < 5200 * len(KEYS) // 2
    _same(store, packed_run, rows_run)


def test_a_resumed_run_and_a_retried_batch_fall_back_to_rows(store: Store) -> None:
    packed_run, rows_run = create_run(store, "pack").id, create_run(store, "pack").id
    sink = SqlSink(store)
    first = _records(range(0, 4000))
    batches = [
        first,
        first,  # a retry of a batch whose commit the writer never heard of
        _records(range(1000, 2500), shift=5.0),  # a resumed run logs its steps again
        _records(range(4000, 6000)),
    ]
    for batch in batches:
        sink.write_metrics(packed_run, batch)
        while not sink.settle():
            pass
        _as_rows(store, rows_run, batch)
        _same(store, packed_run, rows_run)
    chunks.seal_run(store, packed_run)
    _same(store, packed_run, rows_run)


@pytest.mark.parametrize(
    "batch",
    [
        _records([0, 1, 1, *range(2, 1500)]),  # a step logged twice: last wins
        _records(list(range(1500, 0, -1))),  # steps going down
        [(s, 10 * s, {"loss": 1.0} if s % 2 else {"acc": 1.0}) for s in range(1500)],
    ],
    ids=["step twice", "decreasing", "keys vary"],
)
def test_irregular_batches_are_stored_as_rows(store: Store, batch: list[Any]) -> None:
    packed_run, rows_run = create_run(store, "pack").id, create_run(store, "pack").id
    SqlSink(store).write_metrics(packed_run, batch)
    _as_rows(store, rows_run, batch)
    assert chunks.sealed_series(store, packed_run) == []
    assert _history(store, packed_run) == _history(store, rows_run)


def test_packed_points_round_trip_a_numpy_column(store: Store) -> None:
    run = create_run(store, "pack").id
    k = intern_keys(store, ["x"])["x"]
    steps = np.arange(0, 20_000, 7, dtype=np.int64)
    values = np.random.default_rng(3).standard_normal(len(steps))
    write_points(store, [], packed=[(run, k, Points.of(steps, values, steps * 3))])
    got = chunks.read_points(store, run, k)
    assert got.same(Points.of(steps, values, steps * 3)) and head_rows(store, run) == 0


def test_a_batch_whose_dicts_list_the_keys_in_other_orders_is_packed(store: Store) -> None:
    packed_run, rows_run = create_run(store, "pack").id, create_run(store, "pack").id
    batch = [
        (s, w, dict(reversed(items.items())) if s % 3 else items)
        for s, w, items in _records(range(PACK_MIN_RECORDS + 10))
    ]
    SqlSink(store).write_metrics(packed_run, batch)
    _as_rows(store, rows_run, batch)
    assert len(chunks.sealed_series(store, packed_run)) == len(KEYS)
    assert head_rows(store, packed_run) == 0
    assert _history(store, packed_run) == _history(store, rows_run)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 2_000),
    cuts=st.sets(st.integers(1, 1_999), max_size=6),
    as_rows=st.sets(st.tuples(st.integers(0, 6), st.sampled_from(KEYS)), max_size=4),
    seal_after=st.sets(st.integers(0, 6), max_size=2),
    shuffled=st.booleans(),
)
def test_packed_batches_cut_anywhere_keep_the_rollups_of_rows(
    store: Store,
    seed: int,
    n: int,
    cuts: set[int],
    as_rows: set[tuple[int, str]],
    seal_after: set[int],
    shuffled: bool,
) -> None:
    """Series written in batches cut at any step (mid-bucket, on a bucket's edge), in step
    order or not, each key's part packed (all keys of a batch in one write) or as rows,
    with seals between them: the chart rollups are those of the same points stored as
    rows. A packed batch merges the stored rollup row of an edge bucket it shares with
    sealed points, and recomputes it from the points when head rows share it."""
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.integers(1, 90, n))
    walls = 1_750_000_000_000 + 10 * steps
    values = {key: rng.standard_normal(n) for key in KEYS}
    for v in values.values():
        v[rng.integers(0, n, 3)] = rng.choice([math.nan, math.inf, -math.inf, -0.0], 3)
    packed_run, rows_run = create_run(store, "pack").id, create_run(store, "pack").id
    ids = intern_keys(store, list(KEYS))
    edges = [0, *sorted(c for c in cuts if c < n), n]
    batches = list(itertools.pairwise(edges))
    if shuffled:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    for i, (a, b) in enumerate(batches):
        packed = []
        for key in KEYS:
            rows = [
                (packed_run, ids[key], int(t), int(w), v)
                for t, w, v in zip(steps[a:b], walls[a:b], values[key][a:b].tolist(), strict=True)
            ]
            if (i, key) in as_rows:
                write_points(store, rows)
            else:
                packed.append(
                    (packed_run, ids[key], Points.of(steps[a:b], values[key][a:b], walls[a:b]))
                )
            write_points(store, [(rows_run, *r[1:]) for r in rows])
        write_points(store, [], packed=packed)
        if i in seal_after:
            chunks.seal_run(store, packed_run)
    assert rollup_rows(store, packed_run) == rollup_rows(store, rows_run)
    for key in KEYS:
        got = chunks.read_points(store, packed_run, ids[key])
        assert got.same(Points.of(steps, values[key], walls))


def test_a_series_given_twice_in_one_packed_write_is_stored_once_then_as_rows(
    store: Store,
) -> None:
    """The second of two parts of one series over the same steps in one write meets the
    first's chunk and goes to rows (last wins), as if written one after the other."""
    packed_run, rows_run = create_run(store, "pack").id, create_run(store, "pack").id
    k = intern_keys(store, ["loss"])["loss"]
    steps = np.arange(0, 600)
    first = Points.of(steps, np.sin(steps / 7.0), 10 * steps)
    second = Points.of(steps, np.cos(steps / 7.0), 10 * steps)
    write_points(store, [], packed=[(packed_run, k, first), (packed_run, k, second)])
    for part in (first, second):
        write_points(store, [
            (rows_run, k, int(t), int(w), v)
            for t, w, v in zip(part.steps, part.walls, part.values.tolist(), strict=True)
        ])  # fmt: skip
    assert chunks.read_points(store, packed_run, k).same(second)
    assert head_rows(store, packed_run) == len(steps)
    assert rollup_rows(store, packed_run) == rollup_rows(store, rows_run)
