"""The store is down when a run ends: the exit is bounded, the points and the final status go
to the spill file, and ``tracker db replay`` stores the points, then applies the status.

Also: ``finish()`` with a large backlog on a store that is up waits as long as points are
being stored, and says so (no timeout that fires during steady progress).
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tracker
from tests.core.test_process_exit import wait_for_line
from tests.support import pg_cluster
from tests.support.replay import named_spill_files
from tracker.cli import main
from tracker.client import writer as writer_module
from tracker.client.sinks import SqlSink
from tracker.errors import FlushTimeout
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history
from tracker.store.runs import create_run, get_run, list_runs, mark_stale_runs_crashed

SCRIPT = str(Path(__file__).parent / "scripts" / "exit_store_down.py")
N = 2_000


def end_while_down(
    url: str, mode: str, spill_dir: Path, stop: Callable[[], Any], start: Callable[[], Any]
) -> tuple[int, str]:
    """Run the script, stop the store, let the script end, start the store. Returns
    (run id, the script's stderr)."""
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, url, mode, str(N), str(spill_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_id = int(wait_for_line(proc, "RUN").split()[1])
    wait_for_line(proc, "READY")
    stop()
    try:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        # Bounded: the exit waits exit_timeout (2 s) while nothing is stored, not 60 s.
        code = proc.wait(timeout=45)
    finally:
        start()
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    assert code == (1 if mode == "raise" else 0), stderr
    return run_id, stderr


def replay_and_check(url: str, run_id: int, mode: str, stderr: str) -> None:
    files = named_spill_files(stderr)
    assert files, stderr
    assert all(Path(f).exists() for f in files)
    status = "failed" if mode == "raise" else "finished"
    assert f"run {run_id} ended {status}" in stderr
    store = Store(url)
    assert get_run(store, run_id).status == "running"  # until the replay
    result = CliRunner().invoke(main, ["db", "replay", "--uri", url, *files])
    assert result.exit_code == 0, result.output
    assert f"run {run_id} is now {status}" in result.output
    run = get_run(store, run_id)
    assert run.status == status and run.ended_at is not None
    if mode == "raise":
        assert run.exit_code == 1
        assert run.error == "ValueError: loss is NaN at the end"
    assert count_points(store, run_id) == 2 * 2 * N  # every point, before and after the stop
    assert [p.step for p in metric_history(store, run_id, "a")] == list(range(2 * N))
    assert [p.value for p in metric_history(store, run_id, "b")][-1] == -(2 * N - 1)
    assert not any(Path(f).exists() for f in files)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exit", "raise"])
def test_sqlite_locked_at_exit_spills_points_and_final_status(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "tracker.db"
    url = f"sqlite:///{db}"
    Store(url).close()
    holder = sqlite3.connect(db, isolation_level=None)

    def stop() -> None:  # another process holds the write lock: the store is "down"
        holder.execute("BEGIN EXCLUSIVE")

    run_id, stderr = end_while_down(url, mode, tmp_path / "spill", stop, holder.close)
    replay_and_check(url, run_id, mode, stderr)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["exit", "raise"])
def test_postgres_stopped_at_exit_spills_points_and_final_status(
    own_pg_cluster: tuple[Path, str], tmp_path: Path, mode: str
) -> None:
    directory, url = own_pg_cluster
    Store(url).close()
    run_id, stderr = end_while_down(
        url, mode, tmp_path / "spill",
        lambda: pg_cluster.pause_server(directory), lambda: pg_cluster.resume_server(directory),
    )  # fmt: skip
    replay_and_check(url, run_id, mode, stderr)


class SlowSink(SqlSink):
    """A real SQL sink on a slow store: every batch takes 0.4 s longer."""

    def write_metrics(self, run_id: int, records: Any) -> None:
        time.sleep(0.4)  # the store's own slowness, not a wait for a thread
        super().write_metrics(run_id, records)


def test_finish_with_a_backlog_waits_while_points_are_stored_and_says_so(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "PROGRESS_EVERY_S", 0.3)
    sink = SlowSink(Store(store_url))
    run = tracker.init(
        project="backlog", uri=store_url, sink=sink, system_interval=None,
        spill_dir=tmp_path / "spill", flush_interval=60.0,
    )  # fmt: skip
    for step in range(300_000):  # 30 batches of 10,000: ~12 s at 0.4 s each, and more
        run.log({"a": float(step)}, step=step)
    with pytest.raises(FlushTimeout, match=r"points still being written \([\d,]+ points/s\)"):
        run.flush(timeout=0.2)
    reports: list[str] = []
    started = time.monotonic()
    # 4 s without progress never comes (a batch takes ~0.45 s; 2 s was once reached in CI
    # by a batch under a full collection of the 300,000 queued points on a loaded
    # machine), but the whole wait is longer
    run.finish(timeout=4.0, report=reports.append)
    assert time.monotonic() - started > 4.0
    assert run._writer.exit_spill_path is None
    assert reports and all(
        re.fullmatch(rf"run {run.id}: [\d,]+ points still being written \([\d,]+ points/s\)", r)
        for r in reports
    ), reports
    store = Store(store_url)
    assert count_points(store, run.id) == 300_000
    assert get_run(store, run.id).status == "finished"


def test_a_final_status_kept_for_a_run_marked_crashed_meanwhile_is_applied(
    store_url: str, tmp_path: Path
) -> None:
    from tracker.client import final_status

    store = Store(store_url)
    run_id = create_run(store, "crashed", None, {}, []).id
    mark_stale_runs_crashed(store, older_than=time.time() + 1)
    assert get_run(store, run_id).status == "crashed"
    spill = tmp_path / "run.jsonl"
    final_status.append(spill, final_status.FinalStatus(run_id, "failed", 1, "boom", 1.5e9))
    result = CliRunner().invoke(main, ["db", "replay", "--uri", store_url, str(spill)])
    assert result.exit_code == 0, result.output
    assert f"run {run_id} is now failed, exit code 1 (was crashed)" in result.output
    run = get_run(store, run_id)
    assert (run.status, run.exit_code, run.error, run.ended_at) == ("failed", 1, "boom", 1.5e9)
    # A run that already has another final status keeps it.
    final_status.append(spill, final_status.FinalStatus(run_id, "finished", 0, None, 1.6e9))
    result = CliRunner().invoke(main, ["db", "replay", "--uri", store_url, str(spill)])
    assert f"run {run_id} is already failed" in result.output
    assert get_run(store, run_id).status == "failed"


def test_exit_timeout_comes_from_the_argument_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracker.errors import InvalidInput

    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    run = tracker.init(project="t", uri=url, system_interval=None)
    assert run.exit_timeout == 10.0  # the default
    monkeypatch.setenv("TRACKER_EXIT_TIMEOUT", "3.5")
    run = tracker.init(project="t", uri=url, system_interval=None)
    assert run.exit_timeout == 3.5
    assert (
        tracker.init(project="t", uri=url, system_interval=None, exit_timeout=1).exit_timeout == 1
    )
    monkeypatch.setenv("TRACKER_EXIT_TIMEOUT", "soon")
    with pytest.raises(InvalidInput, match="TRACKER_EXIT_TIMEOUT='soon' is not a number"):
        tracker.init(project="t", uri=url, system_interval=None)
    with pytest.raises(InvalidInput, match=r"exit_timeout=-1\.0: it must be a number of seconds"):
        tracker.init(project="t", uri=url, system_interval=None, exit_timeout=-1.0)
    tracker.finish()
    assert [r.status for r in list_runs(Store(url), project="t")] == ["finished"] * 3  # no orphan
