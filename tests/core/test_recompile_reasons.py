"""A real ``torch.compile`` (CPU, ``backend="eager"``: no C compiler, a fraction of a second
per compile) that recompiles until torch's recompile limit, under ``tracker.watch``: the run
records the frame and the guard torch gave as the reason, and the doctor's ``recompiles``
diagnosis starts at the step the frame reached the limit and names both (SQLite and
PostgreSQL). A run that never recompiles has no such diagnosis, and a failure to read the
reasons never reaches the training loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch._dynamo

import tracker
from tracker.rules.recompile_reasons import RECOMPILE_LIMIT_EVENT
from tracker.store import Store
from tracker.store.diagnoses import diagnose_run
from tracker.store.events import list_events
from tracker.store.metrics import metric_history

LIMIT = 8  # torch's default recompile_limit


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


FORWARD_LINE = Net.forward.__code__.co_firstlineno


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Compile ids and caches start over: each test's frame compiles from 0/0."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=LIMIT):
        yield
    torch._dynamo.reset()


def _train(store_url: str, batch: Any, steps: int = 12, every: int = 5) -> tuple[int, Store]:
    """A loop whose batch size is ``batch(step)``: a new size recompiles (dynamic=False)."""
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model, backend="eager", dynamic=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    run = tracker.init(project="compile", uri=store_url, system_interval=None)
    tracker.watch(compiled, optimizer, every=every)
    for step in range(steps):
        optimizer.zero_grad()
        loss = compiled(torch.randn(batch(step), 4)).pow(2).mean()
        loss.backward()
        optimizer.step()
        tracker.log({"loss": loss}, step=step)
    run.finish()
    return run.id, Store(store_url)


def _recompiles(store: Store, run_id: int) -> list[Any]:
    return [d for d in diagnose_run(store, run_id) if d.code == "recompiles"]


def test_recompiles_at_the_limit_name_the_frame_and_the_guard(store_url: str) -> None:
    run_id, store = _train(store_url, lambda step: 4 + step)  # a new shape every step
    [event] = [e for e in list_events(store, run_id) if e.kind == RECOMPILE_LIMIT_EVENT]
    assert event.data == {
        "step": LIMIT - 1,  # the 8th compile: the loop's step 7
        "function": "forward",
        "file": __file__,
        "line": FORWARD_LINE,
        "compiles": LIMIT,
        "limit": LIMIT,
        "reason": "tensor 'x' size mismatch at index 0. expected 10, actual 11",
    }
    [d] = _recompiles(store, run_id)
    assert d.step == LIMIT - 1  # not the next watched step (10): the step torch reached it
    assert f"forward ({__file__}:{FORWARD_LINE})" in d.message
    assert f"forward ({__file__}:{FORWARD_LINE})" in d.hint
    assert "\"tensor 'x' size mismatch at index 0. expected 10, actual 11\"" in d.hint
    assert "torch._dynamo.mark_dynamic" in d.hint
    counted = {p.step: p.value for p in metric_history(store, run_id, "compile/recompiles")}
    assert counted == {4: 4.0, 9: 7.0}  # watched steps; 7 recompiles, then none (the limit)


def test_a_run_without_recompiles_has_no_such_diagnosis(store_url: str) -> None:
    run_id, store = _train(store_url, lambda step: 8)
    assert [e for e in list_events(store, run_id) if e.kind == RECOMPILE_LIMIT_EVENT] == []
    assert _recompiles(store, run_id) == []
    counted = {p.step: p.value for p in metric_history(store, run_id, "compile/recompiles")}
    assert set(counted.values()) == {0.0}


def test_a_few_recompiles_below_the_limit_are_no_diagnosis(store_url: str) -> None:
    run_id, store = _train(store_url, lambda step: 4 + step % 3)  # three shapes: 2 recompiles
    assert [e for e in list_events(store, run_id) if e.kind == RECOMPILE_LIMIT_EVENT] == []
    assert _recompiles(store, run_id) == []


class _Unreadable(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise RuntimeError("torch moved its guard failures")


@pytest.mark.parametrize("broken", ["raises", "absent"])
def test_reasons_that_cannot_be_read_never_stop_training(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    broken: str,
) -> None:  # fmt: skip
    import torch._dynamo.utils as dynamo_utils

    if broken == "raises":
        monkeypatch.setattr(dynamo_utils, "guard_failures", _Unreadable())
    else:
        monkeypatch.delattr(dynamo_utils, "guard_failures")
    run_id, store = _train(store_url, lambda step: 4 + step, every=1)
    events = list_events(store, run_id)
    failures = [e for e in events if e.kind == "tracker_failure"]
    if broken == "raises":
        [failure] = failures  # said once, whatever the number of recompiles
        assert failure.data is not None and failure.data["failure"] == "compile_reasons"
        assert capsys.readouterr().err.count("recompile reasons failed") == 1
        assert [e for e in events if e.kind == RECOMPILE_LIMIT_EVENT] == []
    else:
        assert failures == []
        [event] = [e for e in events if e.kind == RECOMPILE_LIMIT_EVENT]
        assert event.data is not None and event.data["reason"] == ""
        assert event.data["function"] == "frame 0"  # the frame's compile id, no code object
    counted = {p.step: p.value for p in metric_history(store, run_id, "compile/recompiles")}
    assert counted[11] == float(LIMIT - 1)  # still counted, and the doctor still fires
    [d] = _recompiles(store, run_id)
    assert d.step == LIMIT - 1
