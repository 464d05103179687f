"""The client's HTTP sink against a real server: every Sink call, errors mapped back to the
tracker's exceptions, and a training subprocess that keeps logging while the server is
killed and restarted -- nothing lost, nothing duplicated."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

import tracker
from tests.support.polling import wait_for
from tests.support.web import SCRIPTS, TOKEN, TRACKER, Proc, free_port, refusing_port
from tracker.client.http_sink import HttpSink
from tracker.client.sinks import sink_for_uri
from tracker.errors import InvalidMetricValue, NotFound, StoreUnavailable, TrackerError
from tracker.store import Store
from tracker.store.checkpoints import list_checkpoints
from tracker.store.events import list_events
from tracker.store.metrics import count_points, metric_history
from tracker.store.runs import get_run


@pytest.fixture
def server(token_app, serve):
    return serve(token_app)


def test_every_sink_call_round_trips(make_app, serve, tmp_path: Path) -> None:
    token_app = make_app(TOKEN=TOKEN, CHECKPOINT_ROOTS=[str(tmp_path / "ckpts")])
    server = serve(token_app)
    store = token_app.extensions["tracker"].store
    sink = HttpSink(server.url, token=TOKEN)
    run = sink.create_run("p", "r", {"lr": 0.1}, ["t"], host="h", pid=3, command=["x"])
    assert (run.project, run.name, run.config, run.tags, run.pid) == (
        "p",
        "r",
        {"lr": 0.1},
        ["t"],
        3,
    )
    records = [
        (i, 1000 * i, {"a": float(i), "b": math.nan if i == 2 else -math.inf}) for i in range(500)
    ]
    sink.write_metrics(run.id, records)
    sink.write_metrics(run.id, records)  # idempotent
    assert count_points(store, run.id) == 1000
    history = metric_history(store, run.id, "b")
    assert math.isnan(history[2].value) and history[3].value == -math.inf
    sink.heartbeat(run.id)
    sink.add_event(run.id, "note", "hello", {"k": 1})
    notes = [e.message for e in list_events(store, run.id) if e.kind != "diagnosis"]
    assert notes == ["hello"]
    path = str(tmp_path / "ckpts" / "c.pt")
    ckpt = sink.add_checkpoint(run.id, 5, path, 9, "f" * 64, {"acc": 0.5})
    assert sink.list_checkpoints(run.id) == [ckpt]
    sink.set_checkpoint_state(ckpt.id, "missing")
    assert list_checkpoints(store, run.id)[0].state == "missing"
    queued = sink.create_run("p", None, {}, [], status="queued")
    started = sink.start_run(queued.id, {"lr": 0.2}, pid=9)
    assert (started.status, started.config) == ("running", {"lr": 0.2})
    sink.finish_run(run.id, "failed", error="boom", exit_code=1)
    assert (get_run(store, run.id).status, get_run(store, run.id).error) == ("failed", "boom")


def test_errors_come_back_as_tracker_exceptions(server) -> None:
    sink = HttpSink(server.url, token=TOKEN)
    with pytest.raises(NotFound):
        sink.write_metrics(424242, [(0, 0, {"a": 1.0})])
    run = sink.create_run("p", None, {}, [])
    with pytest.raises(InvalidMetricValue) as info:
        sink._send("POST", f"/runs/{run.id}/metrics", {"records": [[0, 0, {"a": "x"}]]})
    assert info.value.field == "a"
    with pytest.raises(TrackerError) as denied:
        HttpSink(server.url, token="wrong").heartbeat(run.id)
    assert (denied.value.code, denied.value.http_status) == ("unauthorized", 401)
    assert "TRACKER_TOKEN" in denied.value.message and "wrong" not in denied.value.message


def test_an_absent_server_is_unavailable_not_fatal() -> None:
    with refusing_port() as port:
        sink = HttpSink(f"http://127.0.0.1:{port}", retry_for=0.2)
        with pytest.raises(StoreUnavailable):
            sink.write_metrics(1, [(0, 0, {"a": 1.0})])
        with pytest.raises(StoreUnavailable):
            sink.create_run("p", None, {}, [])


def test_tracker_uri_http_uses_the_sink_and_the_token(server, token_app, monkeypatch) -> None:
    monkeypatch.setenv("TRACKER_TOKEN", TOKEN)
    sink = sink_for_uri(server.url)
    assert isinstance(sink, HttpSink) and sink.token == TOKEN and TOKEN not in repr(sink)
    run = tracker.init(project="live", uri=server.url, system_interval=None)
    for step in range(20_000):
        tracker.log({"loss": 1.0 / (step + 1)}, step=step)
    tracker.finish()
    store = token_app.extensions["tracker"].store
    assert count_points(store, run.id) == 20_000
    assert get_run(store, run.id).status == "finished"


@pytest.mark.slow
def test_server_restarted_mid_run_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "server.db"
    env = {**os.environ, "TRACKER_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    server_argv = [*TRACKER, "ui", "--port", str(port), "--uri", f"sqlite:///{db}"]

    def start_server() -> Proc:
        proc = Proc(server_argv, env, tmp_path)
        wait_for(lambda: _healthy(port), 60, "the dashboard to answer /api/v1/health")
        return proc

    server = start_server()
    gate = tmp_path / "gate"
    client_env = {**env, "TRACKER_URI": f"http://127.0.0.1:{port}"}
    training = Proc([sys.executable, str(SCRIPTS / "http_logger.py"), str(gate), "6000"],
                    client_env, tmp_path)  # fmt: skip
    run_id = int(training.wait_for_line("RUN", 60).split()[1])
    training.wait_for_line("HALF", 60)
    server.kill()  # SIGKILL: whatever was in flight is lost on the server side
    gate.touch()
    training.wait_for_line("LOGGED", 60)  # the second half was logged with no server
    server = start_server()
    training.wait_for_line("DONE", 120)
    assert training.wait(60) == 0, training.output()
    server.kill()
    assert TOKEN not in server.output() and TOKEN not in training.output()
    store = Store(f"sqlite:///{db}")
    assert get_run(store, run_id).status == "finished"
    for key, sign in (("a", 1.0), ("b", -1.0)):
        points = metric_history(store, run_id, key)
        assert [p.step for p in points] == list(range(6000))
        assert all(p.value == sign * p.step for p in points)
    with store.engine.connect() as conn:
        total = conn.execute(
            sa.text("SELECT count(*) FROM metric_points WHERE run_id = :r"), {"r": run_id}
        ).scalar_one()
        rolled = conn.execute(
            sa.text("SELECT sum(count) FROM metric_rollups WHERE run_id = :r AND width = 256"),
            {"r": run_id},
        ).scalar_one()
    assert total == 12_000 and rolled == 12_000
    store.close()


def _healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False
