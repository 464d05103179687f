"""Ctrl-C of ``tracker ui`` / ``tracker up`` (issue 24, item 6), as real processes.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group: here that is
``os.killpg(pid, SIGINT)`` on a server started in its own session. It must end the server
at once, with exit status 0 and nothing alarming: no gunicorn ``[ERROR] Worker (pid:N) was
sent SIGKILL! Perhaps out of memory?`` (a gunicorn worker that hung in its quit handler when
the terminal's SIGINT and the master's SIGQUIT overlapped, killed 10 s later), no traceback,
no click ``Aborted!``. ``up`` stops its worker with one signal, so a job gets the SIGTERM
and its grace period once and is requeued by its retry policy, not killed in its cleanup.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support.polling import wait_for
from tests.support.web import TRACKER, Proc, free_port
from tracker.entities import JobSpec
from tracker.store import Store
from tracker.store.jobs import get_job, list_jobs
from tracker.store.queue import enqueue

ALARMS = ("SIGKILL", "Traceback", "Aborted!", "out of memory")

# A job that takes two seconds to stop on SIGTERM (as one saving a checkpoint would) and
# leaves a mark when it did so whole; then exits as killed by SIGTERM would.
SLOW_TO_STOP = """\
import signal, sys, time
from pathlib import Path

def stop(signum, frame):
    time.sleep(2)
    Path("stopped-cleanly").write_text("yes")
    sys.exit(128 + signal.SIGTERM)

signal.signal(signal.SIGTERM, stop)
Path("started").write_text("yes")
while True:
    time.sleep(0.05)
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}


def _ctrl_c(server: Proc, bound: float = 60) -> tuple[int, float, str]:
    """Ctrl-C as a terminal sends it; the exit status, seconds until exit, and output."""
    started = time.monotonic()
    os.killpg(server.popen.pid, signal.SIGINT)
    status = server.wait(bound)  # fails the test, with the output, past the bound
    return status, time.monotonic() - started, server.output()


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def _alarms(output: str) -> list[str]:
    return [line for line in output.splitlines() if any(a in line for a in ALARMS)]


@pytest.mark.parametrize("dev", [False, True], ids=["gunicorn", "dev server"])
def test_ctrl_c_stops_ui_at_once_and_quietly(tmp_path: Path, dev: bool) -> None:
    # The hang was a race (about one Ctrl-C in three): three starts and stops.
    for attempt in range(1 if dev else 3):
        port = free_port()
        argv = [*TRACKER, "ui", "--no-auth", "--port", str(port),
                "--uri", f"sqlite:///{tmp_path / 'tracker.db'}"]  # fmt: skip
        server = Proc(argv + (["--dev", "--workers", "0"] if dev else []), _env(), tmp_path)
        try:
            server.wait_for_line("tracker dashboard:", 120)
            status, took, output = _ctrl_c(server)
        finally:
            if server.popen.poll() is None:
                server.kill()
        assert status == 0, output
        assert _alarms(output) == [], f"stop {attempt + 1} took {took:.1f} s:\n{output}"


def test_a_gunicorn_worker_leaves_sigint_to_its_master(tmp_path: Path) -> None:
    """The terminal's SIGINT reaches every worker too; a worker must not start quitting on
    it (the master quits it with SIGQUIT), else the two quits overlap."""
    port = free_port()
    argv = [*TRACKER, "ui", "--no-auth", "--port", str(port),
            "--uri", f"sqlite:///{tmp_path / 'tracker.db'}"]  # fmt: skip
    server = Proc(argv, _env(), tmp_path)
    try:
        server.wait_for_line("tracker dashboard:", 120)
        wait_for(lambda: _health(port), 120, "the dashboard to serve")
        (worker,) = psutil.Process(server.popen.pid).children()
        os.kill(worker.pid, signal.SIGINT)
        # A worker that quits on it is gone (and replaced) within a second: watch for three.
        watch_until = time.monotonic() + 3
        while time.monotonic() < watch_until:
            workers = [c.pid for c in psutil.Process(server.popen.pid).children()]
            assert workers == [worker.pid], "the worker quit on SIGINT"
            assert worker.status() != psutil.STATUS_ZOMBIE, "the worker quit on SIGINT"
            time.sleep(0.1)
        assert _health(port)
        status, _, output = _ctrl_c(server)
    finally:
        if server.popen.poll() is None:
            server.kill()
    assert status == 0 and _alarms(output) == [], output


def test_ctrl_c_stops_up_and_its_job_gets_one_sigterm_and_is_requeued(tmp_path: Path) -> None:
    script = tmp_path / "slow_to_stop.py"
    script.write_text(SLOW_TO_STOP)
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    store = Store(url)
    try:
        job = enqueue(store, JobSpec(argv=[sys.executable, str(script)], project="p",
                                     cwd=str(tmp_path), max_retries=1))  # fmt: skip
    finally:
        store.close()
    port = free_port()
    up = Proc([*TRACKER, "up", "--port", str(port), "--uri", url], _env(), tmp_path)
    try:
        up.wait_for_line("tracker is up", 120)
        wait_for((tmp_path / "started").exists, 120, "the job to start")
        status, took, output = _ctrl_c(up)
    finally:
        if up.popen.poll() is None:
            up.kill()
    assert status == 0, output
    assert _alarms(output) == [], f"took {took:.1f} s:\n{output}"
    # One SIGTERM and the whole grace period: the job finished stopping (not SIGKILLed by a
    # second signal in the middle of it) ...
    assert (tmp_path / "stopped-cleanly").exists(), output
    store = Store(url)
    try:
        after = get_job(store, job.id)
    finally:
        store.close()
    # ... and, stopped by its worker's shutdown, it is queued again by its retry policy.
    assert (after.status, after.attempt) == ("queued", 1), (after, output)


@pytest.mark.slow
def test_ctrl_c_of_the_demo_requeues_its_running_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    port = free_port()
    up = Proc([*TRACKER, "up", "--demo", "--no-auth", "--port", str(port), "--uri", url],
              _env(), tmp_path)  # fmt: skip
    try:
        up.wait_for_line("tracker is up", 120)
        wait_for(lambda: _statuses(url).count("running") == 2, 180, "two demo jobs to run")
        status, took, output = _ctrl_c(up)
    finally:
        if up.popen.poll() is None:
            up.kill()
    assert status == 0 and _alarms(output) == [], f"took {took:.1f} s:\n{output}"
    # The jobs Ctrl-C stopped wait for the next `tracker up`; none is red.
    assert "failed" not in _statuses(url) and _statuses(url).count("queued") >= 2, output


def _statuses(url: str) -> list[str]:
    store = Store(url)
    try:
        return [job.status for job in list_jobs(store)]
    finally:
        store.close()
