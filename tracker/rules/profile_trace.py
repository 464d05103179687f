"""Reading a ``torch.profiler`` Chrome trace into checked events and interval sets: pure, no I/O.

``export_chrome_trace`` writes ``{"traceEvents": [...], ...}``; each event of phase ``X``
(a complete event) has ``name``, ``cat``, ``pid``, ``tid``, ``ts`` and ``dur`` in
microseconds and an ``args`` object. The categories read here, as torch 2.x writes them:

- CPU side: ``cpu_op`` (aten ops, autograd nodes), ``user_annotation`` (``ProfilerStep#N``,
  ``enumerate(DataLoader)#...__next__``, ``Optimizer.step#SGD.step``, ``record_function``
  ranges), ``python_function`` (with ``with_stack=True``: ``file.py(line): func`` frames and
  ``<built-in method ...>``), ``cuda_runtime`` / ``cuda_driver`` (``cudaLaunchKernel``,
  ``cudaMemcpyAsync``, ``cudaStreamSynchronize``);
- GPU side (``pid`` is the device, ``tid`` the stream): ``kernel``, ``gpu_memcpy``
  (``Memcpy HtoD (Pageable -> Device)``), ``gpu_memset``, ``gpu_user_annotation``.

Every other phase (``M`` metadata, ``i`` instants such as ``[memory]``, ``s``/``f`` flows)
and every other category is skipped: a newer torch may add its own. Categories are matched
case-insensitively, and torch 1.x's ``Operator``/``Kernel``/``Memcpy``/``Memset`` spellings
are read as their newer names.

Failure modes: :class:`InvalidTrace` (an ``InvalidInput``) naming the field and what is wrong
with it -- the trace is not an object, ``traceEvents`` is not a list, an event is not an
object, or a complete event's ``ts``/``dur`` is not a finite number (``dur`` < 0), its
``name`` not a string, or its ``pid``/``tid`` not a string or number. Nothing else raises.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.errors import InvalidInput

__all__ = [
    "CPU_CATS",
    "GPU_CATS",
    "Event",
    "Intervals",
    "InvalidTrace",
    "clip",
    "contains_any",
    "length",
    "parse",
    "subtract",
    "union",
]

CPU_CATS = frozenset(
    {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}
)
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_OLD_CATS = {
    "operator": "cpu_op",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "runtime": "cuda_runtime",
}

_MAX_US = 1e17  # 3,000 years: past it, sums of times lose their microseconds

Intervals = list[tuple[float, float]]  # sorted, disjoint (start, end) in microseconds


class InvalidTrace(InvalidInput):
    """A profiler trace that breaks the Chrome trace format as torch writes it."""

    code = "invalid_trace"


@dataclass(frozen=True, slots=True)
class Event:
    """One complete (``X``) event of a known category."""

    name: str
    cat: str  # normalised: cpu_op, user_annotation, python_function, kernel, ...
    thread: tuple[str, str]  # (pid, tid) as strings: torch writes ints, other tools strings
    ts: float
    dur: float
    args: Mapping[str, Any]

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTrace(
            f"{where} must be a number of microseconds, not {type(value).__name__}", field=where
        )
    number = float(value)
    if not math.isfinite(number) or abs(number) > _MAX_US:
        raise InvalidTrace(
            f"{where} must be a finite number of microseconds (at most {_MAX_US:.0e} in "
            f"size), not {value!r}",
            field=where,
        )
    return number


def _ident(value: object, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidTrace(
            f"{where} must be a string or a number, not {type(value).__name__}", field=where
        )
    return str(value)


def _event(raw: object, i: int) -> Event | None:
    where = f"traceEvents[{i}]"
    if not isinstance(raw, Mapping):
        raise InvalidTrace(f"{where} must be an object, not {type(raw).__name__}", field=where)
    if raw.get("ph") != "X":
        return None  # metadata, instants, flows, counters: not read
    cat = raw.get("cat")
    cat = cat.lower() if isinstance(cat, str) else ""
    cat = _OLD_CATS.get(cat, cat)
    if cat not in CPU_CATS and cat not in GPU_CATS:
        return None
    name = raw.get("name")
    if not isinstance(name, str):
        raise InvalidTrace(
            f"{where}.name must be a string, not {type(name).__name__}", field=f"{where}.name"
        )
    ts = _number(raw.get("ts"), f"{where}.ts")
    dur = _number(raw.get("dur", 0.0), f"{where}.dur")
    if dur < 0:
        raise InvalidTrace(f"{where}.dur must be >= 0, not {dur!r}", field=f"{where}.dur")
    thread = (_ident(raw.get("pid"), f"{where}.pid"), _ident(raw.get("tid"), f"{where}.tid"))
    args = raw.get("args")
    return Event(name, cat, thread, ts, dur, args if isinstance(args, Mapping) else {})


def parse(trace: object) -> list[Event]:
    """The trace's complete events of known categories, by start time (longest first at
    ties, so an enclosing event comes before what it encloses).

    Raises :class:`InvalidTrace` for a trace that is not the Chrome trace format."""
    if not isinstance(trace, Mapping):
        raise InvalidTrace(
            f"trace must be an object with traceEvents, not {type(trace).__name__}", field="trace"
        )
    raw = trace.get("traceEvents")
    if not isinstance(raw, list):
        got = "missing" if raw is None else f"a {type(raw).__name__}"
        raise InvalidTrace(f"traceEvents must be a list of events, not {got}", field="traceEvents")
    events = [e for i, r in enumerate(raw) if (e := _event(r, i)) is not None]
    events.sort(key=lambda e: (e.ts, -e.dur))
    return events


# -------------------------------------------------------------------- interval sets


def union(spans: Iterable[tuple[float, float]]) -> Intervals:
    """The union of ``(start, end)`` spans as sorted, disjoint intervals."""
    out: Intervals = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` less ``b`` (both sorted and disjoint)."""
    out: Intervals = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        cur = start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def clip(a: Intervals, to: Intervals) -> Intervals:
    """``a`` intersected with ``to`` (both sorted and disjoint)."""
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(to):
        start, end = max(a[i][0], to[j][0]), min(a[i][1], to[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < to[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(a: Sequence[tuple[float, float]]) -> float:
    return math.fsum(end - start for start, end in a)


def contains_any(starts: Sequence[float], events: Sequence[Event], outer: Event) -> bool:
    """Some of ``events`` (sorted by start; ``starts`` their start times) lies within
    ``outer``'s span: does an op enclose a runtime call."""
    k = bisect.bisect_left(starts, outer.ts)
    while k < len(events) and events[k].ts <= outer.end:
        if events[k].end <= outer.end and events[k] is not outer:
            return True
        k += 1
    return False
