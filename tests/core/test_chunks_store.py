"""Sealed chunks in the store (tracker.store.chunks, migration 0025): a series read through
``metric_history`` and ``count_points`` answers the same before and after it is sealed, on
SQLite and PostgreSQL, through overwrites of sealed steps, MLflow's every-value appends,
NaN, +-Inf and -0.0; and a seal deletes only the head rows it sealed."""

from __future__ import annotations

import math
import struct
import time
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.series_tables import head_rows, rollup_rows
from tracker.store import Store, chunks, rollups, series
from tracker.store import models as m
from tracker.store.engine import read_conn
from tracker.store.lifecycle import delete_runs
from tracker.store.metrics import (
    append_points,
    count_points,
    intern_keys,
    metric_history,
    write_points,
)
from tracker.store.points import write_rows
from tracker.store.purge import purge_deleted
from tracker.store.runs import create_run

SPECIAL = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, -2.25, 1e300]


def _bits(x: float) -> bytes:
    return struct.pack("<d", x) if not math.isnan(x) else b"nan"


def _history(store: Store, run: int, key: str, **kw: Any) -> list[tuple[int, float, bytes]]:
    return [(p.step, p.wall_time, _bits(p.value)) for p in metric_history(store, run, key, **kw)]


READS: list[dict[str, Any]] = [
    {}, {"lo": 5}, {"hi": 17}, {"lo": 3, "hi": 9}, {"limit": 4}, {"limit": 1},
    {"lo": 8, "limit": 5}, {"lo": 1000}, {"hi": -1},
]  # fmt: skip


def _answers(store: Store, run: int, key: str) -> list[Any]:
    return [_history(store, run, key, **kw) for kw in READS] + [count_points(store, run)]


def test_a_sealed_series_reads_as_it_did(store: Store) -> None:
    run = create_run(store, "chunks").id
    keys = intern_keys(store, ["loss", "other"])
    k = keys["loss"]
    write_points(store, [(run, k, s, 1000 + s, SPECIAL[s % len(SPECIAL)]) for s in range(20)])
    write_points(store, [(run, keys["other"], s, 5, float(s)) for s in range(3)])
    append_points(store, [(run, k, 7, 3000, 70.0), (run, k, 7, 3001, 71.0)])  # MLflow, step 7
    before = _answers(store, run, "loss")
    assert chunks.seal(store, run, k, chunk_points=6) == 22
    assert chunks.sealed_series(store, run) == [k]
    assert head_rows(store, run) == 3  # only "other" is left in the head
    assert _answers(store, run, "loss") == before
    assert _history(store, run, "other") == [(s, 0.005, _bits(float(s))) for s in range(3)]


def test_a_write_beside_sealed_steps_leaves_their_chunks(store: Store) -> None:
    # a rollup bucket holding sealed and new points is computed from both merged; the
    # chunks stay as they are
    run = create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    write_points(store, [(run, k, s, 1000, float(s)) for s in range(300)])
    chunks.seal(store, run, k, chunk_points=100)
    write_points(store, [(run, k, 600, 2000, 6.0)])  # rollup bucket 2: no chunk there
    write_points(store, [(run, k, 299, 2000, -1.0), (run, k, 310, 2000, 31.0)])  # bucket 1
    assert head_rows(store, run) == 3 and len(chunks.sealed_series(store, run)) == 1
    assert count_points(store, run) == 302
    r = m.MetricRollupRow
    with read_conn(store.engine) as conn:
        bucket1 = conn.execute(
            m.sa.select(r.first_step, r.last_step, r.count, r.min_value, r.max_value,
                        r.last_value).where(r.run_id == run, r.width == 256, r.bucket == 1)
        ).one()  # fmt: skip
    assert tuple(bucket1) == (256, 310, 45, -1.0, 298.0, 31.0)


