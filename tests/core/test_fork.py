"""Fork after tracker.init(): a child never finishes, marks or blocks on its parent's run.

Real processes: a training script (tests/core/scripts/forker.py) with a real torch
DataLoader(num_workers=2) in the fork and spawn contexts, and plain os.fork() children that
exit normally while the parent's writer is busy; on SQLite and PostgreSQL.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tracker.store import Store
from tracker.store.metrics import count_points, metric_history
from tracker.store.runs import get_run

pytest.importorskip("torch")
pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).parent / "scripts" / "forker.py")


class Script:
    """The script's process, its stdout read line by line by a thread (no lost lines)."""

    def __init__(self, uri: str, scenario: str, context: str = "fork") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, SCRIPT, uri, scenario, context],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("")  # end of output

    def lines_until(self, last: str, timeout: float = 180.0) -> list[str]:
        """Every stdout line up to the one starting with ``last`` (bounded wait)."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line == "":
                self.proc.kill()
                stderr = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"no line {last!r} within {timeout}s; {seen}\n{stderr}")
            seen.append(line)
            if line.startswith(last):
                return seen

    def run_id(self) -> int:
        return int(self.lines_until("RUN")[-1].split()[1])


def start(uri: str, scenario: str, context: str = "fork") -> Script:
    return Script(uri, scenario, context)


def end_parent(script: Script) -> None:
    proc = script.proc
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_leave_the_parent_run_running_and_every_point_stored(
    store_url: str, context: str
) -> None:
    proc = start(store_url, "loader", context)
    run_id = proc.run_id()
    seen = proc.lines_until("WAITING")
    assert "BATCHES 16" in seen, seen
    store = Store(store_url)
    # The workers have exited (the DataLoader joined them): the run is still the parent's.
    assert get_run(store, run_id).status == "running"
    assert [p.step for p in metric_history(store, run_id, "parent/batch_sum")] == list(range(16))
    end_parent(proc)
    run = get_run(store, run_id)
    assert run.status == "finished"
    assert count_points(store, run_id) == 17
    assert [p.value for p in metric_history(store, run_id, "parent/last")] == [1.0]


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_dataset_that_logs_in_a_worker_gets_an_error_naming_the_rule(
    store_url: str, context: str
) -> None:
    proc = start(store_url, "loader-logs", context)
    run_id = proc.run_id()
    seen = proc.lines_until("WAITING")
    error = next(line for line in seen if line.startswith("WORKER_ERROR"))
    if context == "fork":
        assert "InheritedRunError" in error
        assert f"run {run_id} belongs to process {proc.pid}, which forked this one" in error
        assert "never logs into, flushes or finishes its parent's run" in error
    else:
        assert "NoActiveRun" in error
        assert "this is a child process" in error and f"started by pid {proc.pid}" in error
    store = Store(store_url)
    assert get_run(store, run_id).status == "running"
    assert count_points(store, run_id) == 0  # nothing from the workers, nothing half-stored
    end_parent(proc)
    assert get_run(store, run_id).status == "finished"
    assert count_points(store, run_id) == 1


def test_plain_fork_children_exit_at_once_and_never_finish_the_parent_run(
    store_url: str,
) -> None:
    proc = start(store_url, "plain-fork")
    run_id = proc.run_id()
    seen = proc.lines_until("WAITING")
    children = sorted(line for line in seen if line.startswith("CHILD "))
    # Each child exited by itself (the script polls 60 s at most, then reports STUCK).
    sqlite = store_url.startswith("sqlite")
    init_exit = 4 if sqlite else 0
    assert children == [
        "CHILD exit 0", "CHILD exit 0", "CHILD exit 0", f"CHILD init {init_exit}", "CHILD log 3",
    ], seen  # fmt: skip
    log_error = next(line for line in seen if line.startswith("CHILD_LOG_ERROR"))
    assert log_error.startswith("CHILD_LOG_ERROR 5 of 5 InheritedRunError"), log_error
    assert f"run {run_id} belongs to" in log_error
    store = Store(store_url)
    assert get_run(store, run_id).status == "running"  # three normal child exits later
    assert count_points(store, run_id) == 10_000  # every parent point, none from a child
    if sqlite:  # the child's copy of SQLite's lock state is stale: a clear refusal
        init_error = next(line for line in seen if line.startswith("CHILD_INIT_ERROR"))
        assert "a forked child cannot open a SQLite file its parent has open" in init_error
        assert store_url[len("sqlite:///") :] in init_error
    else:  # init() in a child: a run of its own, finished at the child's exit
        child_run = int(next(line for line in seen if line.startswith("CHILD_RUN")).split()[1])
        assert get_run(store, child_run).status == "finished"
        assert [p.step for p in metric_history(store, child_run, "child/own")] == list(range(10))
    end_parent(proc)
    assert get_run(store, run_id).status == "finished"
    assert count_points(store, run_id) == 10_001
