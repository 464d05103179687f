"""Faults that must not cost accepted points: a poison record inside a batch (in the writer
and in ``tracker db replay``), a fatal sink error, and steps past the 64-bit column. PostgreSQL
restarts under a busy writer are in the fault suite (tests/faults)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import tracker
from tracker.client.sinks import SqlSink
from tracker.client.writer import Writer
from tracker.errors import InvalidInput, InvalidMetricValue, WriterError
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history


def _records(steps: range) -> list[tuple[int, int, dict[str, Any]]]:
    return [(s, 1_700_000_000_000 + s, {"a": float(s), "b": 1.0}) for s in steps]


def test_a_poison_record_is_set_aside_and_its_neighbours_stored(
    store_url: str, tmp_path: Path
) -> None:
    store = Store(store_url)
    sink = SqlSink(store)
    run_id = sink.create_run("poison", None, {}, []).id
    writer = Writer(sink, run_id, spill_dir=tmp_path / "spill", flush_interval=10.0)
    poison = 2**63  # past the BIGINT step column: the store refuses it, not log()
    with pytest.warns(RuntimeWarning, match=f"step {poison}"):
        for step, wall, items in _records(range(1000)):
            writer.put((step, wall / 1000, items, False))
        writer.put((poison, time.time(), {"a": 1.0}, False))
        for step, wall, items in _records(range(1000, 2000)):
            writer.put((step, wall / 1000, items, False))
        writer.flush(timeout=60)
    assert writer.error is None and writer._thread.is_alive()
    assert count_points(store, run_id) == 4000  # 2,000 records x 2 keys
    assert writer.points_rejected == 1
    lines = [json.loads(line) for line in writer.rejected_path.read_text().splitlines()]
    assert [doc["records"][0][0] for doc in lines] == [poison]
    assert lines[0]["run_id"] == run_id and lines[0]["error"]
    writer.close(timeout=10)


class BrokenSink(SqlSink):
    """A real SQL sink whose writes all fail with a non-outage error (a dropped table, say)."""

    def write_metrics(self, run_id: int, records: Any) -> None:
        raise RuntimeError("relation metric_points does not exist (broken by the test)")


def test_a_fatal_sink_error_keeps_every_point_on_disk(store_url: str, tmp_path: Path) -> None:
    sink = BrokenSink(Store(store_url))
    run = tracker.init(
        project="fatal", uri=store_url, sink=sink, system_interval=None,
        spill_dir=tmp_path / "spill", flush_interval=10.0,
    )  # fmt: skip
    for step in range(500):  # the writer wakes at the flush
        run.log({"a": float(step)}, step=step)
    with pytest.raises(WriterError, match="tracker db replay") as caught:
        run.flush(timeout=30)
    spill = run._writer.spill_path
    assert str(spill) in str(caught.value)
    with pytest.raises(WriterError):
        run.log({"a": 1.0})
    spilled = [json.loads(line) for line in spill.read_text().splitlines()]
    rejected_path = run._writer.rejected_path
    rejected = (
        [json.loads(line) for line in rejected_path.read_text().splitlines()]
        if rejected_path.exists()
        else []
    )
    steps = sorted(r[0] for doc in spilled + rejected for r in doc["records"])
    assert steps == list(range(500))  # none discarded: all on disk, replayable
    assert not rejected  # a fatal error is not mistaken for poison records
    with pytest.raises(WriterError):
        run.finish(timeout=5)


@pytest.mark.parametrize("step", [2**63, 2**64, -1])
def test_log_refuses_a_step_the_column_cannot_hold(tmp_path: Path, step: int) -> None:
    run = tracker.init(project="steps", uri=f"sqlite:///{tmp_path / 't.db'}", system_interval=None)
    with pytest.raises(InvalidInput, match=f"step {step}"):
        run.log({"a": 1.0}, step=step)
    run.log({"a": 1.0}, step=2**63 - 1)  # the largest step is fine
    with pytest.raises(InvalidInput, match="largest step"):
        run.log({"a": 2.0})  # the default step after it would not fit
    run.finish()
    assert count_points(Store(f"sqlite:///{tmp_path / 't.db'}"), run.id) == 1


def test_log_stores_an_int_value_past_64_bits_as_a_float(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    run = tracker.init(project="ints", uri=url, system_interval=None)
    run.log({"a": 2**70}, step=0)
    with pytest.raises(InvalidMetricValue, match="'b'"):
        run.log({"b": 10**400}, step=1)
    run.finish()
    assert [p.value for p in metric_history(Store(url), run.id, "a")] == [float(2**70)]


def _spill_line(run_id: int, records: list[tuple[int, int, dict[str, Any]]]) -> str:
    return json.dumps({"run_id": run_id, "records": records}) + "\n"


def test_replay_sets_a_poison_record_aside_and_stores_the_rest(
    store_url: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from tracker.cli import main

    store = Store(store_url)
    run_id = SqlSink(store).create_run("replay", None, {}, []).id
    poison = 2**63  # past the BIGINT step column: the store refuses this one record
    spill = tmp_path / "run-1-1.jsonl"
    spill.write_text(
        _spill_line(run_id, _records(range(0, 100)))
        + _spill_line(
            run_id,
            [*_records(range(100, 150)), (poison, 1, {"a": 1.0}), *_records(range(150, 200))],
        )
        + _spill_line(run_id, [(poison + 1, 1, {"b": 2.0})])  # alone on its line
        + _spill_line(run_id, _records(range(200, 300)))
    )
    result = CliRunner().invoke(main, ["db", "replay", "--uri", store_url, str(spill)])
    assert result.exit_code == 1, result.output
    rejected = tmp_path / "run-1-1.rejected.jsonl"
    assert f"600 points stored, 2 refused by the store and set aside in {rejected}" in (
        result.output
    )
    docs = [json.loads(line) for line in rejected.read_text().splitlines()]
    assert [doc["records"][0][0] for doc in docs] == [poison, poison + 1]
    assert all(doc["error"] and doc["error"] in result.output for doc in docs)
    assert [p.step for p in metric_history(store, run_id, "a")] == list(range(300))
    assert count_points(store, run_id) == 600
    assert not spill.exists()  # every record is stored or set aside


def test_replay_keeps_a_file_whose_first_batch_is_refused_whole(
    store_url: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from tracker.cli import main

    store = Store(store_url)
    run_id = SqlSink(store).create_run("replay", None, {}, []).id
    spill = tmp_path / "run-1-2.jsonl"
    # Nothing stored yet and every record refused: a broken store, not a poison record.
    spill.write_text(_spill_line(run_id, [(2**63, 1, {"a": 1.0})]))
    result = CliRunner().invoke(main, ["db", "replay", "--uri", store_url, str(spill)])
    assert result.exit_code == 1, result.output
    assert "not replayed, the store refused a whole batch" in result.output
    assert spill.exists() and not (tmp_path / "run-1-2.rejected.jsonl").exists()
