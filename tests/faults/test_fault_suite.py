"""Fault injection against the client's promise: nothing accepted is ever lost.

Each case injects one fault into a real run (a real SQLite file and a real PostgreSQL
server: stopped and started, SIGKILLed processes, a store that refuses) and reports the
points ``log()`` accepted against the points found in the store afterwards (and on disk,
where the contract puts them there). The report is printed at the end of the session.

    pytest -m slow tests/faults
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tracker
from tests.support import pg_cluster
from tests.support.polling import wait_for
from tests.support.replay import named_spill_files
from tracker.cli import main
from tracker.client.sinks import SqlSink
from tracker.errors import StoreUnavailable, WriterError
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history
from tracker.store.runs import get_run

pytestmark = pytest.mark.slow

Report = Callable[..., None]
ROOT = Path(__file__).resolve().parents[2]


def _replay(url: str, *files: Path | str) -> Any:
    result = CliRunner().invoke(main, ["db", "replay", "--uri", url, *map(str, files)])
    return result


def _points_in(path: Path) -> int:
    if not path.exists():
        return 0
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sum(len(r[2]) for doc in docs if "records" in doc for r in doc["records"])


@pytest.mark.postgres
def test_twenty_postgres_fast_restarts_under_a_busy_writer(
    own_pg_cluster: tuple[Path, str], tmp_path: Path, fault_report: Report
) -> None:
    directory, url = own_pg_cluster
    run = tracker.init(
        project="faults", uri=url, system_interval=None, flush_interval=0.02,
        spill_dir=tmp_path / "spill",
    )  # fmt: skip
    stop = threading.Event()
    logged = [0]

    def train() -> None:
        step = 0
        while not stop.is_set() or step < 2_000:
            run.log({f"k{i}": float(step) for i in range(16)}, step=step)
            step += 1
            if step % 200 == 0:
                time.sleep(0.001)  # a busy loop that still lets the writer run
        logged[0] = step

    trainer = threading.Thread(target=train)
    trainer.start()
    restarts = 20
    for _ in range(restarts):
        time.sleep(0.15)  # writes (COPY) in flight when the server goes down
        pg_cluster.pause_server(directory)  # pg_ctl stop -m fast
        time.sleep(0.2)
        pg_cluster.resume_server(directory)
    stop.set()
    trainer.join()
    run.flush(timeout=180)
    writer = run._writer
    store = Store(url)
    accepted, stored = 16 * logged[0], count_points(store, run.id)
    fault_report(accepted=accepted, stored=stored, restarts=restarts)
    assert writer.error is None and writer._thread.is_alive()
    assert writer.points_rejected == 0  # an outage is never taken for poison
    assert stored == accepted
    assert [p.step for p in metric_history(store, run.id, "k15")] == list(range(logged[0]))
    run.finish()


def test_a_burst_past_the_memory_cap(store_url: str, tmp_path: Path, fault_report: Report) -> None:
    spill = tmp_path / "spill"
    run = tracker.init(
        project="faults", uri=store_url, system_interval=None, spill_dir=spill,
        max_memory_mb=0.125,
    )  # fmt: skip
    steps = 40_000
    for step in range(steps):
        run.log({"a": float(step), "b": -float(step), "c": 0.5, "d": 1.5, "e": 2.5}, step=step)
    run.finish(timeout=300)
    store = Store(store_url)
    accepted, stored = 5 * steps, count_points(store, run.id)
    through_disk = run._writer._overflow.points_diverted
    fault_report(accepted=accepted, stored=stored, through_disk=through_disk)
    assert through_disk > 0
    assert stored == accepted
    assert [p.step for p in metric_history(store, run.id, "b")] == list(range(steps))
    assert list(spill.iterdir()) == []


def test_a_poison_record_among_valid_ones(
    store_url: str, tmp_path: Path, fault_report: Report
) -> None:
    run = tracker.init(
        project="faults", uri=store_url, system_interval=None, spill_dir=tmp_path / "spill",
        flush_interval=10.0,
    )  # fmt: skip
    writer = run._writer
    for step in range(1_000):
        run.log({"a": float(step)}, step=step)
    # Past the 64-bit column; log() refuses it, so it is put as a record that reached the
    # writer anyway (a value the driver cannot bind, say).
    writer.put((2**63, time.time(), {"a": 1.0}, False))
    for step in range(1_000, 2_000):
        run.log({"a": float(step)}, step=step)
    with pytest.warns(RuntimeWarning, match="set aside"):
        run.finish(timeout=120)
    stored = count_points(Store(store_url), run.id)
    on_disk = _points_in(writer.rejected_path)
    fault_report(accepted=2_001, stored=stored, on_disk=on_disk, rejected=writer.points_rejected)
    assert stored == 2_000 and on_disk == 1


class BrokenSink(SqlSink):
    """A real SQL sink that refuses every write with a non-outage error (a dropped table)."""

    broken = True

    def write_metrics(self, run_id: int, records: Any) -> None:
        if self.broken:
            raise RuntimeError("relation metric_points does not exist (broken by the test)")
        super().write_metrics(run_id, records)


def test_a_fatal_store_error_then_replay(
    store_url: str, tmp_path: Path, fault_report: Report
) -> None:
    run = tracker.init(
        project="faults", uri=store_url, sink=BrokenSink(Store(store_url)),
        system_interval=None, spill_dir=tmp_path / "spill", flush_interval=10.0,
    )  # fmt: skip
    for step in range(1_500):  # fewer calls than wake the writer: it fails at the flush
        run.log({"a": float(step), "b": 1.0}, step=step)
    with pytest.raises(WriterError, match="tracker db replay"):
        run.flush(timeout=60)
    with pytest.raises(WriterError):
        run.finish(timeout=5)  # raised again, and the run gets its final status
    spill = run._writer.spill_path
    on_disk = _points_in(spill)
    result = _replay(store_url, spill)  # the cause fixed: the store takes points again
    assert result.exit_code == 0, result.output
    stored = count_points(Store(store_url), run.id)
    fault_report(accepted=3_000, stored=stored, on_disk_before_replay=on_disk)
    assert on_disk == 3_000 and stored == 3_000


class SwitchableSink(SqlSink):
    down = False

    def write_metrics(self, run_id: int, records: Any) -> None:
        if self.down:
            raise StoreUnavailable("connection refused (switched off by the test)")
        super().write_metrics(run_id, records)


def test_the_store_down_at_exit_then_replay(
    store_url: str, tmp_path: Path, fault_report: Report
) -> None:
    sink = SwitchableSink(Store(store_url))
    run = tracker.init(
        project="faults", uri=store_url, sink=sink, system_interval=None,
        spill_dir=tmp_path / "spill", max_memory_mb=0.125,
    )  # fmt: skip
    for step in range(1_000):
        run.log({"a": float(step)}, step=step)
    run.flush(timeout=60)
    sink.down = True
    for step in range(1_000, 20_000):  # past the cap while the store is away
        run.log({"a": float(step)}, step=step)
    with pytest.raises(StoreUnavailable) as raised:
        run.finish(timeout=1.0)
    # What close() held goes to `<spill>.exit.jsonl` when the writer had spilled: the
    # message names both, in the order to replay them.
    files = [Path(f) for f in named_spill_files(str(raised.value))]
    spill = run._writer.spill_path
    assert files in ([spill], [spill, spill.with_suffix(".exit.jsonl")]), raised.value
    on_disk = sum(_points_in(f) for f in files)
    result = _replay(store_url, *files)
    assert result.exit_code == 0, result.output
    stored = count_points(Store(store_url), run.id)
    fault_report(accepted=20_000, stored=stored, on_disk_at_exit=on_disk)
    assert stored == 20_000
    assert [p.step for p in metric_history(Store(store_url), run.id, "a")] == list(range(20_000))


class SlowToComeBack(SqlSink):
    """A real SQL sink that refuses writes while ``down``; once up, each write waits for
    ``gate`` (a store that came back but answers slowly)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.down = True
        self.gate, self.waiting = threading.Event(), threading.Event()

    def write_metrics(self, run_id: int, records: Any) -> None:
        if self.down:
            raise StoreUnavailable("connection refused (switched off by the test)")
        self.waiting.set()
        self.gate.wait(timeout=120)
        super().write_metrics(run_id, records)


