"""Real training processes ended by SIGKILL, SIGTERM, an exception and a plain exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

from tests.support.lines import Lines
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history
from tracker.store.runs import get_run, mark_stale_runs_crashed

# each script's stdout reader: lines that came in one read are kept for the next wait
_LINES: weakref.WeakKeyDictionary[subprocess.Popen[str], Lines] = weakref.WeakKeyDictionary()
SCRIPT = str(Path(__file__).parent / "scripts" / "logger.py")
pytestmark = pytest.mark.slow


def start(uri: str, mode: str, n: int) -> subprocess.Popen[str]:
    # faulthandler on: a script that hangs is sent SIGABRT and prints every thread's stack
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen(
        [sys.executable, SCRIPT, uri, mode, str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _dump_and_kill(proc: subprocess.Popen[str]) -> str:
    """SIGABRT a hung script (faulthandler prints its threads' stacks), then kill it;
    returns its stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    return proc.stderr.read()


def exit_status(proc: subprocess.Popen[str], timeout: float = 60.0) -> int:
    """The script's exit status; a script still running after ``timeout`` fails the test
    with its threads' stacks."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"still running after {timeout}s; stderr:\n{_dump_and_kill(proc)}"
        ) from None


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 60.0) -> str:
    """Bounded wait for a line of the child's stdout starting with ``prefix``."""
    lines = _LINES.setdefault(proc, Lines(proc.stdout))  # type: ignore[arg-type]
    line = lines.wait_for(prefix, timeout)
    if line is None:
        raise AssertionError(
            f"no line starting {prefix!r} within {timeout}s; stderr:\n{_dump_and_kill(proc)}"
        )
    return line


def test_sigkill_after_flush_keeps_every_flushed_point(store_url: str) -> None:
    proc = start(store_url, "flush-then-wait", 5000)
    run_id = int(wait_for_line(proc, "RUN").split()[1])
    wait_for_line(proc, "READY")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    store = Store(store_url)
    steps = [p.step for p in metric_history(store, run_id, "a")]
    assert steps[:5000] == list(range(5000))  # everything flushed survived
    assert get_run(store, run_id).status == "running"  # until housekeeping notices
    # The process is dead, so its last heartbeat is older than now: no sleep needed.
    marked = mark_stale_runs_crashed(store, older_than=time.time())
    assert run_id in marked
    assert get_run(store, run_id).status == "crashed"


def test_sigterm_ends_killed_with_everything_logged(store_url: str) -> None:
    proc = start(store_url, "log-then-wait", 3000)
    run_id = int(wait_for_line(proc, "RUN").split()[1])
    wait_for_line(proc, "READY")
    proc.send_signal(signal.SIGTERM)
    assert exit_status(proc) == -signal.SIGTERM  # the exit status still says SIGTERM
    store = Store(store_url)
    run = get_run(store, run_id)
    assert run.status == "killed"
    assert run.error == "terminated by SIGTERM"
    assert count_points(store, run_id) == 6000


def test_uncaught_exception_ends_failed(store_url: str) -> None:
    proc = start(store_url, "raise", 100)
    run_id = int(wait_for_line(proc, "RUN").split()[1])
    assert exit_status(proc) == 1
    assert "ValueError: bad batch shape" in proc.stderr.read()  # the traceback still prints
    run = get_run(Store(store_url), run_id)
    assert run.status == "failed"
    assert run.error == "ValueError: bad batch shape (3, 4)"
    assert count_points(Store(store_url), run_id) == 200


def test_plain_exit_without_finish_ends_finished(store_url: str) -> None:
    proc = start(store_url, "exit", 100)
    run_id = int(wait_for_line(proc, "RUN").split()[1])
    assert exit_status(proc) == 0
    run = get_run(Store(store_url), run_id)
    assert run.status == "finished" and run.ended_at is not None
    assert count_points(Store(store_url), run_id) == 200


def test_pid_and_host_are_recorded(store_url: str) -> None:
    proc = start(store_url, "exit", 1)
    run_id = int(wait_for_line(proc, "RUN").split()[1])
    exit_status(proc)
    run = get_run(Store(store_url), run_id)
    assert run.pid == proc.pid and run.host == os.uname().nodename
    assert run.command is not None and run.command[1].endswith("logger.py")
