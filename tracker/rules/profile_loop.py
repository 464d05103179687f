"""The training loop inside a ``torch.profiler`` trace: its thread, its steps, where each
step's time went, its host syncs and the GPU's work -- the measurements
:mod:`tracker.rules.profile_summary` assembles into a summary. Pure, no I/O.

:func:`read_loop` finds the training thread (the CPU thread that holds the
``ProfilerStep#N`` annotations ``prof.step()`` writes under a schedule; without them, the
thread with the most ``Optimizer.step#...`` annotations, DataLoader fetches, then op time)
and its steps (the ``ProfilerStep#N`` ranges; without them, the spans between the ends of
consecutive ``Optimizer.step#`` annotations; without those, the thread's whole span as
one step). What each measurement means is in :mod:`tracker.rules.profile_summary`.

Failure modes: :class:`~tracker.rules.profile_trace.InvalidTrace` from :func:`read_loop`
for a trace that is not the Chrome format or holds no CPU op or annotation.
"""

from __future__ import annotations

import bisect
import itertools
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.rules.profile_trace import (
    Event,
    Intervals,
    InvalidTrace,
    clip,
    contains_any,
    length,
    parse,
    subtract,
    union,
)

__all__ = [
    "CATEGORIES",
    "Loop",
    "gpu_summary",
    "host_syncs",
    "ms",
    "read_loop",
    "share",
    "short",
    "time_split",
    "top_ops",
]

CATEGORIES = ("compute", "communication", "memory_copies", "dataloader", "idle")
TOP_OPS = 15
TOP_KERNELS = 10
TOP_FRAMES = 5
MAX_NAME = 300  # kernel names are whole C++ template signatures: keep the summary small
_MARKS = ("cpu_op", "user_annotation")  # what makes a CPU thread part of the profile
_EPS = 0.01  # microseconds: torch writes ts/dur to 3 decimals, a child may end that late
_STEP = re.compile(r"ProfilerStep#(\d+)")
_DATALOADER = "enumerate(DataLoader)#"
_OPTIMIZER = "Optimizer.step#"
_AUTOGRAD = "autograd::engine::evaluate_function"
_COMM = re.compile(
    r"nccl|gloo|c10d::|record_param_comms|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all",
    re.IGNORECASE,
)
_COPY_OPS = frozenset({"aten::copy_", "aten::to", "aten::_to_copy"})
_PIN_OPS = frozenset({"aten::_pin_memory", "aten::pin_memory"})
_SYNC_OPS = frozenset(
    {
        "aten::item",
        "aten::_local_scalar_dense",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
        "hipEventSynchronize",
    }
)
_SYNC_RUNTIME = _SYNC_OPS - {"aten::item", "aten::_local_scalar_dense"} | {
    "cudaMemcpy",
    "hipMemcpy",
}
_FRAME = re.compile(r"(?P<file>[^<].*)\((?P<line>\d+)\): (?P<func>.+)")
# The tracker's client (an installed package or a checkout): a sync it makes is not the loop's.
_OWN = re.compile(r"(^|/)tracker/client/\w+\.py\(\d+\)")
# Frames of libraries and the standard library: the user's own frame is the one to name.
_LIBRARY = re.compile(
    r"(^|.*/)(site-packages|dist-packages|lib/python3[.\d]*)/"
    r"|^(torch|torchvision|torchaudio|tracker|lightning|pytorch_lightning|transformers"
    r"|accelerate|numpy|collections|importlib|multiprocessing|concurrent|json|logging)/"
    r"|^(threading|typing|enum|contextlib|functools|abc|queue|selectors|weakref|copy"
    r"|warnings|random|os|posixpath)\.py$"
)


# ------------------------------------------------------------------------- threads


@dataclass
class Loop:
    """A parsed trace, by thread, and the training loop's place in it."""

    cpu: dict[tuple[str, str], list[Event]]
    gpu: list[Event]
    main: tuple[str, str]
    steps: list[tuple[float, float, int | None]]
    source: str

    @property
    def span(self) -> Intervals:
        return union((s, e) for s, e, _ in self.steps)


