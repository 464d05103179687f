"""Real ``torch.profiler`` traces of three small CPU training loops, summarised: a loop with a
hidden ``.item()`` per step, a loop starved by a slow Dataset, and a healthy loop. Each is
profiled as a run profiles itself (CPU activity, shapes, memory, Python stacks, one
``prof.step()`` per step), exported with ``export_chrome_trace`` and read back as JSON;
the summary must say where the time went, and the doctor's throughput-drop diagnosis must
name the cause once the profile is given to it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    SequentialSampler,
    TensorDataset,
)

from tracker.rules.health import throughput_drop
from tracker.rules.profile_summary import DATALOADER_SHARE, cause, refine_throughput, summarize

STEPS = 24
# Every step is recorded, the first included: its cost is part of what a run profiles.
pytestmark = pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")


class SlowDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Every sample costs 3 ms to read (a slow disk, a decode)."""

    def __init__(self) -> None:
        self.x, self.y = torch.randn(512, 32), torch.randn(512, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.003)
        return self.x[i], self.y[i]


def _model(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
        torch.nn.ReLU(), torch.nn.Linear(width, 1),
    )  # fmt: skip


def _fast_data() -> DataLoader[Any]:
    """In-memory data, read a whole batch at a time (one index per batch, no collate)."""
    data = TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1))
    batches = BatchSampler(SequentialSampler(data), batch_size=64, drop_last=True)
    return DataLoader(data, sampler=batches, batch_size=None)


def _train(
    path: Path, data: DataLoader[Any], *, item: bool, stepped: bool = True, width: int = 256
) -> dict[str, Any]:
    """``STEPS`` steps of a small regression, profiled, on one intra-op thread (the shares
    stay put on a loaded machine); the trace as JSON."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _profiled(path, data, item=item, stepped=stepped, width=width)
    finally:
        torch.set_num_threads(threads)


def _profiled(
    path: Path, data: DataLoader[Any], *, item: bool, stepped: bool, width: int
) -> dict[str, Any]:
    torch.manual_seed(0)
    model = _model(width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    running = 0.0
    # A schedule is what makes prof.step() write the ProfilerStep#N annotations.
    plan = schedule(wait=0, warmup=0, active=STEPS + 1) if stepped else None
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=plan,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for i, (x, y) in enumerate(data):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if item:
                running += loss.item()  # the hidden host sync
            prof.step()
            if i + 1 == STEPS:
                break
    prof.export_chrome_trace(str(path))
    trace: dict[str, Any] = json.loads(path.read_text())
    return trace


Loop = Callable[[Path], dict[str, Any]]
LOOPS: dict[str, Loop] = {
    "item": lambda p: _train(p, _fast_data(), item=True),
    "starved": lambda p: _train(p, DataLoader(SlowDataset(), batch_size=8), item=False, width=32),
    "healthy": lambda p: _train(p, _fast_data(), item=False),
}


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    for name, run in LOOPS.items():
        out[name] = summarize(run(tmp_path_factory.mktemp(name) / "trace.json"))
    return out


def test_the_trace_holds_what_the_summary_reads(tmp_path: Path) -> None:
    trace = _train(tmp_path / "t.json", _fast_data(), item=True)
    names = {e.get("name") for e in trace["traceEvents"]}
    cats = {e.get("cat") for e in trace["traceEvents"]}
    assert {"cpu_op", "user_annotation", "python_function"} <= cats
    assert {"ProfilerStep#0", "aten::item", "aten::_local_scalar_dense"} <= names
    assert any(str(n).startswith("enumerate(DataLoader)#") for n in names)


def test_every_loop_has_its_steps(summaries: dict[str, dict[str, Any]]) -> None:
    for name, s in summaries.items():
        steps = s["steps"]
        assert steps["source"] == "profiler_step", name
        assert STEPS <= steps["count"] <= STEPS + 1, name  # the last may be the exit's
        assert 0 < steps["median_ms"] <= steps["total_ms"], name
        assert s["gpu"] is None and s["comm_overlap"] is None, name
        assert s["top_ops"] and s["top_ops"][0]["self_ms"] > 0, name
        json.dumps(s, allow_nan=False)


def test_a_hidden_item_per_step_is_a_host_sync(summaries: dict[str, dict[str, Any]]) -> None:
    s = summaries["item"]
    assert s["host_syncs"]["per_step"] >= 1
    assert s["host_syncs"]["by_op"]["aten::item"] >= STEPS
    top = s["host_syncs"]["frames"][0]
    assert top["op"] == "aten::item" and "_profiled" in top["frame"]
    assert Path(__file__).name in top["frame"]
    found = cause(s)
    assert found is not None and found[0] == "host_sync"
    assert "aten::item" in found[1] and "_profiled" in found[1], found


def test_a_slow_dataset_is_dataloader_wait(summaries: dict[str, dict[str, Any]]) -> None:
    s = summaries["starved"]
    assert s["dataloader_share"] > 0.5  # 24 ms of reads a step, well under 1 ms of compute
    assert s["dataloader_share"] > s["time_split"]["compute"]["share"]
    found = cause(s)
    assert found is not None and found[0] == "dataloader" and "DataLoader" in found[1]


def test_a_healthy_loop_has_no_cause(summaries: dict[str, dict[str, Any]]) -> None:
    s = summaries["healthy"]
    assert s["host_syncs"]["per_step"] < 1
    assert s["dataloader_share"] < DATALOADER_SHARE
    assert cause(s) is None, s["time_split"]


def test_without_a_schedule_the_optimizer_steps_stand_in(tmp_path: Path) -> None:
    s = summarize(_train(tmp_path / "t.json", _fast_data(), item=True, stepped=False))
    assert s["steps"]["source"] == "optimizer_step"
    assert s["steps"]["count"] == STEPS
    assert s["host_syncs"]["per_step"] >= 1


def _slowed_at(onset: int) -> list[tuple[int, float | None]]:
    """Step times every 100 steps: 0.1 s, then 0.25 s from ``onset`` on."""
    return [(s, (0.25 if s >= onset else 0.1) * (1 + 0.01 * (s % 7))) for s in range(0, 8000, 100)]


@pytest.mark.parametrize(
    "loop, words", [("starved", ["DataLoader", "num_workers"]), ("item", ["aten::item", "0-d"])]
)
def test_the_doctor_names_the_cause_of_a_throughput_drop(
    summaries: dict[str, dict[str, Any]], loop: str, words: list[str]
) -> None:
    drop = throughput_drop(_slowed_at(4000))
    assert drop is not None and drop.step == 4000
    refined = refine_throughput(
        drop, [(200, 224, summaries["healthy"]), (4100, 4124, summaries[loop])]
    )
    assert refined.step == drop.step and refined.evidence == drop.evidence
    assert refined.message.startswith(drop.message) and "4,100-4,124" in refined.message
    assert refined.hint != drop.hint and refined.hint.startswith("Step time rose at step 4,000")
    for word in words:
        assert word in refined.hint, refined.hint
    # only the healthy profile, before the drop: nothing to add
    assert refine_throughput(drop, [(200, 224, summaries["starved"])]) == drop
