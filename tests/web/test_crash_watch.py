"""A dead run is noticed within seconds with only the dashboard running, and ends at its
last heartbeat (issue: crash detection took ~2 minutes and only a worker or scheduler swept)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.runner import Procs, alive
from tracker.entities import JobSpec
from tracker.periodic import PeriodicLoop, crash_silent_runs, crash_silent_runs_once
from tracker.rules import liveness
from tracker.store import Store, queue
from tracker.store.runs import create_run, get_run, heartbeat
from tracker.web.app import create_app

TRAIN = """
import sys, time, tracker
run = tracker.init(project="crash", heartbeat_interval=0.2, system_interval=None)
run.log({"loss": 1.0}, step=0)
run.flush()
print("RUN", run.id, flush=True)
time.sleep(600)
"""


def test_the_defaults_detect_a_dead_run_within_30_seconds() -> None:
    assert liveness.HEARTBEAT_S * 3 < liveness.RUN_STALE_S
    assert liveness.DETECTED_WITHIN_S <= 30


def test_a_crashed_run_ends_at_its_last_heartbeat(store: Store) -> None:
    old = create_run(store, "p", now=1000.0)
    heartbeat(store, old.id, now=1500.0)
    fresh = create_run(store, "p", now=5000.0)
    assert crash_silent_runs_once(store, 20.0, now=5010.0) == [old.id]
    run = get_run(store, old.id)
    assert (run.status, run.ended_at, run.failure_class) == ("crashed", 1500.0, "crashed")
    assert get_run(store, fresh.id).status == "running"
    assert crash_silent_runs_once(store, 20.0, now=5010.0) == []  # a second sweeper: nothing


def test_a_run_held_by_a_live_job_lease_is_left_to_the_reaper(store: Store) -> None:
    job = queue.enqueue(store, JobSpec(argv=["true"]), now=1000.0)
    claimed, _ = queue.claim(store, "w1", lease_s=60.0, now=1000.0) or (None, None)
    assert claimed is not None and claimed.run_id == job.run_id
    assert crash_silent_runs_once(store, 20.0, now=1030.0) == []  # its lease holds to 1060
    assert get_run(store, job.run_id).status == "running"
    assert crash_silent_runs_once(store, 20.0, now=1061.0) == [job.run_id]  # expired too


def test_create_app_runs_a_crash_watch_only_when_asked(store_url: str) -> None:
    quiet = create_app({"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True})
    assert "tracker_periodic" not in quiet.extensions
    app = create_app({"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True, "RUN_STALE_S": 2.0})
    loop: PeriodicLoop = app.extensions["tracker_periodic"]
    try:
        assert [(t.name, t.every_s) for t in loop.tasks] == [("crash watch", liveness.SWEEP_S)]
        assert loop.running()
        with pytest.raises(ValueError, match="RUN_STALE_S"):
            create_app({"STORE_URI": store_url, "TESTING": True, "NO_AUTH": True,
                        "RUN_STALE_S": -1.0})  # fmt: skip
        with pytest.raises(ValueError, match="stale_s"):
            crash_silent_runs(app.extensions["tracker"].store, 0)
    finally:
        loop.stop()


@pytest.mark.slow
def test_sigkilled_training_process_is_crashed_by_the_dashboard_alone(
    store_url: str, tmp_path: Path
) -> None:
    """No worker, no scheduler: `tracker ui` (gunicorn) is the only tracker process."""
    procs = Procs(store_url, tmp_path)
    try:
        ui = procs.tracker("ui", "--no-auth", "--port", "0", "--run-stale-seconds", "2", name="ui")
        train = subprocess.Popen(
            [sys.executable, "-c", TRAIN], stdout=subprocess.PIPE, text=True,
            env=procs.env(), cwd=tmp_path,
        )  # fmt: skip
        assert train.stdout is not None
        run_id = int(train.stdout.readline().split()[1])
        store = Store(store_url)
        first = get_run(store, run_id).heartbeat_at
        wait_for(lambda: get_run(store, run_id).heartbeat_at != first, 10,
                 "the training process to send a heartbeat")  # fmt: skip
        train.send_signal(signal.SIGKILL)
        train.wait(10)
        killed_at = time.time()
        # stale limit 2 s + one pass of the watch (5 s), with slack for a loaded machine
        run = wait_for(
            lambda: (r := get_run(store, run_id)).status == "crashed" and r,
            30,
            "the dashboard's crash watch to mark the SIGKILLed run crashed",
        )
        assert alive(ui.pid), ui.output()
        assert run.ended_at == run.heartbeat_at  # when it was last seen, not when noticed
        assert run.ended_at <= killed_at
        assert run.failure_hint == "the training process stopped sending heartbeats"
        store.close()
    finally:
        procs.close()