def _score(events: Sequence[Event]) -> tuple[int, int, int, float]:
    marks = Counter(
        "step" if _STEP.fullmatch(e.name) else e.name.split("#")[0]
        for e in events
        if e.cat == "user_annotation"
    )
    ops = sum(e.dur for e in events if e.cat == "cpu_op")
    return (marks["step"], marks[_OPTIMIZER[:-1]], marks[_DATALOADER[:-1]], ops)


def _steps(events: Sequence[Event]) -> tuple[list[tuple[float, float, int | None]], str]:
    marked = [
        (e.ts, e.end, int(m.group(1)))
        for e in events
        if e.cat == "user_annotation" and (m := _STEP.fullmatch(e.name))
    ]
    if marked:
        return sorted(marked), "profiler_step"
    ends = sorted(
        e.end for e in events if e.cat == "user_annotation" and e.name.startswith(_OPTIMIZER)
    )
    start = min(e.ts for e in events)
    between: list[tuple[float, float, int | None]] = [
        (a, b, None) for a, b in itertools.pairwise([start, *ends]) if b > a
    ]
    if len(between) >= 2:
        return between, "optimizer_step"
    return [(start, max(e.end for e in events), None)], "span"


def read_loop(trace: object) -> Loop:
    cpu: dict[tuple[str, str], list[Event]] = defaultdict(list)
    gpu: list[Event] = []
    for event in parse(trace):
        (gpu if event.cat in ("kernel", "gpu_memcpy", "gpu_memset") else cpu[event.thread]).append(
            event
        )
    with_ops = {t: evs for t, evs in cpu.items() if any(e.cat in _MARKS for e in evs)}
    if not with_ops:
        raise InvalidTrace(
            "traceEvents holds no cpu_op or user_annotation event: profile with "
            "ProfilerActivity.CPU",
            field="traceEvents",
        )
    main = max(with_ops, key=lambda t: (_score(with_ops[t]), t))
    steps, source = _steps(cpu[main])
    return Loop(dict(cpu), gpu, main, steps, source)


def _loop_threads(tr: Loop) -> list[tuple[str, str]]:
    """The training thread and the autograd threads of its process (backward on a GPU)."""
    pid = tr.main[0]
    return [
        t
        for t, evs in tr.cpu.items()
        if t == tr.main or (t[0] == pid and any(e.name.startswith(_AUTOGRAD) for e in evs))
    ]


# ------------------------------------------------------------------------ top ops


def _self_times(events: Sequence[Event]) -> Iterable[tuple[Event, float]]:
    """Each ``cpu_op`` with its self time: its duration less the ops and annotations
    directly inside it (events sorted by start, enclosing first)."""
    stack: list[list[Any]] = []  # [event, children's time]
    for e in events:
        if e.cat not in ("cpu_op", "user_annotation"):
            continue
        while stack and e.end > stack[-1][0].end + _EPS:
            done = stack.pop()
            yield done[0], max(0.0, done[0].dur - done[1])
        if stack:
            stack[-1][1] += e.dur
        stack.append([e, 0.0])
    while stack:
        done = stack.pop()
        yield done[0], max(0.0, done[0].dur - done[1])


def top_ops(tr: Loop, total_us: float) -> list[dict[str, Any]]:
    calls: Counter[str] = Counter()
    own: defaultdict[str, float] = defaultdict(float)
    whole: defaultdict[str, float] = defaultdict(float)
    for events in tr.cpu.values():
        for e, self_us in _self_times(events):
            if e.cat == "cpu_op":
                calls[e.name] += 1
                own[e.name] += self_us
                whole[e.name] += e.dur
    top = sorted(own, key=lambda n: (-own[n], n))[:TOP_OPS]
    return [
        {
            "name": short(n),
            "calls": calls[n],
            "self_ms": ms(own[n]),
            "total_ms": ms(whole[n]),
            "share": share(own[n], total_us),
        }
        for n in top
    ]


# ---------------------------------------------------------------------- time split


