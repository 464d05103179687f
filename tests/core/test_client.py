"""The client: validation, conversion, steps, flush/finish joins, writer errors, configs."""

from __future__ import annotations

import gc
import math
import weakref
from typing import Any

import numpy as np
import pytest
import torch

import tracker
from tracker.client.run import Run
from tracker.client.sinks import SqlSink
from tracker.errors import (
    InvalidInput,
    InvalidMetricKey,
    InvalidMetricType,
    NoActiveRun,
    WriterError,
)
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history, metric_keys
from tracker.store.runs import create_run, get_run


@pytest.fixture
def run(store_url: str) -> Any:
    r = tracker.init(project="t", config={"lr": 0.1}, uri=store_url, system_interval=None)
    yield r
    r.finish()


def _store(run: Run) -> Store:
    return run.sink.store  # type: ignore[attr-defined]


def test_log_accepts_numbers_numpy_and_tensors(run: Run) -> None:
    run.log(
        {
            "int": 3,
            "float": 0.5,
            "np_f32": np.float32(1.5),
            "np_i64": np.int64(7),
            "np_0d": np.array(2.5),
            "t0d": torch.tensor(4.0),
            "t1": torch.tensor([6.0]),
            "t_half": torch.tensor(0.25, dtype=torch.float16),
            "t_int": torch.tensor(9),
            "t_bf16": torch.tensor(0.5, dtype=torch.bfloat16),
            "t_i8": torch.tensor(-3, dtype=torch.int8),
            "t_param": torch.nn.Parameter(torch.tensor(1.25)),  # a subclass: the slow path
            "t_grad": torch.tensor(2.0, requires_grad=True) * 2,
        },
        step=0,
    )
    run.flush()
    last = get_run(_store(run), run.id).last_metrics
    assert last == {
        "int": 3.0, "float": 0.5, "np_f32": 1.5, "np_i64": 7.0, "np_0d": 2.5,
        "t0d": 4.0, "t1": 6.0, "t_half": 0.25, "t_int": 9.0, "t_bf16": 0.5, "t_i8": -3.0,
        "t_param": 1.25, "t_grad": 4.0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (True, "bool values are not metrics"),
        ("0.5", "a str is not a metric value"),
        (None, "a NoneType is not a metric value"),
        ([1.0], "a list is not a metric value"),
        (np.bool_(True), "numpy bool"),
        (np.zeros(3), r"shape \(3,\)"),
        (torch.zeros(2, 2), r"tensor of shape \(2, 2\) has 4 elements"),
        (torch.tensor(True), "torch.bool tensor"),
        (torch.tensor(1 + 2j), "torch.complex64 tensor"),
        (torch.tensor([[True]]), "torch.bool tensor"),
    ],
)
def test_bad_values_raise_type_error_and_store_nothing(run: Run, value: Any, match: str) -> None:
    with pytest.raises(InvalidMetricType, match=match) as info:
        run.log({"good": 1.0, "bad": value}, step=0)
    assert isinstance(info.value, TypeError)
    assert "'bad'" in str(info.value)
    run.flush()
    assert count_points(_store(run), run.id) == 0


@pytest.mark.parametrize(
    "key", ["", "/loss", "loss/", "a//b", "a..b", "a,b", "a\tb", "x" * 251, "a\nb", 5]
)
def test_bad_keys_raise_value_error_naming_the_rule(run: Run, key: Any) -> None:
    with pytest.raises(InvalidMetricKey, match="keys are 1-250 characters") as info:
        run.log({"good": 1.0, key: 1.0}, step=0)
    assert isinstance(info.value, ValueError)
    run.flush()
    assert count_points(_store(run), run.id) == 0


def test_good_keys(run: Run) -> None:
    keys = ["loss", "train/loss", "val/acc.top-1", "a_b/c-d/e.f", "x" * 250, "val loss",
            "val:acc", "lös"]  # fmt: skip
    run.log(dict.fromkeys(keys, 1.0), step=0)
    run.flush()
    assert metric_keys(_store(run), run.id) == sorted(keys)


def test_bad_steps(run: Run) -> None:
    with pytest.raises(InvalidInput, match="steps are ints >= 0"):
        run.log({"a": 1.0}, step=-1)
    with pytest.raises(InvalidInput, match="steps are ints >= 0"):
        run.log({"a": 1.0}, step=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidMetricType, match="takes a dict"):
        run.log(3.0)  # type: ignore[arg-type]


def test_steps_auto_increment_and_follow_explicit_steps(run: Run) -> None:
    run.log({"a": 0.0})
    run.log({"a": 1.0})
    run.log({"a": 10.0}, step=10)
    run.log({"a": 11.0})
    run.log({"b": 1.0}, step=np.int64(20))
    run.flush()
    assert [p.step for p in metric_history(_store(run), run.id, "a")] == [0, 1, 10, 11]
    assert [p.step for p in metric_history(_store(run), run.id, "b")] == [20]


