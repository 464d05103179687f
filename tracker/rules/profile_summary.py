"""Where a profiled training loop's time goes, from a ``torch.profiler`` Chrome trace: pure,
no I/O, no torch.

:func:`summarize` reads the parsed JSON that ``profile.export_chrome_trace`` writes
(``{"traceEvents": [...]}``, see :mod:`tracker.rules.profile_trace` for what is read) and
returns a JSON-able summary; :func:`diff` compares two summaries; :func:`cause` names the
dominant cause of slow steps with what to try; :func:`refine_throughput` makes the doctor's
throughput-drop diagnosis say why, given the run's profiles.

The training thread is the CPU thread that holds the ``ProfilerStep#N`` annotations
(``prof.step()`` writes them when the profiler has a schedule); without them, the thread with
the most ``Optimizer.step#...`` annotations, DataLoader fetches, then op time. Its steps are
the ``ProfilerStep#N`` ranges; without them, the spans between the ends of consecutive
``Optimizer.step#`` annotations; without those, the whole span of the thread is one step.

Summary keys (times in milliseconds, shares in [0, 1] of the total step time unless said):

- ``version``: 1.
- ``steps``: ``count``, ``median_ms``, ``mean_ms``, ``total_ms``, ``first``/``last`` (the
  ``ProfilerStep`` numbers, else null) and ``source``: ``profiler_step``,
  ``optimizer_step`` or ``span``.
- ``top_ops``: the 15 ``cpu_op`` names with the most self time over every CPU thread (self =
  duration less the ops and annotations directly inside it on the same thread): ``name``,
  ``calls``, ``self_ms``, ``total_ms``, ``share`` (self time over the total step time).
- ``time_split``: for ``compute``, ``communication``, ``memory_copies``, ``dataloader``,
  ``idle``: ``{"ms", "share", "median_share"}`` (``median_share``: the median over the
  steps of each step's share, which one stalled step -- the first batch of DataLoader
  workers starting, a moment the machine was busy elsewhere -- does not move). Each moment
  of a step counts once, in this order: waiting in ``enumerate(DataLoader)#...__next__``
  (training thread); compute (a ``cpu_op`` on the training thread or an autograd thread of
  its process, not a copy or a collective; a GPU kernel that is not a collective); memory
  copies (``aten::copy_``/``to``/``_to_copy`` that call a ``*Memcpy*`` runtime function,
  i.e. cross devices; ``aten::_pin_memory``; GPU memcpy/memset); communication
  (c10d/NCCL/Gloo collectives on the CPU or the GPU -- so only what compute does not
  hide); idle (Python between ops, waits for anything else).
- ``dataloader_share``: ``time_split.dataloader.share``.
- ``host_syncs``: on the training thread within the steps, the outermost of ``aten::item``,
  ``aten::_local_scalar_dense``, ``cuda{Stream,Device,Event}Synchronize`` and
  ``aten::to``/``_to_copy``/``copy_`` that call a synchronizing runtime function (a copy
  to the CPU): ``count``, ``per_step``, ``time_ms``, ``by_op`` (name -> count) and
  ``frames``: up to 5 ``{"frame", "op", "count"}``, the innermost user Python frame
  (``with_stack=True``; library and built-in frames skipped) that made the call.
- ``gpu``: null without GPU kernels; else ``busy_share``/``idle_share`` of the profiled span
  (steps and GPU activity, first to last) covered by the union of kernel intervals,
  ``kernel_ms``, ``memcpy_ms`` and ``kernels``: the 10 kernels with the most time
  (``name``, ``calls``, ``total_ms``, ``share`` of all kernel time).
- ``comm_overlap``: the share of collective kernel time that compute kernels overlap;
  null unless both are present (DDP on GPUs).

Failure modes: :class:`~tracker.rules.profile_trace.InvalidTrace` (an ``InvalidInput``)
naming what is wrong with a trace that is not the Chrome format or holds no CPU op or
annotation;
``InvalidInput`` for a summary that is not one :func:`summarize` returns. Never anything else.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.errors import InvalidInput
from tracker.rules.health import THROUGHPUT_DROP, Diagnosis
from tracker.rules.profile_loop import (
    CATEGORIES,
    gpu_summary,
    host_syncs,
    ms,
    read_loop,
    time_split,
    top_ops,
)
from tracker.rules.profile_trace import InvalidTrace, length

__all__ = [
    "CATEGORIES",
    "COMMUNICATION_SHARE",
    "DATALOADER_SHARE",
    "HOST_SYNCS_PER_STEP",
    "MEMORY_COPY_SHARE",
    "SUMMARY_VERSION",
    "InvalidTrace",
    "cause",
    "diff",
    "refine_throughput",
    "summarize",
]

SUMMARY_VERSION = 1

# Causes. A third of the step waiting for batches is time the model waits every step, and
# more than prefetching (num_workers, prefetch_factor) normally leaves exposed.
DATALOADER_SHARE = 0.30
# DDP overlaps its all-reduce with the backward pass; a quarter of the step in collectives
# that nothing overlaps is past what a well-bucketed DDP loop shows.
COMMUNICATION_SHARE = 0.25
# Cross-device copies are cheap when pinned and non-blocking; a fifth of the step copying
# means data moves each step that could be moved once or asynchronously.
MEMORY_COPY_SHARE = 0.20
# One host sync per step is the `running += loss.item()` pattern: the CPU cannot queue the
# next step's kernels ahead of the GPU, so the GPU idles at every step boundary.
HOST_SYNCS_PER_STEP = 1.0


# ----------------------------------------------------------------------- summarize


def summarize(trace: Mapping[str, Any]) -> dict[str, Any]:
    """Where the profiled steps' time went (the keys are in the module docstring).

    Raises :class:`InvalidTrace` (an ``InvalidInput``) for a trace that is not the Chrome
    trace format ``export_chrome_trace`` writes, or that holds no CPU op."""
    tr = read_loop(trace)
    durations = [e - s for s, e, _ in tr.steps]
    total = length(tr.span)
    numbers = [n for _, _, n in tr.steps if n is not None]
    split = time_split(tr)
    gpu, overlap = gpu_summary(tr)
    return {
        "version": SUMMARY_VERSION,
        "steps": {
            "count": len(tr.steps),
            "median_ms": ms(statistics.median(durations)),
            "mean_ms": ms(statistics.fmean(durations)),
            "total_ms": ms(total),
            "first": min(numbers) if numbers else None,
            "last": max(numbers) if numbers else None,
            "source": tr.source,
        },
        "top_ops": top_ops(tr, total),
        "time_split": split,
        "dataloader_share": split["dataloader"]["share"],
        "host_syncs": host_syncs(tr),
        "gpu": gpu,
        "comm_overlap": overlap,
    }


# ------------------------------------------------------------- reading a summary


def _get(summary: object, path: str, kind: type | tuple[type, ...], *, field: str) -> Any:
    """``summary[a][b]...`` for ``path`` ``"a.b"``, checked to be ``kind`` (None allowed
    for numbers only where a missing part means "not measured")."""
    value: object = summary
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise InvalidInput(
                f"{field}.{path} is missing: pass a summary that summarize() returned",
                field=f"{field}.{path}",
            )
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InvalidInput(
            f"{field}.{path} must be {getattr(kind, '__name__', 'a number')}, not "
            f"{type(value).__name__}",
            field=f"{field}.{path}",
        )
    return value


def _num(summary: object, path: str, field: str) -> float:
    return float(_get(summary, path, (int, float), field=field))


def _ops(summary: object, field: str) -> dict[str, float]:
    """Self ms per step of each top op."""
    steps = max(1.0, _num(summary, "steps.count", field))
    out: dict[str, float] = {}
    for i, op in enumerate(_get(summary, "top_ops", list, field=field)):
        name = _get(op, "name", str, field=f"{field}.top_ops[{i}]")
        out[name] = _num(op, "self_ms", f"{field}.top_ops[{i}]") / steps
    return out


def _pair(a: float | None, b: float | None, digits: int = 4) -> dict[str, float | None]:
    delta = None if a is None or b is None else round(b - a, digits)
    return {"a": a, "b": b, "delta": delta}


def _gpu_busy(summary: object, field: str) -> float | None:
    gpu = _get(summary, "gpu", (Mapping, type(None)), field=field)
    return None if gpu is None else _num(gpu, "busy_share", f"{field}.gpu")


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Summary ``b`` against summary ``a`` (``b`` the newer or slower one, by convention).

    Returns ``step_time_ratio`` (b's median step time over a's; null when a's is 0),
    ``steps`` (both counts), ``ops`` (for the union of both top-op lists: self ms *per
    step*, so profiles of different lengths compare; by the size of the change, largest
    first), ``time_split`` and ``host_syncs_per_step`` and ``gpu_busy_share`` (each
    ``{"a", "b", "delta"}``; ``gpu_busy_share`` null when neither has GPU kernels).

    Raises ``InvalidInput`` naming the field when either is not a summary."""
    med_a, med_b = _num(a, "steps.median_ms", "a"), _num(b, "steps.median_ms", "b")
    ops_a, ops_b = _ops(a, "a"), _ops(b, "b")
    ops: list[dict[str, Any]] = [
        {
            "name": name,
            "a_ms_per_step": round(ops_a.get(name, 0.0), 4),
            "b_ms_per_step": round(ops_b.get(name, 0.0), 4),
            "delta_ms_per_step": round(ops_b.get(name, 0.0) - ops_a.get(name, 0.0), 4),
        }
        for name in sorted(set(ops_a) | set(ops_b))
    ]
    ops.sort(key=lambda o: (-abs(o["delta_ms_per_step"]), o["name"]))
    busy_a, busy_b = _gpu_busy(a, "a"), _gpu_busy(b, "b")
    return {
        "step_time_ratio": round(med_b / med_a, 4) if med_a > 0 else None,
        "steps": {"a": int(_num(a, "steps.count", "a")), "b": int(_num(b, "steps.count", "b"))},
        "ops": ops,
        "time_split": {
            c: _pair(_num(a, f"time_split.{c}.share", "a"), _num(b, f"time_split.{c}.share", "b"))
            for c in CATEGORIES
        },
        "host_syncs_per_step": _pair(
            _num(a, "host_syncs.per_step", "a"), _num(b, "host_syncs.per_step", "b")
        ),
        "gpu_busy_share": None if busy_a is None and busy_b is None else _pair(busy_a, busy_b),
    }


