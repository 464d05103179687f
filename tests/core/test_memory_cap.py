"""The memory cap of unstored points: past it, points go to disk and come back in order.

Every test logs far more than a small cap, on a real SQLite file and a real PostgreSQL
database, and checks the store point by point: each stored once, the last value of a
re-logged step wins, and the overflow files are gone once stored.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tracker
from tracker.cli import main
from tracker.client.overflow import ENTRY_BYTES, KEY_BYTES, MIB
from tracker.client.sinks import SqlSink
from tracker.errors import InvalidInput, StoreUnavailable, WriterError
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history

SMALL_CAP_MB = 0.0625  # 64 KiB: about 130 five-metric log() calls
KEYS = ("a", "b", "c", "d", "e")


def _log_burst(run: tracker.Run, steps: int, *, relog_every: int = 7) -> None:
    """Five metrics per step; every ``relog_every``-th step is logged again at once with a
    corrected value, so a reordering shows up as the stale value."""
    for step in range(steps):
        run.log({k: float(step) for k in KEYS}, step=step)
        if step % relog_every == 0:
            run.log({"a": step + 0.5}, step=step)


def _expected_a(steps: int, relog_every: int = 7) -> list[float]:
    return [s + 0.5 if s % relog_every == 0 else float(s) for s in range(steps)]


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_a_burst_past_a_small_cap_stores_every_point_once_in_order(
    store_url: str, tmp_path: Path
) -> None:
    spill = tmp_path / "spill"
    run = tracker.init(
        project="cap", uri=store_url, system_interval=None, spill_dir=spill,
        max_memory_mb=SMALL_CAP_MB,
    )  # fmt: skip
    steps = 30_000
    _log_burst(run, steps)
    run.flush(timeout=300)
    overflow = run._writer._overflow
    assert overflow.segments_opened > 0, "the burst never passed the cap: nothing tested"
    assert overflow.points_diverted > steps  # most of the burst went through the disk
    store = Store(store_url)
    assert count_points(store, run.id) == steps * len(KEYS)  # each once, no duplicate
    history = metric_history(store, run.id, "a")
    assert [p.step for p in history] == list(range(steps))
    assert [p.value for p in history] == _expected_a(steps)  # order kept: last value wins
    assert [p.value for p in metric_history(store, run.id, "e")] == [float(s) for s in range(steps)]
    assert _files(spill) == []  # every overflow file removed once stored
    run.finish()


class GatedSink(SqlSink):
    """A real SQL sink whose writes wait until the test opens the gate (a slow store)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.gate = threading.Event()

    def write_metrics(self, run_id: int, records: Any) -> None:
        self.gate.wait()
        super().write_metrics(run_id, records)


def test_log_never_waits_for_a_stuck_writer_and_memory_stays_under_the_cap(
    store_url: str, tmp_path: Path
) -> None:
    sink = GatedSink(Store(store_url))
    spill = tmp_path / "spill"
    run = tracker.init(
        project="cap", uri=store_url, sink=sink, system_interval=None, spill_dir=spill,
        max_memory_mb=SMALL_CAP_MB,
    )  # fmt: skip
    safety = threading.Timer(120, sink.gate.set)  # a log() that waits would hang here
    safety.start()
    writer = run._writer
    cap = int(SMALL_CAP_MB * MIB)
    peak = 0
    steps = 20_000
    for step in range(steps):
        run.log({k: float(step) for k in KEYS}, step=step)
        if step % 50 == 0:
            peak = max(peak, writer.memory_held())
    assert not sink.gate.is_set(), "log() waited for the writer"
    safety.cancel()
    # The cap, plus what the writer holds in the write it is stuck in (one batch it drained
    # before the cap was reached) and a few calls appended while the lock was busy.
    assert peak <= cap + 20 * (ENTRY_BYTES + len(KEYS) * KEY_BYTES), (peak, cap)
    assert writer._overflow.pending_points() > steps * len(KEYS) // 2  # on disk, not in RAM
    assert any(name.endswith(".jsonl") and ".overflow-" in name for name in _files(spill))
    sink.gate.set()
    run.finish(timeout=300)
    store = Store(store_url)
    assert count_points(store, run.id) == steps * len(KEYS)
    assert [p.step for p in metric_history(store, run.id, "c")] == list(range(steps))
    assert _files(spill) == []


