"""Where a profiled loop's time goes, from hand-made Chrome traces in the shape
``torch.profiler``'s ``export_chrome_trace`` writes (times in microseconds): steps, self
times, the time split, host syncs and their frames, the GPU, the causes, the diff, the
doctor's refined diagnosis, and malformed traces (table-driven, then fuzzed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.errors import InvalidInput
from tracker.rules.health import THROUGHPUT_DROP, Diagnosis, Evidence
from tracker.rules.profile_summary import (
    DATALOADER_SHARE,
    cause,
    diff,
    refine_throughput,
    summarize,
)
from tracker.rules.profile_trace import InvalidTrace

MAIN = 100  # the training thread's tid (and pid)
DL = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def ev(name: str, ts: float, dur: float, cat: str = "cpu_op", **kw: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": kw.pop("pid", MAIN),
        "tid": kw.pop("tid", MAIN),
        "ts": ts,
        "dur": dur,
        "args": kw,
    }


def trace(*events: dict[str, Any]) -> dict[str, Any]:
    meta = {"ph": "M", "name": "process_name", "pid": MAIN, "tid": 0, "args": {"name": "py"}}
    instant = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 1, "pid": MAIN}
    return {"schemaVersion": 1, "traceEvents": [meta, instant, *events]}


def steps(n: int, dur: float = 10_000, start: float = 1_000) -> list[dict[str, Any]]:
    return [ev(f"ProfilerStep#{i}", start + i * dur, dur, cat="user_annotation") for i in range(n)]


def loop(n: int = 4, dur: float = 10_000, **parts: float) -> list[dict[str, Any]]:
    """``n`` steps; in each, from its start: a DataLoader wait, ops, then idle."""
    out = steps(n, dur)
    for i in range(n):
        t = 1_000 + i * dur
        if parts.get("dataloader"):
            out.append(ev(DL, t, parts["dataloader"] * dur, cat="user_annotation"))
            t += parts["dataloader"] * dur
        out.append(ev("aten::addmm", t, parts.get("compute", 0.3) * dur))
    return out


# --------------------------------------------------------------------------- steps


def test_steps_come_from_the_profiler_step_annotations() -> None:
    s = summarize(trace(*steps(3, 10_000), ev("aten::mm", 2_000, 100), ev("aten::mm", 1, 5)))
    assert s["steps"] == {
        "count": 3,
        "median_ms": 10.0,
        "mean_ms": 10.0,
        "total_ms": 30.0,
        "first": 0,
        "last": 2,
        "source": "profiler_step",
    }


def test_median_and_mean_differ_with_one_slow_step() -> None:
    events = [ev("ProfilerStep#7", 0, 1_000, cat="user_annotation")]
    events += [ev("ProfilerStep#8", 1_000, 1_000, cat="user_annotation")]
    events += [ev("ProfilerStep#9", 2_000, 7_000, cat="user_annotation"), ev("aten::mm", 10, 5)]
    s = summarize(trace(*events))["steps"]
    assert (s["median_ms"], s["mean_ms"], s["first"], s["last"]) == (1.0, 3.0, 7, 9)


def test_without_profiler_steps_the_optimizer_steps_delimit_them() -> None:
    events = [ev("aten::mm", 0, 100)]
    for i in range(3):  # optimizer steps end at 2_000, 4_000, 6_000
        events.append(ev("Optimizer.step#SGD.step", 1_500 + 2_000 * i, 500, cat="user_annotation"))
    s = summarize(trace(*events))["steps"]
    assert (s["count"], s["median_ms"], s["source"], s["first"]) == (3, 2.0, "optimizer_step", None)


def test_optimizer_steps_of_no_length_are_one_step() -> None:
    events = [ev("Optimizer.step#SGD.step", 0, 0, cat="user_annotation") for _ in range(3)]
    s = summarize(trace(*events, ev("aten::mm", 0, 0)))["steps"]
    assert (s["count"], s["median_ms"], s["source"]) == (1, 0.0, "span")


def test_without_any_marks_the_whole_span_is_one_step() -> None:
    s = summarize(trace(ev("aten::mm", 0, 100), ev("aten::add", 900, 100)))["steps"]
    assert (s["count"], s["median_ms"], s["source"]) == (1, 1.0, "span")


def test_the_training_thread_is_the_one_with_the_steps() -> None:
    busy_other = ev("aten::mm", 0, 1_000_000, tid=7)  # a pin-memory thread, say
    s = summarize(trace(*loop(2, compute=0.5), busy_other))
    assert s["steps"]["count"] == 2
    assert s["time_split"]["compute"]["share"] == 0.5  # the other thread is not the loop


# ------------------------------------------------------------------------ self time


def test_self_time_is_duration_less_direct_children() -> None:
    events = [
        *steps(1, 100),
        ev("aten::linear", 1_000, 50),
        ev("aten::addmm", 1_010, 30),
        ev("aten::empty", 1_015, 10),  # inside addmm: not subtracted from linear again
    ]
    ops = {o["name"]: o for o in summarize(trace(*events))["top_ops"]}
    assert ops["aten::linear"]["self_ms"] == 0.02 and ops["aten::linear"]["total_ms"] == 0.05
    assert ops["aten::addmm"]["self_ms"] == 0.02
    assert ops["aten::empty"]["self_ms"] == 0.01
    assert ops["aten::linear"]["share"] == 0.2


def test_top_ops_keep_fifteen_by_self_time_with_calls() -> None:
    events = [*steps(1, 100_000)]
    for k in range(20):
        events += [ev(f"op{k:02}", 1_000 + 1_000 * k, 10 * (k + 1)) for _ in range(2)]
    top = summarize(trace(*events))["top_ops"]
    assert len(top) == 15 and top[0]["name"] == "op19" and top[0]["calls"] == 2


# ---------------------------------------------------------------------- time split


def _runtime(name: str, ts: float, dur: float) -> dict[str, Any]:
    return ev(name, ts, dur, cat="cuda_runtime")


SPLIT_CASES = {
    "dataloader starved": (loop(4, dataloader=0.6, compute=0.2), {"dataloader": 0.6}),
    "compute bound": (loop(4, compute=0.9), {"compute": 0.9, "idle": 0.1}),
    "copy across devices": (
        [
            *steps(1),
            ev("aten::to", 1_000, 4_000),
            ev("aten::_to_copy", 1_100, 3_800),
            _runtime("cudaMemcpyAsync", 1_200, 3_000),
        ],
        {"memory_copies": 0.4, "idle": 0.6},
    ),
    "dtype cast is compute": (
        [*steps(1), ev("aten::to", 1_000, 4_000), ev("aten::_to_copy", 1_100, 3_800)],
        {"compute": 0.4, "memory_copies": 0.0},
    ),
    "collectives": (
        [*steps(1), ev("c10d::allreduce_", 1_000, 3_000), ev("aten::mm", 6_000, 1_000)],
        {"communication": 0.3, "compute": 0.1, "idle": 0.6},
    ),
    "gpu kernel during cpu idle is compute": (
        [*steps(1), ev("sgemm_kernel", 1_000, 5_000, cat="kernel", pid=0, tid=7)],
        {"compute": 0.5, "idle": 0.5},
    ),
    "nccl hidden behind compute": (
        [
            *steps(1),
            ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1_000, 4_000, cat="kernel", pid=0, tid=9),
            ev("sgemm_kernel", 1_000, 2_000, cat="kernel", pid=0, tid=7),
        ],
        {"compute": 0.2, "communication": 0.2},
    ),
}


@pytest.mark.parametrize("events, expected", SPLIT_CASES.values(), ids=SPLIT_CASES.keys())
def test_time_split(events: list[dict[str, Any]], expected: dict[str, float]) -> None:
    s = summarize(trace(*events))
    split = s["time_split"]
    for category, share in expected.items():
        assert split[category]["share"] == pytest.approx(share, abs=1e-3), category
    assert sum(p["share"] for p in split.values()) == pytest.approx(1.0, abs=1e-3)
    assert s["dataloader_share"] == split["dataloader"]["share"]


def test_backward_on_an_autograd_thread_counts_as_compute() -> None:
    backward = ev("autograd::engine::evaluate_function: AddmmBackward0", 1_000, 5_000, tid=5)
    s = summarize(trace(*steps(1), backward))
    assert s["time_split"]["compute"]["share"] == 0.5


# ----------------------------------------------------------------------- host syncs


def _py(name: str, ts: float, dur: float) -> dict[str, Any]:
    return ev(name, ts, dur, cat="python_function")


def test_a_sync_nest_counts_once_by_its_outermost_op_with_the_user_frame() -> None:
    events = [*steps(2)]
    for i in range(2):
        t = 1_000 + i * 10_000
        events += [
            _py("train.py(12): train_loop", t, 9_000),
            _py("torch/nn/modules/module.py(1782): _call_impl", t + 100, 500),
            _py("<built-in method item of Tensor object at 0x7f>", t + 2_000, 300),
            ev("aten::item", t + 2_010, 200),
            ev("aten::_local_scalar_dense", t + 2_020, 150),
            _runtime("cudaStreamSynchronize", t + 2_030, 100),
        ]
    syncs = summarize(trace(*events))["host_syncs"]
    assert syncs["count"] == 2 and syncs["per_step"] == 1.0
    assert syncs["by_op"] == {"aten::item": 2}
    assert syncs["time_ms"] == 0.4
    assert syncs["frames"] == [
        {"frame": "train.py(12): train_loop", "op": "aten::item", "count": 2}
    ]


def test_a_copy_to_the_host_is_a_sync_and_a_dtype_cast_is_not() -> None:
    events = [
        *steps(1),
        ev("aten::to", 1_000, 500),  # a cast on the CPU: no runtime call inside
        ev("aten::to", 2_000, 500),
        ev("aten::_to_copy", 2_010, 480),
        ev("aten::copy_", 2_020, 460),
        _runtime("cudaMemcpyAsync", 2_030, 50),
        _runtime("cudaStreamSynchronize", 2_100, 300),
        ev("aten::item", 20_000, 10),  # outside the steps
    ]
    syncs = summarize(trace(*events))["host_syncs"]
    assert syncs["by_op"] == {"aten::to": 1}
    assert syncs["frames"] == []  # no with_stack: no frames


def test_library_frames_are_skipped_but_one_is_named_when_nothing_else_is() -> None:
    events = [
        *steps(1),
        _py("/usr/lib/python3.11/site-packages/lightning/loop.py(80): run", 1_000, 5_000),
        ev("aten::item", 2_000, 10),
    ]
    frames = summarize(trace(*events))["host_syncs"]["frames"]
    assert frames[0]["frame"].endswith("loop.py(80): run")


@pytest.mark.parametrize(
    "client",
    ["/srv/app/.venv/lib/python3.11/site-packages/tracker/client/values.py(83): _torch_value",
     "/home/ana/tracker/tracker/client/values.py(83): _torch_value",
     "tracker/client/run.py(201): log"],
)  # fmt: skip
def test_the_trackers_own_item_in_log_is_not_the_loops_sync(client: str) -> None:
    """tracker.log(loss) turns a CPU tensor into a float on the training thread: not a sync
    of the loop (and the hint would advise what the user already does); the user's own
    .item() in the same step still is."""
    events = [*steps(1)]
    events += [
        _py("train.py(30): train_loop", 1_000, 9_000),
        _py(client, 2_000, 400),
        ev("aten::item", 2_100, 100),
        ev("aten::_local_scalar_dense", 2_110, 50),
        _py("<built-in method item of Tensor object at 0x7f>", 5_000, 300),
        ev("aten::item", 5_010, 200),
    ]
    syncs = summarize(trace(*events))["host_syncs"]
    assert (syncs["count"], syncs["by_op"]) == (1, {"aten::item": 1})
    assert syncs["frames"] == [
        {"frame": "train.py(30): train_loop", "op": "aten::item", "count": 1}
    ]


# ----------------------------------------------------------------------------- GPU


def test_cpu_only_traces_have_null_gpu_fields() -> None:
    s = summarize(trace(*loop(2)))
    assert s["gpu"] is None and s["comm_overlap"] is None


def test_gpu_busy_share_and_kernel_breakdown() -> None:
    events = [
        *steps(1, 10_000, start=0),
        ev("sgemm", 0, 2_000, cat="kernel", pid=0, tid=7),
        ev("sgemm", 1_000, 2_000, cat="kernel", pid=0, tid=8),  # overlaps: union is 3 ms
        ev("relu", 5_000, 1_000, cat="kernel", pid=0, tid=7),
        ev("Memcpy HtoD (Pageable -> Device)", 8_000, 500, cat="gpu_memcpy", pid=0, tid=7),
    ]
    gpu = summarize(trace(*events))["gpu"]
    assert gpu["busy_share"] == 0.4 and gpu["idle_share"] == 0.6
    assert gpu["kernel_ms"] == 5.0 and gpu["memcpy_ms"] == 0.5
    assert gpu["kernels"][0] == {"name": "sgemm", "calls": 2, "total_ms": 4.0, "share": 0.8}


def test_comm_overlap_is_the_share_of_collective_time_under_compute() -> None:
    events = [
        *steps(1, 20_000, start=0),
        ev("ncclKernel_AllReduce_RING_LL_Sum_float", 0, 10_000, cat="kernel", pid=0, tid=9),
        ev("sgemm", 5_000, 10_000, cat="kernel", pid=0, tid=7),
    ]
    assert summarize(trace(*events))["comm_overlap"] == 0.5


def test_comm_overlap_is_null_without_collectives() -> None:
    events = [*steps(1), ev("sgemm", 1_000, 10, cat="kernel", pid=0, tid=7)]
    s = summarize(trace(*events))
    assert s["gpu"] is not None and s["comm_overlap"] is None


# --------------------------------------------------------------------------- cause


def _with_syncs(per_step: int) -> list[dict[str, Any]]:
    events = loop(4, compute=0.5)
    for i in range(4):
        events += [
            _py("train.py(30): main", 1_000 + i * 10_000, 9_000),
            *[ev("aten::item", 7_000 + i * 10_000 + 100 * k, 10) for k in range(per_step)],
        ]
    return events


def _first_batch_stall() -> list[dict[str, Any]]:
    """DataLoader workers starting: the first batch takes 90 ms, then none waits."""
    events = [ev("ProfilerStep#0", 0, 100_000, cat="user_annotation")]
    events += [ev(DL, 0, 90_000, cat="user_annotation"), ev("aten::mm", 90_000, 9_000)]
    for i in range(1, 10):
        t = 100_000 + (i - 1) * 10_000
        events += [ev(f"ProfilerStep#{i}", t, 10_000, cat="user_annotation")]
        events += [ev("aten::mm", t + 100, 9_000)]
    return events


def test_one_stalled_step_weighs_in_the_share_but_not_the_median() -> None:
    dl = summarize(trace(*_first_batch_stall()))["time_split"]["dataloader"]
    assert dl["share"] == pytest.approx(90 / 190, abs=1e-3) and dl["median_share"] == 0.0


CAUSE_CASES = {
    "one stalled first batch": (_first_batch_stall(), None, ""),
    "healthy": (loop(4, compute=0.8), None, ""),
    "dataloader": (loop(4, dataloader=0.61, compute=0.3), "dataloader", "61 % of the step"),
    "dataloader under threshold": (loop(4, dataloader=DATALOADER_SHARE - 0.05), None, ""),
    "one item per step": (_with_syncs(1), "host_sync", "aten::item at train.py(30): main"),
    "three per step": (_with_syncs(3), "host_sync", "waits for the device 3 times"),
    "a blocking copy per step": (
        [
            *steps(2),
            *[ev("aten::to", 2_000 + 10_000 * i, 500) for i in range(2)],
            *[_runtime("cudaStreamSynchronize", 2_100 + 10_000 * i, 300) for i in range(2)],
        ],
        "host_sync",
        "(aten::to): copy batches with DataLoader(pin_memory=True)",
    ),
    "communication": (
        [*steps(1), ev("nccl:all_reduce", 1_000, 5_000, cat="user_annotation")],
        "communication",
        "50 %",
    ),
    "memory copies": (
        [*steps(1), ev("aten::copy_", 1_000, 3_000), _runtime("cudaMemcpyAsync", 1_010, 100)],
        "memory_copies",
        "30 % of the step copies memory",
    ),
}


@pytest.mark.parametrize("events, code, text", CAUSE_CASES.values(), ids=CAUSE_CASES.keys())
def test_cause(events: list[dict[str, Any]], code: str | None, text: str) -> None:
    found = cause(summarize(trace(*events)))
    if code is None:
        assert found is None
    else:
        assert found is not None and found[0] == code and text in found[1], found


def test_the_largest_share_wins_over_a_sync_per_step() -> None:
    events = loop(4, dataloader=0.5, compute=0.2)
    events += [ev("aten::item", 9_000 + i * 10_000, 10) for i in range(4)]
    found = cause(summarize(trace(*events)))
    assert found is not None and found[0] == "dataloader"


# ---------------------------------------------------------------------------- diff


def test_diff_compares_per_step() -> None:
    a = summarize(trace(*loop(4, compute=0.3)))
    b = summarize(trace(*loop(2, 20_000, dataloader=0.5, compute=0.15), ev("aten::item", 2e3, 1)))
    d = diff(a, b)
    assert d["step_time_ratio"] == 2.0
    assert d["steps"] == {"a": 4, "b": 2}
    addmm = next(o for o in d["ops"] if o["name"] == "aten::addmm")
    assert addmm == {
        "name": "aten::addmm",
        "a_ms_per_step": 3.0,
        "b_ms_per_step": 3.0,
        "delta_ms_per_step": 0.0,
    }
    assert d["ops"][0]["name"] == "aten::item"  # only in b: the largest change
    assert d["time_split"]["dataloader"] == {"a": 0.0, "b": 0.5, "delta": 0.5}
    assert d["host_syncs_per_step"] == {"a": 0.0, "b": 0.5, "delta": 0.5}
    assert d["gpu_busy_share"] is None
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize("bad", [None, {}, {"steps": {"median_ms": "1"}}, {"steps": []}])
def test_diff_names_what_is_wrong_with_a_summary(bad: object) -> None:
    good = summarize(trace(*loop(1)))
    with pytest.raises(InvalidInput) as err:
        diff(good, bad)  # type: ignore[arg-type]
    assert err.value.field is not None and err.value.field.startswith("b")


# -------------------------------------------------------------------------- doctor


def _drop(step: int = 4_000) -> Diagnosis:
    return Diagnosis(
        THROUGHPUT_DROP,
        "warning",
        step,
        f"Steps slowed from 0.1 s to 0.2 s each (50% of the throughput) from step {step}.",
        "Check data loading.",
        Evidence("sys/step_time_s", (step, step + 500), (0.2,), {"baseline_s": 0.1}),
    )


STARVED = summarize(trace(*loop(4, dataloader=0.61, compute=0.3)))
HEALTHY = summarize(trace(*loop(4, compute=0.8)))


def test_a_profile_inside_the_slow_stretch_names_the_cause() -> None:
    before = _drop()
    after = refine_throughput(before, [(100, 120, HEALTHY), (4_100, 4_120, STARVED)])
    assert "61 % of the step is waiting for the DataLoader" in after.message
    assert after.message.startswith(before.message)
    assert after.hint.startswith("Step time rose at step 4,000: 61 % of the step")
    assert "num_workers" in after.hint
    assert (after.code, after.step, after.evidence, after.severity) == (
        before.code,
        before.step,
        before.evidence,
        before.severity,
    )


@pytest.mark.parametrize(
    "summaries",
    [
        [],
        [(100, 120, STARVED)],  # before the slow stretch
        [(4_100, 4_120, HEALTHY)],  # inside, but no cause
    ],
)
def test_without_a_telling_profile_the_diagnosis_is_unchanged(summaries: list[Any]) -> None:
    assert refine_throughput(_drop(), summaries) == _drop()


def test_other_diagnoses_are_unchanged() -> None:
    other = Diagnosis("nonfinite", "error", 5, "loss became NaN", "lower the lr")
    assert refine_throughput(other, [(0, 10, STARVED)]) is other


def test_a_malformed_profile_entry_is_bad_input() -> None:
    with pytest.raises(InvalidInput, match=r"summaries\[0\]"):
        refine_throughput(_drop(), [(1, 2)])  # type: ignore[list-item]


# ---------------------------------------------------------------- malformed traces

BAD_TRACES = {
    "not an object": ([1, 2], "trace"),
    "no events": ({"schemaVersion": 1}, "traceEvents"),
    "events not a list": ({"traceEvents": {"a": 1}}, "traceEvents"),
    "event not an object": ({"traceEvents": ["x"]}, "traceEvents[0]"),
    "ts a string": ({"traceEvents": [{**ev("aten::mm", 0, 1), "ts": "0"}]}, "traceEvents[0].ts"),
    "ts missing": (
        {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a"}]},
        "traceEvents[0].ts",
    ),
    "ts NaN": ({"traceEvents": [ev("aten::mm", float("nan"), 1)]}, "traceEvents[0].ts"),
    "ts a bool": ({"traceEvents": [ev("aten::mm", True, 1)]}, "traceEvents[0].ts"),
    "dur negative": ({"traceEvents": [ev("aten::mm", 0, -1)]}, "traceEvents[0].dur"),
    "dur huge": ({"traceEvents": [ev("aten::mm", 0, 1e300)]}, "traceEvents[0].dur"),
    "name not a string": ({"traceEvents": [ev(3, 0, 1)]}, "traceEvents[0].name"),  # type: ignore[arg-type]
    "tid a list": ({"traceEvents": [ev("aten::mm", 0, 1, tid=[1])]}, "traceEvents[0].tid"),
    "nothing profiled": ({"traceEvents": []}, "traceEvents"),
    "only kernels": ({"traceEvents": [ev("sgemm", 0, 1, cat="kernel")]}, "traceEvents"),
}


@pytest.mark.parametrize("bad, field", BAD_TRACES.values(), ids=BAD_TRACES.keys())
def test_a_malformed_trace_is_named(bad: Any, field: str) -> None:
    with pytest.raises(InvalidTrace) as err:
        summarize(bad)
    assert err.value.field == field and field in err.value.message


def test_unknown_phases_and_categories_are_skipped() -> None:
    events: list[dict[str, Any]] = [
        {"ph": "C", "name": "counter", "ts": "not read", "args": {"v": 1}},
        {"ph": "X", "cat": "new_category", "name": 5, "ts": None},
        {"ph": "X", "name": "no category", "ts": None},
        *loop(1),
    ]
    assert summarize(trace(*events))["steps"]["count"] == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
fields = {
    "ph": st.sampled_from(["X", "i", "M", "s", "f", "B"]) | json_values,
    "cat": st.sampled_from(
        ["cpu_op", "user_annotation", "python_function", "kernel", "cuda_runtime", "gpu_memcpy"]
    )
    | json_values,
    "name": st.sampled_from(
        [
            "ProfilerStep#1",
            "aten::item",
            "aten::to",
            DL,
            "Optimizer.step#SGD.step",
            "nccl:all_reduce",
        ]
    )
    | json_values,
    "pid": st.integers(0, 2) | json_values,
    "tid": st.integers(0, 2) | json_values,
    # small integers make events start, end and nest at the same instants
    "ts": st.integers(0, 3) | st.floats(0, 1e4) | json_values,
    "dur": st.integers(0, 3) | st.floats(0, 1e4) | json_values,
    "args": json_values,
}
events_strategy = st.lists(
    st.fixed_dictionaries({}, optional=fields) | json_values,  # type: ignore[arg-type]
    max_size=25,
)


def _check(value: object) -> None:
    try:
        summary = summarize(value)  # type: ignore[arg-type]
    except InvalidInput as err:
        assert err.message and err.field
        return
    json.dumps(summary, allow_nan=False)
    cause(summary)
    diff(summary, summary)


@settings(max_examples=300, deadline=None)
@given(events_strategy)
def test_any_event_list_summarizes_or_is_named_bad_input(events: list[Any]) -> None:
    _check({"traceEvents": events})


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_any_json_value_summarizes_or_is_named_bad_input(value: object) -> None:
    _check(value)
    _check({"traceEvents": value})


@settings(max_examples=100, deadline=None)
@given(json_values, json_values)
def test_diff_and_cause_take_any_json_as_bad_input(a: object, b: object) -> None:
    good = summarize(trace(*loop(1)))
    for args in ((a, good), (good, b)):
        with pytest.raises(InvalidInput):
            diff(*args)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        cause(a)  # type: ignore[arg-type]


NAMES = [
    *("ProfilerStep#3", "aten::item", "aten::to", "aten::copy_", DL, "aten::mm"),
    *("Optimizer.step#SGD.step", "c10d::allreduce_", "cudaMemcpyAsync", "sgemm"),
    *("cudaStreamSynchronize", "train.py(3): main", "<built-in method item>"),
]
valid_events = st.lists(
    st.builds(
        ev,
        st.sampled_from(NAMES),
        st.integers(0, 50),
        st.integers(0, 30),
        st.sampled_from(["cpu_op", "user_annotation", "python_function", "cuda_runtime"])
        | st.sampled_from(["kernel", "gpu_memcpy"]),
        tid=st.sampled_from([MAIN, 5]),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(valid_events)
def test_well_formed_events_always_summarize_into_shares_that_add_up(
    events: list[dict[str, Any]],
) -> None:
    events.append(ev("aten::mm", 0, 1))  # at least one op on a CPU thread
    s = summarize(trace(*events))
    split = s["time_split"]
    assert sum(p["share"] for p in split.values()) == pytest.approx(1.0, abs=2e-3) or (
        s["steps"]["total_ms"] == 0
    )
    for part in split.values():
        assert 0 <= part["share"] <= 1 and 0 <= part["median_share"] <= 1
    assert s["host_syncs"]["count"] >= 0 and s["steps"]["count"] >= 1
    if s["gpu"] is not None:
        assert 0 <= s["gpu"]["busy_share"] <= 1
    json.dumps(s, allow_nan=False)
    cause(s)
    assert diff(s, s)["step_time_ratio"] in (1.0, None)