def test_tensors_are_detached_at_once(run: Run) -> None:
    weights = torch.randn(256, 256, requires_grad=True)
    hidden = weights * 2  # an intermediate the autograd graph saves for backward
    loss = (hidden * hidden).sum()
    hidden_ref = weakref.ref(hidden)
    del hidden
    assert hidden_ref() is not None  # the graph behind `loss` keeps it alive
    run.log({"loss": loss}, step=0)
    queued = run._writer._queue[-1][2]["loss"]
    assert type(queued) is float  # a CPU tensor has no device to wait for: converted at once
    del loss
    gc.collect()
    assert hidden_ref() is None  # nothing the tracker holds keeps the graph alive
    run.flush()
    assert math.isfinite(get_run(_store(run), run.id).last_metrics["loss"])


def test_nan_and_inf_through_the_client(run: Run) -> None:
    run.log({"l": math.nan}, step=0)
    run.log({"l": torch.tensor(float("inf"))}, step=1)
    run.log({"l": np.float64(-np.inf)}, step=2)
    run.flush()
    values = [p.value for p in metric_history(_store(run), run.id, "l")]
    assert math.isnan(values[0]) and values[1:] == [math.inf, -math.inf]


def test_flush_joins_deterministically(run: Run) -> None:
    for step in range(20_000):
        run.log({"a": float(step), "b": 1.0}, step=step)
    run.flush()
    assert count_points(_store(run), run.id) == 40_000


def test_module_level_api_and_config(store_url: str) -> None:
    tracker.init(project="m", config={"lr": 3e-4, "model": {"w": 8}}, uri=store_url,
                 system_interval=None)  # fmt: skip
    assert tracker.config == {"lr": 3e-4, "model": {"w": 8}}
    tracker.log({"loss": 1.0})
    run = tracker.run
    tracker.finish()
    store = Store(store_url)
    info = get_run(store, run.id)
    assert info.status == "finished" and info.last_metrics == {"loss": 1.0}
    with pytest.raises(NoActiveRun, match=r"call tracker\.init"):
        tracker.log({"loss": 2.0})


def test_context_manager_marks_failed_with_the_exception(store_url: str) -> None:
    with (
        pytest.raises(ZeroDivisionError),
        tracker.init(project="m", uri=store_url, system_interval=None) as run,
    ):
        run.log({"a": 1.0})
        _ = 1 / 0
    info = get_run(Store(store_url), run.id)
    assert info.status == "failed"
    assert info.error == "ZeroDivisionError: division by zero"
    assert info.last_metrics == {"a": 1.0}


def test_bad_config_is_rejected_with_its_path(store_url: str) -> None:
    with pytest.raises(
        InvalidInput,
        match=r"config\.model\.act is a builtin_function_or_method: config values must be JSON",
    ):
        tracker.init(project="m", config={"model": {"act": print}}, uri=store_url)
    with pytest.raises(InvalidInput, match=r"config\.lr is nan"):
        tracker.init(project="m", config={"lr": math.nan}, uri=store_url)


class ExplodingSink(SqlSink):
    """A real SQL sink whose metric writes fail with a programming error."""

    def write_metrics(self, run_id: int, records: Any) -> None:
        raise KeyError("boom in the sink")


def test_writer_error_is_raised_on_next_call_never_swallowed(store_url: str) -> None:
    sink = ExplodingSink(Store(store_url))
    run = tracker.init(project="m", uri=store_url, sink=sink, system_interval=None)
    run.log({"a": 1.0})
    with pytest.raises(WriterError, match="KeyError: 'boom in the sink'") as info:
        run.flush()
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(WriterError):
        run.log({"a": 2.0})
    with pytest.raises(WriterError):
        run.finish()


def test_job_environment_attaches_to_the_queued_run(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(store_url)
    queued = create_run(store, "jobs", "job-7", {"lr": 0.1}, status="queued")
    monkeypatch.setenv("TRACKER_RUN_ID", str(queued.id))
    monkeypatch.setenv("TRACKER_JOB_ID", "7")
    monkeypatch.setenv("TRACKER_CONFIG", '{"lr": 0.003, "model": {"width": 128}}')
    run = tracker.init(project="jobs", config={"lr": 1.0, "model": {"width": 64, "depth": 2}},
                       uri=store_url, system_interval=None)  # fmt: skip
    assert run.id == queued.id and run.job_id == 7
    assert tracker.config == {"lr": 0.003, "model": {"width": 128, "depth": 2}}
    assert get_run(store, queued.id).status == "running"
    run.finish()
    info = get_run(store, queued.id)
    assert info.status == "finished" and info.config == tracker.config


def test_follower_rank_logs_nothing(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(store_url)
    queued = create_run(store, "jobs", "ddp", {}, status="queued")
    monkeypatch.setenv("TRACKER_RUN_ID", str(queued.id))
    monkeypatch.setenv("RANK", "1")
    run = tracker.init(project="jobs", uri=store_url, system_interval=None)
    run.log({"loss": 1.0})
    run.finish()
    assert count_points(store, queued.id) == 0
    assert get_run(store, queued.id).status == "queued"  # rank 0 owns the status


def test_accelerator_tensors_wait_for_the_writer(run: Run) -> None:
    meta = torch.tensor(1.5, device="meta")  # a non-CPU device that exists on every machine
    from tracker.client.values import convert_value

    held = convert_value("loss", meta.requires_grad_())
    assert held.device.type == "meta" and held.grad_fn is None and not held.requires_grad