def test_a_write_to_a_sealed_step_wins_and_is_resealed(store: Store) -> None:
    run = create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    write_points(store, [(run, k, s, 1000, float(s)) for s in range(30)])
    chunks.seal(store, run, k, chunk_points=8)
    write_points(store, [(run, k, 3, 2000, -3.0), (run, k, 30, 2000, 30.0)])  # overwrite, new
    append_points(store, [(run, k, 12, 2100, 120.0)])  # a second MLflow value at a sealed step
    expected = [(s, 1.0, _bits(float(s))) for s in range(31)]
    expected[3] = (3, 2.0, _bits(-3.0))
    expected[30] = (30, 2.0, _bits(30.0))
    expected.insert(13, (12, 2.1, _bits(120.0)))
    assert _history(store, run, "loss") == expected
    assert count_points(store, run) == 32
    assert head_rows(store, run) == 3  # the chunks stay; the head's rows win over them
    assert chunks.seal(store, run, k, chunk_points=8) == 3
    assert head_rows(store, run) == 0
    assert _history(store, run, "loss") == expected
    assert count_points(store, run) == 32


def test_rows_written_while_a_seal_deletes_are_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL's point writers do not take the seal's lock: rows another connection
    # writes between the seal's read of the head and its delete -- one replaced, one new
    # in the sealed range -- stay in the head and win (SQLite's write lock keeps writers
    # out of a seal's transaction altogether)
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's write lock excludes other writers during a seal")
    run = create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    write_points(store, [(run, k, s, 1000, float(s)) for s in (0, 1, 2, 4, 5)])
    fired = []
    fetch = chunks._fetch

    def other_writer_first(conn: Any, sql: str, params: Any) -> Any:
        # the seal's own statement runs as it is, just after the other writer commits
        if sql.startswith("DELETE FROM metric_points") and not fired:
            fired.append(sql)
            rows = [(run, k, 2, 9000, 99.0), (run, k, 3, 9000, 33.0)]
            write_rows(store.engine, rows, refresh_rollups=False)  # its own connection
        return fetch(conn, sql, params)

    monkeypatch.setattr(chunks, "_fetch", other_writer_first)
    assert chunks.seal(store, run, k, chunk_points=2) == 5
    assert fired
    assert head_rows(store, run) == 2
    assert _history(store, run, "loss") == [
        (0, 1.0, _bits(0.0)), (1, 1.0, _bits(1.0)), (2, 9.0, _bits(99.0)),
        (3, 9.0, _bits(33.0)), (4, 1.0, _bits(4.0)), (5, 1.0, _bits(5.0)),
    ]  # fmt: skip


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 40), st.sampled_from(SPECIAL)),
        st.tuples(st.just("append"), st.integers(0, 40), st.sampled_from(SPECIAL)),
        st.tuples(st.just("seal"), st.integers(1, 9), st.just(0.0)),
        st.tuples(st.just("seal some"), st.integers(1, 9), st.just(0.0)),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_any_writes_and_seals_read_like_the_rows_alone(store: Store, ops: list[Any]) -> None:
    # the same operations on two runs, one never sealed: every read answers the same
    sealed, plain = create_run(store, "chunks").id, create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    for i, (op, step, value) in enumerate(ops):
        for run in (sealed, plain):
            if op == "write":
                write_points(store, [(run, k, step, 1000 + i, value)])
            elif op == "append":
                append_points(store, [(run, k, step, 1000 + i, value)])
        if op == "seal":
            chunks.seal(store, sealed, k, chunk_points=step)
        elif op == "seal some":  # the lowest steps only, as seal_run's batches
            chunks.seal(store, sealed, k, chunk_points=4, max_points=step)
    a, b = _answers(store, sealed, "loss"), _answers(store, plain, "loss")
    assert a == b
    assert rollup_rows(store, sealed) == rollup_rows(store, plain)
    assert _charts(store, sealed) == _charts(store, plain)


CHARTS: list[dict[str, Any]] = [
    {}, {"max_buckets": 3}, {"max_buckets": 1}, {"lo": 5, "hi": 30, "max_buckets": 4},
    {"lo": 12, "hi": 12}, {"lo": 41, "hi": 99},
]  # fmt: skip


def _charts(store: Store, run: int) -> list[Any]:
    """What the chart reads answer (store.series): every bucket to the bit, its wall time."""
    out = []
    for kw in CHARTS:
        read = series.read_series(store, run, "loss", **kw)
        out.append(
            (
                read.series.lo,
                read.series.hi,
                read.wall_ms,
                [(b.first_step, b.last_step, b.min, b.max, _bits(b.last), b.count,
                  b.nan_count, b.posinf_count, b.neginf_count) for b in read.series.buckets],
            )
        )  # fmt: skip
    return out


def test_an_unknown_key_has_no_history(store: Store) -> None:
    run = create_run(store, "chunks").id
    assert metric_history(store, run, "never logged") == []


