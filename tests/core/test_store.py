"""Store round-trips on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import math

import pytest
import sqlalchemy as sa

from tracker.errors import InvalidInput, NotFound
from tracker.store import Store
from tracker.store.checkpoints import add_checkpoint, list_checkpoints
from tracker.store.events import add_event, list_events
from tracker.store.metrics import (
    count_points,
    intern_keys,
    log_metrics,
    metric_history,
    metric_keys,
    write_points,
)
from tracker.store.runs import (
    create_run,
    finish_run,
    get_run,
    list_runs,
    mark_stale_runs_crashed,
    update_run,
)


def test_run_round_trip_config_tags(store: Store) -> None:
    config = {"lr": 3e-4, "model": {"layers": 4, "width": 64}, "aug": ["flip", "crop"], "x": None}
    run = create_run(store, "digits", "cnn", config, ["baseline", "v2"], host="h", pid=12)
    again = get_run(store, run.id)
    assert again.config == config
    assert again.tags == ["baseline", "v2"]
    assert (again.project, again.name, again.status) == ("digits", "cnn", "running")
    assert (again.host, again.pid) == ("h", 12)
    assert again.started_at is not None and again.ended_at is None


def test_default_name_and_list_filters(store: Store) -> None:
    a = create_run(store, "p1", None, {}, ["x"])
    b = create_run(store, "p2", None, {}, ["y"])
    finish_run(store, b.id, "failed", error="ValueError: boom")
    assert a.name == f"run-{a.id}"
    assert [r.id for r in list_runs(store, project="p1")] == [a.id]
    assert [r.id for r in list_runs(store, status="failed")] == [b.id]
    assert [r.id for r in list_runs(store, tag="y")] == [b.id]
    assert list_runs(store, tag="nope") == []
    assert [r.id for r in list_runs(store)] == [b.id, a.id]  # newest first
    assert get_run(store, b.id).error == "ValueError: boom"


def test_non_finite_values_round_trip_exactly(store: Store) -> None:
    run = create_run(store, "p")
    values = {"nan": math.nan, "pinf": math.inf, "ninf": -math.inf, "tiny": 5e-324, "big": 1e308}
    log_metrics(store, run.id, 0, values)
    for key, expected in values.items():
        (point,) = metric_history(store, run.id, key)
        if math.isnan(expected):
            assert math.isnan(point.value)
        else:
            assert point.value == expected
    last = get_run(store, run.id).last_metrics
    assert math.isnan(last["nan"]) and last["pinf"] == math.inf and last["ninf"] == -math.inf


def test_relogging_a_step_is_idempotent_last_value_wins(store: Store) -> None:
    run = create_run(store, "p")
    key = intern_keys(store, ["loss"])["loss"]
    rows = [(run.id, key, step, 1000 * step, float(step)) for step in range(100)]
    write_points(store, rows)
    write_points(store, rows)  # a retried batch
    write_points(store, [(run.id, key, 5, 1, 55.0), (run.id, key, 5, 2, 56.0)])  # dup in a batch
    history = metric_history(store, run.id, "loss")
    assert [p.step for p in history] == list(range(100))
    assert history[5].value == 56.0
    assert count_points(store, run.id) == 100


def test_last_metrics_follow_the_highest_step(store: Store) -> None:
    run = create_run(store, "p")
    log_metrics(store, run.id, 10, {"acc": 0.5})
    log_metrics(store, run.id, 3, {"acc": 0.1})  # late, older step: not the last value
    assert get_run(store, run.id).last_metrics == {"acc": 0.5}
    assert metric_keys(store, run.id) == ["acc"]


def test_history_range(store: Store) -> None:
    run = create_run(store, "p")
    key = intern_keys(store, ["m"])["m"]
    write_points(store, [(run.id, key, s, 0, float(s)) for s in range(50)])
    assert [p.step for p in metric_history(store, run.id, "m", lo=10, hi=12)] == [10, 11, 12]


def test_checkpoints_and_events_round_trip(store: Store) -> None:
    run = create_run(store, "p")
    add_checkpoint(store, run.id, 10, "/ck/a.pt", 123, "ab" * 32, {"val/acc": 0.5})
    add_checkpoint(store, run.id, 20, "/ck/b.pt", 456, "cd" * 32, {"val/acc": 0.7})
    cks = list_checkpoints(store, run.id)
    assert [(c.step, c.path, c.bytes, c.metrics) for c in cks] == [
        (20, "/ck/b.pt", 456, {"val/acc": 0.7}),
        (10, "/ck/a.pt", 123, {"val/acc": 0.5}),
    ]
    add_event(store, run.id, "diagnosis", "loss became NaN", {"step": 3})
    (event,) = list_events(store, run.id)
    assert (event.kind, event.message, event.data) == ("diagnosis", "loss became NaN", {"step": 3})


def test_stale_runs_are_marked_crashed(store: Store) -> None:
    old = create_run(store, "p", now=1000.0)
    fresh = create_run(store, "p", now=5000.0)
    assert mark_stale_runs_crashed(store, older_than=2000.0, now=6000.0) == [old.id]
    assert get_run(store, old.id).status == "crashed"
    assert get_run(store, fresh.id).status == "running"


def test_errors_name_the_problem(store: Store) -> None:
    with pytest.raises(NotFound, match="run 999 does not exist"):
        get_run(store, 999)
    with pytest.raises(InvalidInput, match="'done' is not a run status"):
        create_run(store, "p", status="done")
    run = create_run(store, "p")
    with pytest.raises(InvalidInput, match="no settable field"):
        update_run(store, run.id, id=5)


def test_store_hands_out_frozen_dataclasses(store: Store) -> None:
    run = create_run(store, "p")
    with pytest.raises(AttributeError):
        run.status = "finished"  # type: ignore[misc]


def test_http_uri_is_not_a_database(tmp_path) -> None:
    with pytest.raises(InvalidInput, match="server address"):
        Store("http://127.0.0.1:5000")


def test_opening_a_new_sqlite_file_another_connection_is_writing_waits(tmp_path) -> None:
    """SQLite refuses the switch to WAL at once ("database is locked", no busy handler)
    while another connection writes a new file; the store waits for it instead."""
    import sqlite3
    import threading

    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE mine (a)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO mine VALUES (1)")
    threading.Timer(0.5, other.execute, ["COMMIT"]).start()
    store = Store(f"sqlite:///{path}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("SELECT a FROM mine").all() == [(1,)]  # nothing lost
    other.close()


def test_sqlite_settings(tmp_path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
        sql = conn.execute(
            sa.text("SELECT sql FROM sqlite_master WHERE name = 'metric_points'")
        ).scalar()
    assert "WITHOUT ROWID" in sql
