"""The SQL sink's packing of a batch into columns (``tracker.client.sinks._packed``): for
any batch it answers what a plain loop over the records answers -- the same columns, or
"not packable" -- whatever the keys' order, missing or extra keys, steps, and values."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.client.sinks import _packed

KEY_IDS = {"loss": 1, "acc": 2, "lr": 3, "extra": 4}


def _reference(records: list[Any]) -> list[tuple[int, int, list[int], list[float], list[int]]]:
    """The rule written as a loop: every record has exactly the first record's keys (in any
    order), steps start at 0 or more and strictly rise, every value is a number (None is
    NaN, as a row stores it: NULL)."""
    keys = list(records[0][2])
    if not keys or any(sorted(items) != sorted(keys) for _s, _w, items in records):
        return []
    steps = [s for s, _w, _i in records]
    if steps[0] < 0 or any(b <= a for a, b in itertools.pairwise(steps)):
        return []
    if any(
        not isinstance(v, (int, float, type(None)))  # a string is refused by log()
        for _s, _w, items in records
        for v in items.values()
    ):
        return []
    walls = [w for _s, w, _i in records]
    return [
        (7, KEY_IDS[k], steps, [_float(items[k]) for _s, _w, items in records], walls) for k in keys
    ]


def _float(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _bits(values: list[float]) -> list[int]:
    return np.array(values, np.float64).view(np.uint64).tolist()


VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0]),
    st.integers(-(2**53), 2**53),
    st.none(),  # NaN, as a row stores it
    st.just("not a number"),
)


@st.composite
def batches(draw: Any) -> list[Any]:
    keys = draw(st.lists(st.sampled_from(sorted(KEY_IDS)), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(1, 30))
    start = draw(st.integers(-2, 5))
    gaps = draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n))
    steps = [start + sum(gaps[:i]) for i in range(n)]
    out = []
    for i, step in enumerate(steps):
        mine = list(keys)
        if draw(st.booleans()):
            mine = draw(st.permutations(mine))  # the same keys in another order
        if draw(st.integers(0, 20)) == 0:
            mine = mine[:-1] if len(mine) > 1 else ["extra" if mine[0] != "extra" else "loss"]
        out.append((step, 1_750_000_000_000 + i, {k: draw(VALUES) for k in mine}))
    return out


@settings(max_examples=400, deadline=None)
@given(batches())
def test_columns_equal_the_loop_over_the_records(records: list[Any]) -> None:
    want = _reference(records)
    got = _packed(7, KEY_IDS, records)
    assert len(got) == len(want)
    for (run, key, points), (w_run, w_key, steps, values, walls) in zip(got, want, strict=True):
        assert (run, key) == (w_run, w_key)
        assert points.steps.tolist() == steps
        assert points.walls.tolist() == walls
        assert points.seqs.tolist() == [0] * len(steps)
        assert _bits(points.values.tolist()) == _bits(values)  # NaN, -0.0 bit for bit
        assert points.values.flags.c_contiguous


def test_keys_in_another_order_are_packed_in_the_first_records_order() -> None:
    records = [(0, 10, {"loss": 1.0, "acc": 2.0}), (1, 11, {"acc": 4.0, "loss": 3.0})]
    got = {key: points.values.tolist() for _r, key, points in _packed(7, KEY_IDS, records)}
    assert got == {KEY_IDS["loss"]: [1.0, 3.0], KEY_IDS["acc"]: [2.0, 4.0]}