def test_the_chunk_size_must_be_positive(store: Store) -> None:
    with pytest.raises(ValueError, match="chunk_points"):
        chunks.seal(store, 1, 1, chunk_points=0)


def test_purge_deletes_a_run_s_chunks(store: Store) -> None:
    run, kept = create_run(store, "chunks").id, create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    for r in (run, kept):
        write_points(store, [(r, k, s, 1000, float(s)) for s in range(10)])
        chunks.seal(store, r, k, chunk_points=4)
    write_points(store, [(run, k, 10, 1000, 10.0)])  # one head row beside the chunks
    delete_runs(store, [run], now=time.time() - 40 * 86400)
    dry = purge_deleted(store, older_than=time.time() - 30 * 86400)
    assert [(r.id, r.points) for r in dry.runs] == [(run, 11)]
    purge_deleted(store, older_than=time.time() - 30 * 86400, dry_run=False)
    assert chunks.sealed_series(store, run) == []
    assert chunks.sealed_series(store, kept) == [k] and count_points(store, kept) == 10


def test_the_doctor_and_the_sweeps_read_a_sealed_series_as_the_rows(store: Store) -> None:
    from tracker.store import sweeps
    from tracker.store.diagnoses import read_run_series

    sealed, plain = create_run(store, "chunks").id, create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    rows = [(s, 1000 + s, SPECIAL[s % len(SPECIAL)] if s % 5 else 10.0 - s) for s in range(40)]
    for run in (sealed, plain):
        write_points(store, [(run, k, s, w, v) for s, w, v in rows])
        append_points(store, [(run, k, 7, 5000, -1.0)])
    chunks.seal(store, sealed, k, chunk_points=9)
    for run in (sealed, plain):
        write_points(store, [(run, k, 3, 6000, 33.0), (run, k, 40, 6000, 4.0)])  # head rows

    def doctor(run: int, **kw: Any) -> Any:
        return {
            key: [(s, _bits(v)) for s, v in points]
            for key, points in read_run_series(store, run, **kw).items()
        }

    for kw in ({}, {"max_points": 5}, {"until_step": 20}, {"max_points": 3, "until_step": 7}):
        assert doctor(sealed, **kw) == doctor(plain, **kw), kw
    for goal in ("minimize", "maximize"):
        assert sweeps._objective(store, sealed, k, "best", goal) == sweeps._objective(
            store, plain, k, "best", goal
        )
    with read_conn(store.engine) as conn:
        for after in (None, 6, 39):
            a = sweeps._series(conn, {sealed: after}, k)[sealed]
            b = sweeps._series(conn, {plain: after}, k)[plain]
            assert {s: _bits(v) for s, v in a.items()} == {s: _bits(v) for s, v in b.items()}


