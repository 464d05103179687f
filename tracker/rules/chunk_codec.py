"""Sealed chunks of a metric series: the byte format (docs/CHUNK_FORMAT.md). Pure: numpy and
zlib, no I/O.

A chunk holds the points of one (run, metric) in (step, seq) order, every column of them:
``step`` and ``seq`` (the MLflow value number at a step, 0 for the tracker's own writes),
``wall_ms`` and ``value``, all 64-bit and restored bit for bit (NaN payloads, +-Inf and -0.0
included). Each column is first made small where a series is regular:

* steps: deltas (a constant stride becomes one value repeated);
* seq: deltas too, and left out when every seq is 0;
* wall times: delta of delta (a steady step rate becomes values near 0);
* values: each float's 64 bits XOR the previous one's (a float32 logged as a float64 has 29
  zero low bits, a slowly moving value shares its sign, exponent and high mantissa bits).

Signed integers are zig-zag coded (small magnitudes -> small unsigned numbers), then every
column is cut into its 8 byte planes (byte 0 of every point, then byte 1...), the planes
that are all zero are left out (a bit mask says which are kept), and what is kept goes
through one zlib stream (with its checksum, so a damaged chunk is refused, not misread).
Integer arithmetic is modulo 2**64, so any int64 round-trips, not only well-behaved ones.

:func:`encode` / :func:`decode` are the format; :func:`summary` is the chunk's header for
charts, the ``tracker.rules.downsample`` bucket of all its points (the one bucket rule;
``tests/unit/test_chunk_codec.py`` holds it equal to ``combine`` of the points' buckets);
:func:`merge` lays newer points (the head) over a chunk's, the newer winning at an equal
(step, seq).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from tracker.errors import InvalidInput
from tracker.rules.downsample import Bucket

__all__ = [
    "FORMAT",
    "MAX_POINTS",
    "ChunkError",
    "Points",
    "decode",
    "encode",
    "merge",
    "summary",
]

FORMAT = 1  # the first byte of every chunk
MAX_POINTS = 1 << 20  # points in one chunk, at most (bounds what a decode allocates)
ZLIB_LEVEL = 1  # level 6 saves ~4 % of the bytes for ~30 % more encode time (bench/bench_chunks.py)

_U64 = np.dtype("<u8")
_I64 = np.dtype("<i8")
_F64 = np.dtype("<f8")
_SEQ_FLAG = 1  # the flags byte: the seq column is present (else every seq is 0)


class ChunkError(InvalidInput):
    """Points that cannot make a chunk (400), or bytes that are not one."""


@dataclass(frozen=True, eq=False)
class Points:
    """Columns of one series' points, in (step, seq) order: int64 ``steps``, ``seqs`` and
    ``walls`` (wall time, ms since the epoch), float64 ``values``; equal lengths."""

    steps: np.ndarray
    seqs: np.ndarray
    walls: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def of(
        cls,
        steps: object,
        values: object,
        walls: object | None = None,
        seqs: object | None = None,
    ) -> Points:
        """Columns from sequences; ``walls`` and ``seqs`` default to zeros."""
        s = np.ascontiguousarray(steps, dtype=_I64).reshape(-1)
        n = len(s)
        return cls(
            steps=s,
            seqs=np.zeros(n, _I64) if seqs is None else np.ascontiguousarray(seqs, dtype=_I64),
            walls=np.zeros(n, _I64) if walls is None else np.ascontiguousarray(walls, dtype=_I64),
            values=np.ascontiguousarray(values, dtype=_F64).reshape(-1),
        )

    def same(self, other: Points) -> bool:
        """Equal column by column, values compared bit for bit."""
        return (
            len(self) == len(other)
            and np.array_equal(self.steps, other.steps)
            and np.array_equal(self.seqs, other.seqs)
            and np.array_equal(self.walls, other.walls)
            and np.array_equal(self.values.view(_U64), other.values.view(_U64))
        )


def check_points(points: Points) -> None:
    """Raises ChunkError naming the rule when ``points`` cannot be one chunk: 1 to
    ``MAX_POINTS`` points, equal column lengths, strictly increasing (step, seq), seq >= 0."""
    n = len(points.steps)
    if not 1 <= n <= MAX_POINTS:
        raise ChunkError(f"points: a chunk holds 1 to {MAX_POINTS:,} points, not {n:,}")
    for name in ("seqs", "walls", "values"):
        if len(getattr(points, name)) != n:
            raise ChunkError(f"{name}: {len(getattr(points, name))} values for {n} steps")
    if n and int(points.seqs.min()) < 0:
        raise ChunkError("seqs: a seq is 0 or more")
    if n > 1:
        ds = np.diff(points.steps)
        later = (ds > 0) | ((ds == 0) & (np.diff(points.seqs) > 0))
        if not bool(later.all()):
            at = int(np.argmin(later)) + 1
            raise ChunkError(
                f"points: (step, seq) must increase strictly; point {at} is "
                f"({int(points.steps[at])}, {int(points.seqs[at])}) after "
                f"({int(points.steps[at - 1])}, {int(points.seqs[at - 1])})"
            )


def encode(points: Points, level: int = ZLIB_LEVEL) -> bytes:
    """The chunk of ``points`` (see the module's docstring). Raises ChunkError."""
    check_points(points)
    n = len(points)
    columns = [_delta(points.steps.view(_U64))]
    flags = 0
    if points.seqs.any():
        flags |= _SEQ_FLAG
        columns.append(_delta(points.seqs.view(_U64)))
    columns.append(_delta(_delta(points.walls.view(_U64))))
    bits = points.values.view(_U64)
    xor = bits.copy()
    xor[1:] ^= bits[:-1]
    masks = bytearray()
    kept: list[bytes] = []
    for column in [*(_zigzag(c) for c in columns), xor]:
        mask, planes = _planes(column)
        masks.append(mask)
        kept.append(planes)
    body = zlib.compress(b"".join(kept), level)
    return bytes([FORMAT]) + _varint(n) + bytes([flags]) + bytes(masks) + body


def decode(blob: bytes) -> Points:
    """The points of a chunk; raises ChunkError (never anything else) for bytes that are not
    a whole, undamaged chunk of this format."""
    data = bytes(blob)
    if not data or data[0] != FORMAT:
        got = "no bytes" if not data else f"format {data[0]}"
        raise ChunkError(f"chunk: {got}; this tracker reads format {FORMAT}")
    n, at = _read_varint(data, 1)
    if not 1 <= n <= MAX_POINTS:
        raise ChunkError(f"chunk: {n:,} points; a chunk holds 1 to {MAX_POINTS:,}")
    if at >= len(data):
        raise ChunkError("chunk: cut short before its flags")
    flags = data[at]
    if flags & ~_SEQ_FLAG:
        raise ChunkError(f"chunk: unknown flags {flags:#04x}")
    ncols = 4 if flags & _SEQ_FLAG else 3
    masks = data[at + 1 : at + 1 + ncols]
    if len(masks) != ncols:
        raise ChunkError("chunk: cut short before its plane masks")
    expected = sum(bin(m).count("1") for m in masks) * n
    try:
        decomp = zlib.decompressobj()
        raw = decomp.decompress(data[at + 1 + ncols :], expected + 1)
        if not decomp.eof or decomp.unused_data or len(raw) != expected:
            raise ChunkError(f"chunk: its body is not {expected:,} bytes of planes")
    except zlib.error as exc:
        raise ChunkError(f"chunk: damaged body ({exc})") from None
    columns: list[np.ndarray] = []
    offset = 0
    for mask in masks:
        column, offset = _unplanes(raw, offset, mask, n)
        columns.append(column)
    steps = _undelta(_unzigzag(columns[0]))
    seqs = _undelta(_unzigzag(columns[1])) if ncols == 4 else np.zeros(n, _U64)
    walls = _undelta(_undelta(_unzigzag(columns[-2])))
    values = np.bitwise_xor.accumulate(columns[-1])
    return Points(
        steps=steps.view(_I64), seqs=seqs.view(_I64), walls=walls.view(_I64),
        values=values.view(_F64),
    )  # fmt: skip


def summary(points: Points) -> Bucket:
    """The chunk's header: the ``tracker.rules.downsample`` bucket of all its points (first
    and last step, min and max of the finite values, the last value, the counts)."""
    values = points.values
    finite = np.isfinite(values)
    nan = int(np.isnan(values).sum())
    posinf = int(np.isposinf(values).sum())
    neginf = int(np.isneginf(values).sum())
    any_finite = bool(finite.any())
    kept = values[finite] if not finite.all() else values
    return Bucket(
        first_step=int(points.steps[0]),
        last_step=int(points.steps[-1]),
        min=float(kept.min()) if any_finite else None,
        max=float(kept.max()) if any_finite else None,
        last=float(values[-1]),
        count=len(values),
        nan_count=nan,
        posinf_count=posinf,
        neginf_count=neginf,
    )


def merge(old: Points, new: Points) -> Points:
    """``old``'s points with ``new``'s laid over them: at an equal (step, seq) ``new``'s
    point wins; the result in (step, seq) order. Both in (step, seq) order."""
    if not len(new):
        return old
    if not len(old):
        return new
    steps = np.concatenate([new.steps, old.steps])
    seqs = np.concatenate([new.seqs, old.seqs])
    order = np.lexsort((seqs, steps))  # stable: at a tie, new (first) before old
    s, q = steps[order], seqs[order]
    keep = np.ones(len(order), bool)
    keep[1:] = (s[1:] != s[:-1]) | (q[1:] != q[:-1])  # the first of a tie: new's
    pick = order[keep]
    walls = np.concatenate([new.walls, old.walls])
    values = np.concatenate([new.values, old.values])
    return Points(steps[pick], seqs[pick], walls[pick], values[pick])


# ---------------------------------------------------------------- column transforms


def _delta(x: np.ndarray) -> np.ndarray:
    """First value, then differences (uint64, modulo 2**64): ``_undelta`` restores it."""
    out = x.copy()
    out[1:] -= x[:-1]
    return out


def _undelta(d: np.ndarray) -> np.ndarray:
    return np.cumsum(d, dtype=_U64)


def _zigzag(x: np.ndarray) -> np.ndarray:
    signed = x.view(_I64)
    return ((signed << 1) ^ (signed >> 63)).view(_U64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return (z >> np.uint64(1)) ^ (np.uint64(0) - (z & np.uint64(1)))


def _planes(column: np.ndarray) -> tuple[int, bytes]:
    """The column's byte planes that are not all zero, and the mask of which they are.

    Which planes are kept comes from one OR over the column, and only those are copied out
    of the (point, byte) matrix: ~10 us for 4,096 points, against ~65 us for testing each
    plane of the transposed matrix."""
    column = column.astype(_U64, copy=False)
    acc = int(np.bitwise_or.reduce(column)) if len(column) else 0
    kept = [i for i in range(8) if acc >> (8 * i) & 0xFF]
    if not kept:
        return 0, b""
    matrix = column.view(np.uint8).reshape(-1, 8)  # row: one point's 8 bytes, low byte first
    chosen = matrix.T if len(kept) == 8 else matrix[:, kept].T
    return sum(1 << i for i in kept), np.ascontiguousarray(chosen).tobytes()


def _unplanes(raw: bytes, offset: int, mask: int, n: int) -> tuple[np.ndarray, int]:
    kept = [i for i in range(8) if mask >> i & 1]
    matrix = np.zeros((n, 8), np.uint8)
    if kept:
        planes = np.frombuffer(raw, np.uint8, n * len(kept), offset).reshape(len(kept), n)
        if len(kept) == 8:
            matrix[:] = planes.T
        else:
            matrix[:, kept] = planes.T
    return matrix.view(_U64).reshape(n), offset + n * len(kept)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 28:
            raise ChunkError("chunk: cut short or damaged in its point count")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        shift += 7
        if not byte & 0x80:
            return value, at