def test_two_threads_logging_past_the_cap_keep_each_own_order(
    store_url: str, tmp_path: Path
) -> None:
    run = tracker.init(
        project="cap", uri=store_url, system_interval=None, spill_dir=tmp_path / "spill",
        max_memory_mb=SMALL_CAP_MB,
    )  # fmt: skip
    steps = 10_000

    def produce(key: str) -> None:
        for step in range(steps):
            run.log({key: -1.0}, step=step)
            run.log({key: float(step)}, step=step)  # the value that must win

    threads = [threading.Thread(target=produce, args=(k,)) for k in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.finish(timeout=300)
    assert run._writer._overflow.segments_opened > 0
    store = Store(store_url)
    for key in ("x", "y"):
        assert [p.value for p in metric_history(store, run.id, key)] == [
            float(s) for s in range(steps)
        ], key


class DownSink(SqlSink):
    """A real SQL sink that the test can switch 'unreachable', or broken for good."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.down = False
        self.broken = False

    def write_metrics(self, run_id: int, records: Any) -> None:
        if self.broken:
            raise RuntimeError("relation metric_points does not exist (broken by the test)")
        if self.down:
            raise StoreUnavailable("connection refused (switched off by the test)")
        super().write_metrics(run_id, records)


def _spilled_steps(path: Path) -> list[int]:
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    return [r[0] for doc in docs if "records" in doc for r in doc["records"]]


def test_store_down_at_exit_past_the_cap_leaves_one_ordered_spill_file(
    store_url: str, tmp_path: Path
) -> None:
    sink = DownSink(Store(store_url))
    spill = tmp_path / "spill"
    run = tracker.init(
        project="cap", uri=store_url, sink=sink, system_interval=None, spill_dir=spill,
        max_memory_mb=SMALL_CAP_MB, flush_interval=0.05,
    )  # fmt: skip
    sink.down = True
    steps = 20_000
    for step in range(steps):
        run.log({"a": float(step)}, step=step)
    assert run._writer._overflow.segments_opened > 0
    with pytest.raises(StoreUnavailable):
        run.finish(timeout=1.0)
    # The writer spilled during the outage; what close() held goes to `<spill>.exit.jsonl`
    # when the writer thread may still be replaying the spill file (it deletes it once
    # stored). The overflow files are folded into them, and the two hold every step once,
    # in order.
    spill_file = run._writer.spill_path
    files = [f for f in (spill_file, spill_file.with_suffix(".exit.jsonl")) if f.exists()]
    assert _files(spill) == sorted(f.name for f in files)
    assert [s for f in files for s in _spilled_steps(f)] == list(range(steps))
    result = CliRunner().invoke(
        main, ["db", "replay", "--uri", store_url, *(str(f) for f in files)]
    )
    assert result.exit_code == 0, result.output
    stored = re.findall(r": (\d+) points stored", result.output)
    assert sum(int(n) for n in stored) == steps, result.output
    store = Store(store_url)
    assert [p.step for p in metric_history(store, run.id, "a")] == list(range(steps))


def test_a_fatal_error_past_the_cap_keeps_every_point_on_disk(
    store_url: str, tmp_path: Path
) -> None:
    sink = DownSink(Store(store_url))
    sink.broken = True
    spill = tmp_path / "spill"
    run = tracker.init(
        project="cap", uri=store_url, sink=sink, system_interval=None, spill_dir=spill,
        max_memory_mb=SMALL_CAP_MB, flush_interval=10.0,
    )  # fmt: skip
    steps = 20_000
    for step in range(steps):
        run.log({"a": float(step)}, step=step)
    assert run._writer._overflow.segments_opened > 0
    with pytest.raises(WriterError, match="tracker db replay"):
        run.flush(timeout=60)
    spill_file = run._writer.spill_path
    assert _files(spill) == [spill_file.name]
    assert _spilled_steps(spill_file) == list(range(steps))
    with pytest.raises(WriterError):
        run.finish(timeout=5)


def test_the_cap_comes_from_the_argument_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    run = tracker.init(project="cap", uri=url, system_interval=None)
    assert run._writer._overflow.cap_bytes == 256 * MIB  # the default
    run.finish()
    monkeypatch.setenv("TRACKER_MAX_MEMORY_MB", "0.5")
    run = tracker.init(project="cap", uri=url, system_interval=None)
    assert run._writer._overflow.cap_bytes == MIB // 2
    run.finish()
    run = tracker.init(project="cap", uri=url, system_interval=None, max_memory_mb=2)
    assert run._writer._overflow.cap_bytes == 2 * MIB  # the argument wins
    run.finish()
    monkeypatch.setenv("TRACKER_MAX_MEMORY_MB", "lots")
    with pytest.raises(InvalidInput, match="TRACKER_MAX_MEMORY_MB='lots' is not a number"):
        tracker.init(project="cap", uri=url, system_interval=None)
    monkeypatch.delenv("TRACKER_MAX_MEMORY_MB")
    for bad in (0, -1, float("nan"), "256"):
        with pytest.raises(InvalidInput, match="max_memory_mb") as caught:
            tracker.init(project="cap", uri=url, system_interval=None, max_memory_mb=bad)
        assert caught.value.field == "max_memory_mb"


def test_keys_built_per_call_are_held_once(store_url: str, tmp_path: Path) -> None:
    """A key built per call (``f"k{j}"``) is a new string each time; the queue holds the
    key's first string instead, so what the cap counts is what memory holds."""
    sink = GatedSink(Store(store_url))
    run = tracker.init(
        project="cap", uri=store_url, sink=sink, system_interval=None,
        spill_dir=tmp_path / "spill", auto_signals=False,
    )  # fmt: skip
    safety = threading.Timer(120, sink.gate.set)
    safety.start()
    prefix = "k"
    for step in range(50):
        run.log({f"{prefix}{j}": float(step) for j in range(5)}, step=step)
        run.log({"literal": 1.0, f"{prefix}0": 2.0}, step=step)  # last key built per call
    entries = [e for e in run._writer._queue if type(e) is tuple]
    ids = {key: {id(k) for e in entries for k in e[2] if k == key} for key in ("k0", "k4")}
    safety.cancel()
    sink.gate.set()
    run.finish(timeout=120)
    assert entries and all(len(objects) == 1 for objects in ids.values()), ids
    assert count_points(Store(store_url), run.id) == 50 * 6  # k0 twice a step: the last wins