def test_a_chart_reads_a_sealed_series_at_every_zoom(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a row budget of 2,000 makes a 12,000-point series take every path of store.series:
    # the rollup levels at coarse zoom, grouped points and full resolution closer in
    monkeypatch.setattr(series, "ROW_BUDGET", 2_000)
    sealed, plain = create_run(store, "chunks").id, create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    rows = [(s, 1000 + s, math.sin(s / 50) if s % 997 else SPECIAL[s % 3]) for s in range(12_000)]
    for run in (sealed, plain):
        write_points(store, [(run, k, s, w, v) for s, w, v in rows])
        append_points(store, [(run, k, 5010, 9000, 4.0)])
    assert chunks.seal_run(store, sealed, batch_points=5_000) == (12_001, True)
    assert head_rows(store, sealed) == 0
    windows = [
        {"max_buckets": 100},  # rollup-256
        {"lo": 4_100, "hi": 5_500, "max_buckets": 300},  # grouped points
        {"lo": 5_000, "hi": 5_040, "max_buckets": 300},  # full resolution
        {"lo": 11_990, "hi": 20_000},
    ]
    sources = []
    for kw in windows:
        a = series.read_series(store, sealed, "loss", **kw)
        b = series.read_series(store, plain, "loss", **kw)
        assert (a.source, a.wall_ms, a.series.lo, a.series.hi) == (
            b.source, b.wall_ms, b.series.lo, b.series.hi
        ), kw  # fmt: skip
        assert [_bucket(x) for x in a.series.buckets] == [_bucket(x) for x in b.series.buckets]
        sources.append(a.source)
    assert sources == ["rollup-256", "points", "points", "points"]
    aligned = series.read_aligned(store, [sealed, plain], ["loss"], max_buckets=50)[0][0]
    assert [_bucket(x) for x in aligned.reads[sealed].series.buckets] == [
        _bucket(x) for x in aligned.reads[plain].series.buckets
    ]


def _bucket(b: Any) -> tuple[Any, ...]:
    return (b.first_step, b.last_step, b.min, b.max, _bits(b.last), b.count, b.nan_count,
            b.posinf_count, b.neginf_count)  # fmt: skip


def test_a_seal_never_deadlocks_with_a_writer_of_its_run(store: Store) -> None:
    # a writer holds a sealed-range row locked and then takes the run's rollup lock (as
    # write_rows does: points first, rollups after); the seal holds that lock and must not
    # wait for the row: it skips it, commits, and the writer's newer value stays in the head
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's write lock serialises the seal and the writer")
    import threading

    run = create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    write_points(store, [(run, k, s, 1000, float(s)) for s in range(6)])
    sealed: list[Any] = []
    with store.engine.connect() as writer:
        writer.execute(
            m.sa.text("UPDATE metric_points SET value = 77.0, wall_ms = 5000 WHERE run_id = :r "
                      "AND key_id = :k AND step = 3"), {"r": run, "k": k},
        )  # fmt: skip
        seal = threading.Thread(target=lambda: sealed.append(chunks.seal(store, run, k)))
        seal.start()
        seal.join(timeout=5)  # the seal may not wait for the writer's row
        assert not seal.is_alive(), "the seal waited for a row the writer holds"
        writer.execute(
            m.sa.text("SELECT pg_advisory_xact_lock(:c, :r)"),
            {"c": rollups.PG_LOCK_CLASS, "r": run},
        )
        writer.commit()
    assert sealed == [6]
    assert _history(store, run, "loss")[3] == (3, 5.0, _bits(77.0))
    assert head_rows(store, run) == 1  # the writer's row, newer than its sealed copy


def test_the_newest_points_decode_only_the_newest_chunks(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read_tail_in`` (what the doctor reads): the newest points at or before a step are
    those of the whole series, through MLflow's several values a step and head rows that
    replace sealed values; a chunk that runs past ``hi`` holds fewer points than it counts
    (it reads everything then)."""
    run = create_run(store, "chunks").id
    k = intern_keys(store, ["loss"])["loss"]
    write_points(store, [(run, k, s, s, float(s)) for s in range(1000)])
    append_points(store, [(run, k, 999, 1, v) for v in (1.0, 2.0, 3.0)])  # 4 values at 999
    chunks.seal(store, run, k, chunk_points=100)
    write_points(store, [(run, k, 999, 7, -1.0), (run, k, 1200, 7, 12.0)])  # head rows
    c = m.MetricChunkRow
    with read_conn(store.engine) as conn:
        newest = conn.execute(
            sa.select(c.first_step, c.count).order_by(c.first_step.desc()).limit(1)
        ).one()
    real = chunks.read_points_in
    starts: list[int | None] = []

    def spy(conn: Any, run_id: int, key_id: int, lo: Any, hi: Any) -> Any:
        starts.append(lo)
        return real(conn, run_id, key_id, lo, hi)

    def columns(p: Any, n: int) -> list[list[Any]]:
        return [getattr(p, f)[-n:].tolist() for f in ("steps", "seqs", "walls", "values")]

    with read_conn(store.engine) as conn:
        for points, hi in ((150, None), (150, 990), (5, 995), (newest.count, None), (50, 905)):
            whole = real(conn, run, k, None, hi)
            starts.clear()
            with monkeypatch.context() as patch:
                patch.setattr(chunks, "read_points_in", spy)
                tail = chunks.read_tail_in(conn, run, k, points, hi)
            assert len(tail) >= min(points, len(whole)), (points, hi)
            assert columns(tail, points) == columns(whole, points), (points, hi)
            if (points, hi) == (150, None):
                assert len(starts) == 1 and starts[0] >= 800  # 2-3 chunks of ~100, not 10
            if (points, hi) == (newest.count, None):
                assert starts == [newest.first_step]  # the newest chunk alone
            if (points, hi) == (50, 905):  # its 6 points up to 905 are too few: all of them
                assert starts == [newest.first_step, None]