def test_the_files_named_at_exit_are_kept_when_the_writer_replays_after_it(
    store_url: str, tmp_path: Path, fault_report: Report
) -> None:
    """close() gives up while the writer thread replays its spill file into a store that
    answers slowly; that replay ends after close(): the file it replayed was named to the
    user, so it stays, and the command in the message stores everything (pasted into a
    shell: the spill directory's name has a space and a quote)."""
    sink = SlowToComeBack(Store(store_url))
    run = tracker.init(
        project="faults", uri=store_url, sink=sink, system_interval=None,
        spill_dir=tmp_path / "spill dir's", max_memory_mb=0.125,
    )  # fmt: skip
    writer = run._writer
    for step in range(20_000):  # past the cap while the store is away: spilled
        run.log({"a": float(step)}, step=step)
    wait_for(lambda: writer._spilled, timeout=60, what="the writer spilled the points it held")
    sink.down = False  # the writer's next retry replays the spill file, and waits in it
    assert sink.waiting.wait(timeout=60), "the writer never retried"
    with pytest.raises(StoreUnavailable) as raised:
        run.finish(timeout=0.5)
    sink.gate.set()  # the replay goes on, after close() gave up
    writer._thread.join(timeout=60)
    assert not writer._thread.is_alive()
    files = named_spill_files(str(raised.value))
    assert writer.spill_path.exists() and str(writer.spill_path) in files, raised.value
    result = _replay(store_url, *files)
    assert result.exit_code == 0, result.output
    stored = count_points(Store(store_url), run.id)
    fault_report(accepted=20_000, stored=stored, files=len(files))
    assert stored == 20_000
    assert get_run(Store(store_url), run.id).status == "finished"