def _runtime(events: Sequence[Event]) -> tuple[list[float], list[Event]]:
    calls = [e for e in events if e.cat in ("cuda_runtime", "cuda_driver")]
    return [e.ts for e in calls], calls


def _copy_ops(events: Sequence[Event]) -> list[Event]:
    starts, calls = _runtime([e for e in events if "memcpy" in e.name.lower()])
    return [
        e
        for e in events
        if e.cat == "cpu_op"
        and (e.name in _PIN_OPS or (e.name in _COPY_OPS and contains_any(starts, calls, e)))
    ]


def time_split(tr: Loop) -> dict[str, dict[str, float]]:
    steps = tr.span
    total = length(steps)
    loop = [e for t in _loop_threads(tr) for e in tr.cpu[t]]
    same_process = [e for t, evs in tr.cpu.items() if t[0] == tr.main[0] for e in evs]
    comm_cpu = [
        e for e in same_process if e.cat in ("cpu_op", "user_annotation") and _COMM.search(e.name)
    ]
    kernels = [e for e in tr.gpu if e.cat == "kernel"]
    comm_k = [e for e in kernels if _COMM.search(e.name)]
    copy = union(
        [(e.ts, e.end) for e in _copy_ops(loop)]
        + [(e.ts, e.end) for e in tr.gpu if e.cat != "kernel"]
    )
    comm = union([(e.ts, e.end) for e in comm_cpu + comm_k])
    ops = subtract(union((e.ts, e.end) for e in loop if e.cat == "cpu_op"), union(copy + comm))
    compute = union(ops + [(e.ts, e.end) for e in kernels if not _COMM.search(e.name)])
    wait = union(
        (e.ts, e.end)
        for e in tr.cpu[tr.main]
        if e.cat == "user_annotation" and e.name.startswith(_DATALOADER)
    )
    parts: dict[str, Intervals] = {"dataloader": clip(wait, steps)}
    taken = wait
    for name, spans in (("compute", compute), ("memory_copies", copy), ("communication", comm)):
        parts[name] = clip(subtract(spans, taken), steps)
        taken = union(taken + spans)
    spent = {name: length(spans) for name, spans in parts.items()}
    spent["idle"] = max(0.0, total - sum(spent.values()))
    per_step = {name: _step_shares(spans, tr.steps) for name, spans in parts.items()}
    per_step["idle"] = [max(0.0, 1.0 - sum(s)) for s in zip(*per_step.values(), strict=True)]
    return {
        name: {
            "ms": ms(spent[name]),
            "share": share(spent[name], total),
            "median_share": round(min(1.0, statistics.median(per_step[name])), 4),
        }
        for name in CATEGORIES
    }


def _step_shares(spans: Intervals, steps: Sequence[tuple[float, float, int | None]]) -> list[float]:
    """The share of each step that ``spans`` (sorted, disjoint) cover."""
    ends = [end for _, end in spans]
    out = []
    for lo, hi, _ in steps:
        k = bisect.bisect_right(ends, lo)
        covered = 0.0
        while k < len(spans) and spans[k][0] < hi:
            covered += min(hi, spans[k][1]) - max(lo, spans[k][0])
            k += 1
        out.append(min(1.0, covered / (hi - lo)) if hi > lo else 0.0)
    return out


# ---------------------------------------------------------------------- host syncs


def _user_frame(stack: Sequence[Event], inner: Event) -> str | None:
    """The innermost frame of ``stack`` around ``inner`` that is the user's own code (else
    the innermost Python frame at all)."""
    fallback = None
    for frame in reversed(stack):
        if frame.ts > inner.ts or frame.end + _EPS < inner.end:
            continue
        m = _FRAME.fullmatch(frame.name)
        if m is None:
            continue
        if not _LIBRARY.search(m.group("file")):
            return short(frame.name)
        fallback = fallback or short(frame.name)
    return fallback


