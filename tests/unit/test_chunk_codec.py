"""The chunk format (tracker.rules.chunk_codec, docs/CHUNK_FORMAT.md): every point comes back
bit for bit, the header is the one bucket rule's, newer points win a merge, and bytes that
are not a whole chunk are refused with ChunkError and nothing else."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rules.chunk_codec import (
    MAX_POINTS,
    ChunkError,
    Points,
    check_points,
    decode,
    encode,
    merge,
    summary,
)
from tracker.rules.downsample import Bucket, combine, point_bucket

INT64 = st.integers(-(2**63), 2**63 - 1)
# any float64 bit pattern: NaN payloads, +-Inf, -0.0, subnormals
ANY_FLOAT = st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0])
FLOATS = st.one_of(
    ANY_FLOAT,
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(float),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, 1e-310]),
)


@st.composite
def points(draw: st.DrawFn, min_size: int = 1, max_size: int = 120) -> Points:
    """Sorted (step, seq) keys: strides, jumps, several MLflow values at a step."""
    n = draw(st.integers(min_size, max_size))
    start = draw(st.one_of(st.integers(-5, 5), INT64))
    keys: list[tuple[int, int]] = []
    step = start
    for _ in range(n):
        if keys and draw(st.integers(0, 9)) == 0:
            keys.append((keys[-1][0], keys[-1][1] + draw(st.integers(1, 3))))
            continue
        if keys:
            step += draw(st.sampled_from([1, 1, 1, 10]) | st.integers(1, 2**40))
            if step > 2**63 - 1:
                break
        keys.append((step, 0))
    steady = draw(st.booleans())
    base = draw(st.integers(0, 2**45))
    walls = (
        [base + 10 * i + draw(st.integers(-3, 3)) for i in range(len(keys))]
        if steady
        else [draw(INT64) for _ in keys]
    )
    values = [draw(FLOATS) for _ in keys]
    return Points.of([k[0] for k in keys], values, walls, [k[1] for k in keys])


@settings(max_examples=150, deadline=None)
@given(p=points())
def test_every_point_comes_back_bit_for_bit(p: Points) -> None:
    back = decode(encode(p))
    assert back.same(p)
    assert decode(encode(p, level=9)).same(p)


def _same_bucket(a: Bucket, b: Bucket) -> bool:
    def eq(x: float | None, y: float | None) -> bool:
        if x is None or y is None:
            return x is y
        return (math.isnan(x) and math.isnan(y)) or x == y

    return (
        (a.first_step, a.last_step, a.count, a.nan_count, a.posinf_count, a.neginf_count)
        == (b.first_step, b.last_step, b.count, b.nan_count, b.posinf_count, b.neginf_count)
        and eq(a.min, b.min) and eq(a.max, b.max) and eq(a.last, b.last)
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(p=points())
def test_the_header_is_the_bucket_rule_of_its_points(p: Points) -> None:
    rule = combine([point_bucket(int(s), float(v)) for s, v in zip(p.steps, p.values, strict=True)])
    assert _same_bucket(summary(p), rule), (summary(p), rule)
    assert _same_bucket(summary(decode(encode(p))), rule)


@settings(max_examples=100, deadline=None)
@given(old=points(), new=points(max_size=60), data=st.data())
def test_newer_points_win_a_merge(old: Points, new: Points, data: st.DataObject) -> None:
    # new points at old's steps too: overwrites of sealed steps
    picks = data.draw(st.lists(st.integers(0, len(old) - 1), max_size=20, unique=True))
    keys = sorted({(int(old.steps[i]), int(old.seqs[i])) for i in picks}
                  | set(zip(new.steps.tolist(), new.seqs.tolist(), strict=True)))  # fmt: skip
    newer = Points.of([k[0] for k in keys], [float(len(keys) - i) for i in range(len(keys))],
                      [7] * len(keys), [k[1] for k in keys])  # fmt: skip
    expected: dict[tuple[int, int], tuple[int, int]] = {}
    for i, k in enumerate(zip(old.steps.tolist(), old.seqs.tolist(), strict=True)):
        expected[k] = (int(old.walls[i]), int(old.values.view(np.uint64)[i]))
    for i, k in enumerate(keys):
        expected[k] = (7, int(newer.values.view(np.uint64)[i]))
    merged = merge(old, newer)
    got = {
        (int(s), int(q)): (int(w), int(v))
        for s, q, w, v in zip(
            merged.steps, merged.seqs, merged.walls, merged.values.view(np.uint64), strict=True
        )
    }
    assert got == expected
    assert list(zip(merged.steps.tolist(), merged.seqs.tolist(), strict=True)) == sorted(expected)
    check_points(merged)


@settings(max_examples=500, deadline=None)
@given(blob=st.binary(max_size=200))
def test_any_bytes_are_a_chunk_or_refused_with_a_chunk_error(blob: bytes) -> None:
    try:
        p = decode(blob)
    except ChunkError:
        return
    check_points(p)


@settings(max_examples=150, deadline=None)
@given(p=points(max_size=60), data=st.data())
def test_a_damaged_chunk_is_refused_not_misread(p: Points, data: st.DataObject) -> None:
    blob = bytearray(encode(p))
    how = data.draw(st.sampled_from(["flip", "cut", "extra"]))
    if how == "flip":
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:
        blob += data.draw(st.binary(min_size=1, max_size=8))
    try:
        back = decode(bytes(blob))
    except ChunkError:
        return
    assert back.same(p)  # a damage that decodes at all (none seen) reads the same points


@pytest.mark.parametrize(
    ("steps", "seqs", "words"),
    [
        ([1, 3, 2], [0, 0, 0], "point 2 is (2, 0) after (3, 0)"),
        ([1, 1], [0, 0], "point 1 is (1, 0) after (1, 0)"),
        ([1, 1], [2, 1], "point 1 is (1, 1) after (1, 2)"),
        ([1], [-1], "a seq is 0 or more"),
        ([], [], "1 to"),
    ],
)
def test_points_that_cannot_be_a_chunk_are_named(
    steps: list[int], seqs: list[int], words: str
) -> None:
    with pytest.raises(ChunkError, match=words.replace("(", r"\(").replace(")", r"\)")):
        encode(Points.of(steps, [0.0] * len(steps), None, seqs))


def test_unequal_columns_and_too_many_points_are_refused() -> None:
    with pytest.raises(ChunkError, match="values: 1 values for 2 steps"):
        encode(Points(np.arange(2), np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(1)))
    with pytest.raises(ChunkError, match=f"1 to {MAX_POINTS:,}"):
        encode(Points.of(np.arange(MAX_POINTS + 1), np.zeros(MAX_POINTS + 1)))


def test_a_chunk_of_another_format_is_refused_by_name() -> None:
    blob = bytearray(encode(Points.of([1], [1.0])))
    blob[0] = 2
    with pytest.raises(ChunkError, match="format 2; this tracker reads format 1"):
        decode(bytes(blob))


def test_regular_series_are_small() -> None:
    n = 4096
    rng = np.random.default_rng(0)
    walls = 1_700_000_000_000 + np.cumsum(rng.integers(9, 12, n))
    loss = np.exp(-np.arange(n) / 1000).astype(np.float32).astype(np.float64)
    sizes = {
        "loss": len(encode(Points.of(np.arange(n), loss, walls))) / n,
        "noise": len(encode(Points.of(np.arange(n), rng.standard_normal(n), walls))) / n,
        "counter": len(encode(Points.of(np.arange(n) * 10, np.arange(n) * 32.0, walls))) / n,
    }
    assert sizes["loss"] < 4.5 and sizes["noise"] < 9 and sizes["counter"] < 1, sizes


# Chunks written by an earlier release, byte for byte: a change to how the encoder works
# (not to the format) must give the same bytes, and the decoder must read them.
_WRITTEN = {
    "regular": (
        "012800013fff78013bc1441c60e066200a5c384794328653a78853377f3e71eac4c58953c7cc4c9cba"
        "349fe331477d8e345574cfecd8d731bbf3471b90d8d13fb3bbb2639a915881909dd03701a33f2a8fd2"
        "8e559e8a3be56e3a676bcfe42f73b7f44fa99db2b967ea9fe93d5be616a84b665bbe97d4ae547f6516"
        "94963267e99b253511c7234e5a78dff0fce17fc3c3f244f489ca13ee37388b276e9ff879e2fe89c5eb"
        "93f4a0f6365776cfe8dcdf39bbe3673b90d8d93fb3a3ba73ba916099b09de02771a37fca4fa96d2f13"
        "0333032303c37f4620c50e22f8212c06664679264636663e462676263b66560748f0d5130a45004eaa"
        "85fd"
    ),
    "specials": (
        "01050101013fff7801636062e0e06060606264e0e266faf1978181e1ff7f4c82911928c6a00d229e81"
        "880210d10d22324084d08f1f1f183ed4ffffdff01f00a8ee1470"
    ),
}


def _written(name: str) -> Points:
    if name == "regular":
        steps = np.arange(100, 140)
        return Points.of(steps, np.linspace(2.3, 0.4, 40), 1_700_000_000_000 + 250 * (steps - 100))
    values = [math.nan, -0.0, math.inf, -math.inf, 1e-310]
    return Points.of([0, 1, 1, 5, 9], values, [5, 4, 4, 1 << 40, -3], [0, 0, 1, 0, 0])


@pytest.mark.parametrize("name", sorted(_WRITTEN))
def test_the_bytes_of_a_chunk_do_not_change_between_releases(name: str) -> None:
    blob = bytes.fromhex(_WRITTEN[name])
    assert encode(_written(name)) == blob
    assert decode(blob).same(_written(name))