CHILD = """
import sys, tracker
run = tracker.init(project="faults", system_interval=None, spill_dir=sys.argv[1])
print(run.id, flush=True)
for step in range(int(sys.argv[2])):
    run.log({"a": float(step), "b": 1.0}, step=step)
run.flush()
print("flushed", flush=True)
step = int(sys.argv[2])
while True:  # still logging when the SIGKILL comes
    run.log({"a": float(step), "b": 1.0}, step=step)
    step += 1
"""


def test_sigkill_after_flush(store_url: str, tmp_path: Path, fault_report: Report) -> None:
    env = {**os.environ, "TRACKER_URI": store_url, "PYTHONPATH": str(ROOT)}
    flushed = 50_000
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "spill"), str(flushed)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert child.stdout is not None
    try:
        run_id = int(child.stdout.readline())
        assert child.stdout.readline().strip() == "flushed", "the child died before flushing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    store = Store(store_url)
    stored = sum(1 for p in metric_history(store, run_id, "a") if p.step < flushed)
    stored += sum(1 for p in metric_history(store, run_id, "b") if p.step < flushed)
    fault_report(accepted=2 * flushed, stored=stored, scope="points flushed before the kill")
    assert stored == 2 * flushed


def test_sqlite_locked_by_another_process_for_a_while(tmp_path: Path, fault_report: Report) -> None:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    run = tracker.init(project="faults", uri=url, system_interval=None)
    holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(1.5, holder.execute, args=("COMMIT",))
    release.start()
    for step in range(20_000):
        run.log({"a": float(step)}, step=step)
    run.finish(timeout=120)
    release.join()
    stored = count_points(Store(url), run.id)
    fault_report(accepted=20_000, stored=stored, locked_s=1.5)
    assert stored == 20_000


STUCK_CHILD = """
import sys, threading, tracker
from tracker.client.sinks import SqlSink

class StuckSink(SqlSink):  # a store that never answers: every write hangs
    def write_metrics(self, run_id, records):
        threading.Event().wait()

run = tracker.init(project="faults", sink=StuckSink.from_uri(None), system_interval=None,
                   spill_dir=sys.argv[1], max_memory_mb=float(sys.argv[3]))
print(run.id, flush=True)
for step in range(int(sys.argv[2])):
    run.log({"a": float(step), "b": 1.0}, step=step)
print("logged", flush=True)
threading.Event().wait()
"""


def test_sigkill_past_the_memory_cap_leaves_replayable_overflow_files(
    store_url: str, tmp_path: Path, fault_report: Report
) -> None:
    from tracker.client.overflow import CHUNK_RECORDS, ENTRY_BYTES, KEY_BYTES, MIB

    env = {**os.environ, "TRACKER_URI": store_url, "PYTHONPATH": str(ROOT)}
    steps, cap_mb, spill = 30_000, 0.125, tmp_path / "spill"
    child = subprocess.Popen(
        [sys.executable, "-c", STUCK_CHILD, str(spill), str(steps), str(cap_mb)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert child.stdout is not None
    try:
        run_id = int(child.stdout.readline())
        assert child.stdout.readline().strip() == "logged", "the child died while logging"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    files = sorted(spill.glob("*.overflow-*.jsonl"))
    assert files, "no overflow file: the burst never passed the cap"
    result = _replay(store_url, *files)
    assert result.exit_code == 0, result.output
    store = Store(store_url)
    stored = count_points(store, run_id)
    # Lost with the process: what was in memory (the cap) and the chunk being filled.
    in_memory_calls = int(cap_mb * MIB) // (ENTRY_BYTES + 2 * KEY_BYTES) + CHUNK_RECORDS
    fault_report(accepted=2 * steps, stored=stored, files=len(files),
                 scope="no flush; what reached the overflow files")  # fmt: skip
    assert stored >= 2 * (steps - in_memory_calls - 100)
    stored_steps = [p.step for p in metric_history(store, run_id, "a")]
    assert stored_steps == list(range(stored_steps[0], stored_steps[0] + len(stored_steps)))
    assert not any(f.exists() for f in files)  # replayed, then removed
