"""Table-driven checks of the automatic-signal arithmetic and watch()'s ranking (no I/O)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tracker.client.signals import RSS_KEY, STEP_TIME_KEY, StepSignals
from tracker.client.watch import _grad_items, _grad_key

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        # (step, wall time) of each log() call -> step_time_s stored per call (None: none)
        ([(0, 10.0), (1, 10.5), (2, 11.5)], [None, 0.5, 1.0]),
        ([(0, 10.0), (0, 10.2), (1, 10.5)], [None, None, 0.5]),  # same step: no advance
        ([(0, 10.0), (10, 12.0)], [None, 0.2]),  # logged every 10 steps: seconds per step
        ([(5, 10.0), (2, 11.0), (3, 11.25)], [None, None, 0.25]),  # a resume: new baseline
    ],
)
def test_step_time_per_step(calls: list[tuple[int, float]], expected: list[Any]) -> None:
    signals = StepSignals(now=10.0, rss_interval=1e9)
    got = []
    for step, now in calls:
        items: dict[str, float] = {}
        signals.observe(step, now, items)
        got.append(items.get(STEP_TIME_KEY))
    assert got == pytest.approx(expected)


def test_rss_is_sampled_at_most_once_per_interval() -> None:
    signals = StepSignals(now=0.0, rss_interval=1.0)
    sampled = []
    for i in range(40):  # 4 s of calls every 0.1 s
        items: dict[str, float] = {}
        signals.observe(i, i * 0.1, items)
        if RSS_KEY in items:
            sampled.append(i)
            assert items[RSS_KEY] > 0
    assert sampled == [10, 20, 30]


@pytest.mark.parametrize(
    ("norms", "top", "global_norm", "kept"),
    [
        ([3.0, 4.0, 0.0], 2, 5.0, {"b": 4.0, "a": 3.0}),
        ([1.0, NAN, 2.0], 1, NAN, {"b": NAN}),  # the NaN ranks first
        ([1.0, INF, 2.0], 2, INF, {"b": INF, "c": 2.0}),
        ([], 5, 0.0, {}),
    ],
)
def test_grad_items_keep_the_top_offenders(
    norms: list[float], top: int, global_norm: float, kept: dict[str, float]
) -> None:
    names = ["a", "b", "c"][: len(norms)]
    items = _grad_items(names, norms, top)
    got = items.pop("grad/global_norm")
    assert (math.isnan(got) and math.isnan(global_norm)) or got == pytest.approx(global_norm)
    assert set(items) == {f"grad/norm/{n}" for n in kept}
    for name, value in kept.items():
        assert items[f"grad/norm/{name}"] == pytest.approx(value, nan_ok=True)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("conv.weight", "grad/norm/conv.weight"),
        ("blocks.a b.weight", "grad/norm/blocks.a b.weight"),  # spaces are allowed
        ("blocks.a,b.weight", "grad/norm/blocks.a_b.weight"),
        ("heads.x/y..z", "grad/norm/heads.x_y.z"),
        ("..", "grad/norm/param"),
    ],
)
def test_parameter_names_become_valid_keys(name: str, key: str) -> None:
    assert _grad_key(name) == key
