"""The client's writer refreshes chart rollups once it is idle, outside the ingest
transactions; finish() leaves them exact, and housekeeping repairs what a killed
writer left behind."""

from __future__ import annotations

import math

import sqlalchemy as sa

import tracker
from tracker.client.sinks import SqlSink
from tracker.store import Store
from tracker.store.rollups import LEVELS
from tracker.store.runs import create_run, mark_stale_runs_crashed


def level(store: Store, run_id: int, width: int) -> list[tuple[int, int, int, float]]:
    query = sa.text(
        "SELECT first_step, last_step, count, max_value FROM metric_rollups "
        "WHERE run_id = :r AND width = :w ORDER BY bucket"
    )
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query, {"r": run_id, "w": width})]


def expected(steps: range, value: callable, width: int) -> list[tuple[int, int, int, float]]:
    out = []
    for start in range(steps.start // width * width, steps.stop, width):
        inside = [s for s in steps if start <= s < start + width]
        if inside:
            out.append((inside[0], inside[-1], len(inside), max(value(s) for s in inside)))
    return out


def test_finish_leaves_exact_rollups(store_url: str) -> None:
    run = tracker.init(project="r", uri=store_url, system_interval=None)
    for step in range(3000):
        run.log({"loss": float(step % 97)}, step=step)
    run.log({"loss": 1e6}, step=1234)  # a late rewrite of an earlier step (a spike)
    run.finish()
    store = Store(store_url)

    def value(step: int) -> float:
        return 1e6 if step == 1234 else float(step % 97)

    for width in LEVELS:
        assert level(store, run.id, width) == expected(range(3000), value, width)


def test_housekeeping_repairs_rollups_a_dead_writer_never_refreshed(store_url: str) -> None:
    store = Store(store_url)
    run = create_run(store, "r", now=1000.0)
    sink = SqlSink(store)
    sink.write_metrics(run.id, [(s, 1000 + s, {"a": float(s)}) for s in range(1000)])
    assert level(store, run.id, LEVELS[0]) == []  # the writer died before settle()
    assert mark_stale_runs_crashed(store, older_than=2000.0, now=3000.0) == [run.id]
    assert level(store, run.id, LEVELS[0]) == expected(range(1000), float, LEVELS[0])
    assert level(store, run.id, LEVELS[-1]) == [(0, 999, 1000, 999.0)]


def test_settle_refreshes_only_what_was_written(store_url: str) -> None:
    store = Store(store_url)
    run = create_run(store, "r")
    sink = SqlSink(store)
    sink.write_metrics(run.id, [(s, 0, {"a": math.inf if s == 5 else 1.0}) for s in range(10)])
    sink.settle()
    ((first, last, count, top),) = level(store, run.id, LEVELS[0])
    assert (first, last, count, top) == (0, 9, 10, 1.0)  # min/max are over finite values
    sink.settle()  # nothing new: no work, no error