# --------------------------------------------------------------------------- cause


@dataclass(frozen=True)
class _Cause:
    code: str
    finding: str  # what the profile shows, with numbers
    advice: str  # what to try

    @property
    def text(self) -> str:
        return f"{self.finding}: {self.advice}"


def _pct(share: float) -> str:
    return f"{share * 100:.0f} %"


def _find(summary: Mapping[str, Any]) -> _Cause | None:
    shares = {c: _num(summary, f"time_split.{c}.median_share", "summary") for c in CATEGORIES}
    candidates = [
        (
            shares["dataloader"],
            DATALOADER_SHARE,
            _Cause(
                "dataloader",
                f"{_pct(shares['dataloader'])} of the step is waiting for the DataLoader",
                "raise num_workers / pin_memory, or cache the dataset",
            ),
        ),
        (
            shares["communication"],
            COMMUNICATION_SHARE,
            _Cause(
                "communication",
                f"{_pct(shares['communication'])} of the step is communication that compute "
                "does not hide",
                "overlap it (DDP bucket_cap_mb, gradient_as_bucket_view), communicate less often "
                "(gradient accumulation under no_sync()), or check the interconnect",
            ),
        ),
        (
            shares["memory_copies"],
            MEMORY_COPY_SHARE,
            _Cause(
                "memory_copies",
                f"{_pct(shares['memory_copies'])} of the step copies memory between devices",
                "move each batch once with pin_memory=True and .to(device, non_blocking=True), "
                "and keep tensors on the device instead of moving them back and forth",
            ),
        ),
    ]
    over = [(s, c) for s, limit, c in candidates if s >= limit]
    if over:
        return max(over, key=lambda sc: sc[0])[1]
    per_step = _num(summary, "host_syncs.per_step", "summary")
    if per_step < HOST_SYNCS_PER_STEP:
        return None
    frames = _get(summary, "host_syncs.frames", list, field="summary")
    by_op = _get(summary, "host_syncs.by_op", Mapping, field="summary")
    op = str(next(iter(by_op), ""))
    where = f" ({op})" if op else ""
    if frames:
        top = frames[0]
        op = _get(top, "op", str, field="summary.host_syncs.frames[0]")
        frame = _get(top, "frame", str, field="summary.host_syncs.frames[0]")
        where = f" ({op} at {frame})"
    times = "once" if round(per_step, 1) == 1 else f"{per_step:.3g} times"
    return _Cause(
        "host_sync",
        f"each step waits for the device {times}{where}",
        _COPY_SYNC_ADVICE if op in _COPY_SYNC_OPS else _SYNC_ADVICE,
    )