def _frames(python: Sequence[Event], syncs: Sequence[Event]) -> list[tuple[str | None, bool]]:
    """For each sync (by start), the user frame that called it, and whether the tracker's own
    client made it (:data:`_OWN`): one sweep over the Python frames (by start, enclosing
    first) with a stack of the ones still open."""
    out: list[tuple[str | None, bool]] = []
    stack: list[Event] = []
    k = 0
    for sync in syncs:
        while k < len(python) and python[k].ts <= sync.ts:
            while stack and stack[-1].end < python[k].ts:
                stack.pop()
            stack.append(python[k])
            k += 1
        while stack and stack[-1].end < sync.ts:
            stack.pop()
        own = any(_OWN.search(f.name) for f in stack if f.end + _EPS >= sync.end)
        out.append((_user_frame(stack, sync), own))
    return out


def host_syncs(tr: Loop) -> dict[str, Any]:
    events = tr.cpu[tr.main]
    starts, calls = _runtime([e for e in events if e.name in _SYNC_RUNTIME])
    found = [
        e
        for e in events
        if (e.cat in ("cpu_op", "cuda_runtime") and e.name in _SYNC_OPS)
        or (e.cat == "cpu_op" and e.name in _COPY_OPS and contains_any(starts, calls, e))
    ]
    steps = tr.span
    outer: list[Event] = []
    for e in found:  # sorted by start, enclosing first: keep the outermost of each nest
        if outer and e.ts < outer[-1].end - _EPS:
            continue
        if clip([(e.ts, max(e.end, e.ts + _EPS))], steps):
            outer.append(e)
    python = [e for e in events if e.cat == "python_function"]
    # tracker.log() turning a CPU tensor into a float: no device to wait for, and the very
    # thing the hint would advise (a tensor on a device is converted in the writer thread)
    mine = [(e, f) for e, (f, own) in zip(outer, _frames(python, outer), strict=True) if not own]
    outer = [e for e, _ in mine]
    frames = Counter((f, e.name) for e, f in mine if f)
    return {
        "count": len(outer),
        "per_step": round(len(outer) / len(tr.steps), 4),
        "time_ms": ms(sum(e.dur for e in outer)),
        "by_op": dict(Counter(e.name for e in outer).most_common()),
        "frames": [
            {"frame": f, "op": op, "count": n} for (f, op), n in frames.most_common(TOP_FRAMES)
        ],
    }


# ----------------------------------------------------------------------------- GPU


def gpu_summary(tr: Loop) -> tuple[dict[str, Any] | None, float | None]:
    kernels = [e for e in tr.gpu if e.cat == "kernel"]
    if not kernels:
        return None, None
    lo = min(tr.steps[0][0], min(e.ts for e in tr.gpu))
    hi = max(tr.steps[-1][1], max(e.end for e in tr.gpu))
    busy = length(union((e.ts, e.end) for e in kernels))
    calls: Counter[str] = Counter()
    spent: defaultdict[str, float] = defaultdict(float)
    for e in kernels:
        calls[e.name] += 1
        spent[e.name] += e.dur
    total = sum(spent.values())
    top = sorted(spent, key=lambda n: (-spent[n], n))[:TOP_KERNELS]
    summary = {
        "busy_share": share(busy, hi - lo),
        "idle_share": round(1.0 - share(busy, hi - lo), 4),
        "kernel_ms": ms(total),
        "memcpy_ms": ms(sum(e.dur for e in tr.gpu if e.cat != "kernel")),
        "kernels": [
            {
                "name": short(n),
                "calls": calls[n],
                "total_ms": ms(spent[n]),
                "share": share(spent[n], total),
            }
            for n in top
        ],
    }
    comm = union((e.ts, e.end) for e in kernels if _COMM.search(e.name))
    compute = union((e.ts, e.end) for e in kernels if not _COMM.search(e.name))
    overlap = share(length(clip(comm, compute)), length(comm)) if comm and compute else None
    return summary, overlap


def ms(us: float) -> float:
    return round(us / 1000.0, 4)


def share(part: float, whole: float) -> float:
    return round(min(1.0, part / whole), 4) if whole > 0 else 0.0


def short(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"
