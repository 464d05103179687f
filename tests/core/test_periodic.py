"""The one loop of periodic work (tracker.periodic): one throttle, guarded tasks, fork-safe,
and the dashboard diagnosing a run logged over HTTP from its loop, never in the request."""

from __future__ import annotations

import logging
import os
import time

import pytest

from tests.support.polling import wait_for
from tracker import periodic
from tracker.errors import StoreUnavailable
from tracker.store import Store
from tracker.store.diagnoses import list_diagnoses
from tracker.web.app import create_app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_task_runs_every_period_and_no_sooner_than_ten_times_its_last_pass() -> None:
    clock = Clock()
    calls: list[float] = []

    def slow() -> None:  # a pass that takes 2 s of the loop's clock
        calls.append(clock.now)
        clock.now += 2.0

    loop = periodic.PeriodicLoop([periodic.Task("slow", 5.0, slow)], clock=clock)
    assert loop.run_due() == ["slow"]
    clock.now = 1000.0 + 5.0  # its period passed, but 10 x 2 s did not
    assert loop.run_due() == []
    clock.now = 1000.0 + 20.0
    assert loop.run_due() == ["slow"]
    assert calls == [1000.0, 1020.0]
    fast = periodic.PeriodicLoop([periodic.Task("fast", 5.0, lambda: None)], clock=clock)
    start = clock.now
    assert fast.run_due() == ["fast"]
    clock.now = start + 4.99
    assert fast.run_due() == []
    clock.now = start + 5.0
    assert fast.run_due() == ["fast"]


def test_a_failing_task_is_logged_and_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    runs: list[str] = []

    def broken() -> None:
        runs.append("broken")
        raise RuntimeError("boom")

    def down() -> None:
        runs.append("down")
        raise StoreUnavailable("the database is locked")

    loop = periodic.PeriodicLoop(
        [periodic.Task("broken", 1.0, broken), periodic.Task("down", 1.0, down)], clock=clock
    )
    with caplog.at_level(logging.WARNING, logger="tracker.periodic"):
        assert loop.run_due() == ["broken", "down"]
        clock.now += 1.0
        assert loop.run_due() == ["broken", "down"]
    assert runs == ["broken", "down"] * 2
    assert "broken failed" in caplog.text and "RuntimeError: boom" in caplog.text
    assert "down: the store is unavailable, will retry" in caplog.text


def test_tasks_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="every_s must be > 0"):
        periodic.Task("t", 0, lambda: None)
    loop = periodic.PeriodicLoop([periodic.Task("t", 1, lambda: None)])
    with pytest.raises(ValueError, match="already in this loop"):
        loop.add(periodic.Task("t", 2, lambda: None))


def test_the_thread_runs_the_tasks_and_stops() -> None:
    ticks: list[float] = []
    loop = periodic.PeriodicLoop([periodic.Task("tick", 0.05, lambda: ticks.append(1.0))])
    loop.ensure_running()
    loop.ensure_running()  # one thread per process, however often asked
    try:
        wait_for(lambda: len(ticks) >= 3, 10, "three passes of the loop's thread")
        assert loop.running()
    finally:
        loop.stop()
    assert not loop.running()
    count = len(ticks)
    time.sleep(0.2)
    assert len(ticks) == count  # stopped for good
    loop.ensure_running()  # a stopped loop does not start again
    assert not loop.running()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_thread(tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "child"
    loop = periodic.PeriodicLoop(
        [periodic.Task("mark", 0.05, lambda: marker.write_text(str(os.getpid())))]
    )
    loop.ensure_running()
    marker.unlink(missing_ok=True)
    pid = os.fork()
    if pid == 0:  # the child inherited the loop, not its thread
        code = 1
        try:
            marker.unlink(missing_ok=True)
            loop.ensure_running()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if marker.exists() and marker.read_text() == str(os.getpid()):
                    code = 0
                    break
                time.sleep(0.02)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    loop.stop()
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_dashboard_diagnoses_a_run_logged_over_http_from_its_loop(store_url: str) -> None:
    app = create_app(
        {"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True, "LIVE_DOCTOR_S": 0.2}
    )
    loop = app.extensions["tracker_periodic"]
    try:
        assert [t.name for t in loop.tasks] == ["live doctor", "profile summaries"]
        client = app.test_client()
        created = client.post("/api/v1/runs", json={"project": "p", "name": "nan"})
        assert created.status_code in (200, 201), created.json
        run_id = int(created.json["id"])
        now = int(time.time() * 1000)
        records = [[s, now + s, {"loss": 1.0 / (s + 1) if s < 30 else "NaN"}] for s in range(40)]
        response = client.post(f"/api/v1/runs/{run_id}/metrics", json={"records": records})
        assert response.status_code == 200, response.json
        store: Store = app.extensions["tracker"].store
        found = wait_for(lambda: list_diagnoses(store, run_id), 30, "the live doctor's pass")
        assert [d.data["code"] for d in found] == ["nonfinite"]
    finally:
        loop.stop()


def test_the_dashboard_seals_on_a_thread_of_its_own(store_url: str) -> None:
    # a seal batch may wait for SQLite's write lock: it must not hold up the crash watch
    cfg = {"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True, "SEAL_S": 10,
           "LIVE_DOCTOR_S": 5}  # fmt: skip
    app = create_app(cfg)
    loop, sealing = app.extensions["tracker_periodic"], app.extensions["tracker_sealing"]
    try:
        assert "seal series" not in [t.name for t in loop.tasks]
        assert [t.name for t in sealing.tasks] == ["seal series"]
        assert sealing.running() and sealing._thread is not loop._thread
    finally:
        loop.stop()
        sealing.stop()