_SYNC_ADVICE = "log the tensor itself (tracker.log takes 0-d tensors) or sync less often"
# A blocking copy (x.to("cuda") from pageable memory, .cpu(), .numpy()) waits too
_COPY_SYNC_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
_COPY_SYNC_ADVICE = (
    "copy batches with DataLoader(pin_memory=True) and .to(device, non_blocking=True), and "
    "keep results on the device (tracker.log takes 0-d tensors) instead of .cpu() each step"
)


def cause(summary: Mapping[str, Any]) -> tuple[str, str] | None:
    """The dominant cause of slow steps and what to try, or None for a healthy loop.

    Codes: ``dataloader``, ``communication``, ``memory_copies`` (the one with the largest
    median share of a step over its threshold: the typical step, not one stall), else
    ``host_sync`` (at least ``HOST_SYNCS_PER_STEP`` per step). Raises ``InvalidInput`` for
    a malformed summary."""
    found = _find(summary)
    return None if found is None else (found.code, found.text)


# ------------------------------------------------------------------- the doctor


def _span(item: object, i: int) -> tuple[int, int, Mapping[str, Any]]:
    where = f"summaries[{i}]"
    if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 3:
        raise InvalidInput(f"{where} must be (first_step, last_step, summary)", field=where)
    first, last, summary = item
    for name, value in (("first_step", first), ("last_step", last)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{where}.{name} must be an int step", field=f"{where}.{name}")
    if not isinstance(summary, Mapping):
        raise InvalidInput(f"{where}.summary must be a summary object", field=f"{where}.summary")
    return first, last, summary


def refine_throughput(
    diagnosis: Diagnosis, summaries: Sequence[tuple[int, int, Mapping[str, Any]]]
) -> Diagnosis:
    """A throughput-drop diagnosis made precise by the run's profiles.

    ``summaries``: ``(first_step, last_step, summary)`` of each profile of the run. Of the
    profiles that reach into the slow stretch or past it (``last_step >= diagnosis.step``),
    those that overlap the stretch first, then the latest, the first whose :func:`cause`
    finds one gives the message the cause and the hint what to try; the rest of the
    diagnosis is kept. Any other diagnosis, or no such profile, comes back unchanged.

    Raises ``InvalidInput`` for a malformed ``summaries`` entry."""
    if diagnosis.code != THROUGHPUT_DROP or diagnosis.step is None:
        return diagnosis
    onset = diagnosis.step
    end = diagnosis.evidence.window[1] if diagnosis.evidence else onset
    spans = [_span(item, i) for i, item in enumerate(summaries)]
    later = [s for s in spans if s[1] >= onset]
    later.sort(key=lambda s: (s[0] <= end, s[1]), reverse=True)
    for first, last, summary in later:
        found = _find(summary)
        if found is None:
            continue
        return dataclasses.replace(
            diagnosis,
            message=f"{diagnosis.message} A profile of steps {first:,}-{last:,}: {found.finding}.",
            hint=f"Step time rose at step {onset:,}: {found.finding}: {found.advice}.",
        )
    return diagnosis
