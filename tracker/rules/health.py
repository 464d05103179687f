"""Training-health detectors over stored metric series: pure functions, no I/O, no clock.

Each detector reads one or two series -- ``(step, value)`` pairs in step order, ``None``
standing for NaN as the store returns it -- and returns a :class:`Diagnosis` or ``None``
when the series looks healthy. A diagnosis has a stable ``code`` (see ``CODES``), a
``severity`` (``error`` or ``warning``), the ``step`` at which the problem *began* (its
onset, not when it was noticed), the ``evidence`` (metric, the step window and a few values)
and a ``hint`` that says what to try.

Every threshold is relative to the run's own history (median and MAD, a robust slope), so a
noisy loss, a warmup, a step schedule or an evaluation pause is not a problem; each one is a
field of :class:`HealthLimits` and the defaults are kept honest by the healthy-run table in
``tests/unit/test_health.py``. ``diagnose`` routes a run's series (keyed by metric name) to
the detectors. ``final`` says the run has ended: some problems (a NaN at the very last
step) can only be told apart from a transient once no more points will come.

Failure modes: ``HealthError`` (an ``InvalidInput``) for limits out of range; malformed
series (unsorted steps, repeated steps) are tolerated -- points are sorted by step first.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import re
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracker.errors import InvalidInput
from tracker.rules.jsonvalues import encode_float
from tracker.rules.recompile_reasons import RecompileFact, advice
from tracker.rules.units import format_bytes

__all__ = [
    "AMP_SCALE_COLLAPSE",
    "CHECKPOINT_CORRUPT",
    "CODES",
    "DIVERGENCE",
    "GRAD_EXPLOSION",
    "GRAD_VANISHING",
    "LOSS_SPIKE",
    "MEMORY_GROWTH",
    "NONFINITE",
    "RECOMPILES",
    "THROUGHPUT_DROP",
    "CheckpointFact",
    "Diagnosis",
    "Evidence",
    "HealthError",
    "HealthLimits",
    "amp_scale_collapse",
    "checkpoint_problems",
    "diagnose",
    "divergence",
    "grad_explosion",
    "grad_vanishing",
    "is_loss_key",
    "is_memory_key",
    "loss_spike",
    "memory_growth",
    "nonfinite",
    "recompiles",
    "scaler_skips",
    "throughput_drop",
]

NONFINITE = "nonfinite"
LOSS_SPIKE = "loss_spike"
DIVERGENCE = "divergence"
MEMORY_GROWTH = "memory_growth"
THROUGHPUT_DROP = "throughput_drop"
GRAD_EXPLOSION = "grad_explosion"
GRAD_VANISHING = "grad_vanishing"
AMP_SCALE_COLLAPSE = "amp_scale_collapse"
RECOMPILES = "recompiles"
FRAME_RECOMPILES = "compile/frame_recompiles_max"  # the most recompiles of any one frame
CHECKPOINT_CORRUPT = "checkpoint_corrupt"
CODES = (
    NONFINITE,
    LOSS_SPIKE,
    DIVERGENCE,
    MEMORY_GROWTH,
    THROUGHPUT_DROP,
    GRAD_EXPLOSION,
    GRAD_VANISHING,
    AMP_SCALE_COLLAPSE,
    RECOMPILES,
    CHECKPOINT_CORRUPT,
)

Point = tuple[int, float | None]
_MAX_VALUES = 12  # values kept as evidence
_SIGMA = 1.4826  # MAD -> standard deviation of a normal distribution


class HealthError(InvalidInput):
    """Detector limits that break a rule (a threshold out of its range)."""

    code = "invalid_health_input"


@dataclass(frozen=True)
class HealthLimits:
    """Every threshold of the detectors; the defaults suit ordinary training runs."""

    persist: int = 3  # non-finite points in a row that make a problem persistent
    history: int = 20  # points of history before a spike/explosion can be judged
    spike_sigmas: float = 10.0  # robust z of a loss spike over its trailing window
    spike_ratio: float = 0.5  # ... and at least this fraction above the trailing median
    spike_range: float = 0.1  # ... and this fraction of the range the series covered before
    spike_over_noise: float = 3.0  # ... and this many times its largest excursion above the
    spike_noise_points: int = 200  # trailing median in this many points before (own noise)
    diverge_sigmas: float = 8.0
    diverge_progress: float = 0.5  # rise back by this share of the progress made, or
    diverge_ratio: float = 1.0  # by this share of the best level (doubled), to diverge
    diverge_points: int = 10  # points the divergence must last (up to the last one)
    memory_min_points: int = 8
    memory_min_growth_gpu: float = 32 * 1024**2
    memory_min_growth_rss: float = 32 * 1024**2
    slow_factor: float = 2.0  # step time this many times the baseline is slow
    slow_points: int = 10  # a slow stretch shorter than this is a pause, not a drop
    slow_min_lost_s: float = 1.0  # ... and one that cost less time than this is noise
    slow_min_share: float = 0.1  # ... or less than this share of the run's step time
    explode_factor: float = 10.0
    vanish_ratio: float = 1e-4  # grad norm below this share of its early median
    vanish_floor: float = 1e-8  # or below this absolute value
    scale_floor: float = 1.0  # GradScaler's scale at or below this has collapsed
    skipped_points: int = 5  # logged points in a row that all skipped their steps
    recompile_limit: int = 8  # torch._dynamo's default recompile_limit (compiles per frame)

    def __post_init__(self) -> None:
        for name in ("persist", "history", "diverge_points", "memory_min_points"):
            if getattr(self, name) < 1:
                raise HealthError(f"{name} must be >= 1", field=name)
        if self.slow_factor <= 1 or self.explode_factor <= 1:
            raise HealthError("slow_factor and explode_factor must be > 1", field="factor")
        if not 0 <= self.slow_min_share < 1:
            raise HealthError("slow_min_share must be in [0, 1)", field="slow_min_share")
        if not 0 <= self.spike_range < 1:
            raise HealthError("spike_range must be in [0, 1)", field="spike_range")
        if not 0 < self.vanish_ratio < 1:
            raise HealthError("vanish_ratio must be in (0, 1)", field="vanish_ratio")


@dataclass(frozen=True)
class Evidence:
    """What a diagnosis rests on: one metric, the step window and a few of its values."""

    metric: str
    window: tuple[int, int]
    values: tuple[float, ...] = ()  # NaN/Inf kept; as_dict writes the JSON wire form
    numbers: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "window": list(self.window),
            "values": [encode_float(v) for v in self.values],
            **{k: encode_float(v) for k, v in self.numbers.items()},
        }


@dataclass(frozen=True)
class Diagnosis:
    code: str
    severity: str  # "error" or "warning"
    step: int | None  # the onset: the first step of the problem
    message: str  # what was seen, with numbers
    hint: str  # what to try
    evidence: Evidence | None = None

    @property
    def metric(self) -> str | None:
        return self.evidence.metric if self.evidence else None

    @property
    def key(self) -> str:
        """Identity of a diagnosis within a run: one per code and metric."""
        return f"{self.code}:{self.metric or ''}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "step": self.step,
            "metric": self.metric,
            "message": self.message,
            "hint": self.hint,
            "evidence": self.evidence.as_dict() if self.evidence else None,
        }


# ------------------------------------------------------------------------ helpers


class _Sorted(list[tuple[int, float]]):
    """Points as :func:`_sorted` made them: :func:`diagnose` sorts each series once and
    every detector it hands the series to takes it as it is."""


def series_of(steps: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
    """``(step, value)`` pairs of two arrays (NaN kept). Steps strictly increasing: as the
    detectors take a series without sorting it again; else (a step given more than once, out
    of order) a plain list, sorted by each detector as any series is."""
    steps = np.asarray(steps)
    pairs = zip(steps.tolist(), np.asarray(values, dtype=np.float64).tolist(), strict=True)
    if len(steps) > 1 and not (np.diff(steps) > 0).all():
        return list(pairs)
    return _Sorted(pairs)


def _sorted(points: Iterable[Point]) -> list[tuple[int, float]]:
    """Points by step, ``None`` read as NaN; a repeated step keeps its last value."""
    if type(points) is _Sorted:
        return points
    by_step: dict[int, float] = {}
    for step, value in points:
        by_step[int(step)] = math.nan if value is None else float(value)
    return _Sorted(sorted(by_step.items()))


def _all_finite(points: Sequence[Point]) -> bool:
    """Whether every value of ``points`` is a finite number (None is NaN)."""
    try:
        values = np.asarray([v for _, v in points], dtype=np.float64)  # None -> NaN
    except (TypeError, ValueError, OverflowError):  # not plain numbers: the rule decides
        return False
    return bool(np.isfinite(values).all())


def _finite(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    return [(s, v) for s, v in points if math.isfinite(v)]


def _median_sigma(values: Sequence[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return med, _SIGMA * mad


_BLOCK = 4096  # windows per numpy block: 4096 x history floats at a time, not the whole run


def _trailing_median_sigma(
    pts: Sequence[tuple[int, float]], w: int
) -> tuple[list[float], list[float]]:
    """``_median_sigma`` of the ``w`` values before each point from the ``w``-th on (item
    ``k - w`` is point ``k``'s), in numpy: the same numbers (a median of an even count is
    the mean of its two middle values in both), ~40x sooner on a run of 100,000 points."""
    values = np.fromiter((v for _, v in pts), dtype=np.float64, count=len(pts))
    meds, sigmas = _trailing_median_sigma_np(values, w)
    return meds.tolist(), sigmas.tolist()


def _trailing_median_sigma_np(values: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_trailing_median_sigma` of an array of finite values, as arrays."""
    meds = _trailing_medians(values, w)
    return meds, _trailing_sigmas(values, w, meds, np.arange(len(meds)))


def _trailing_medians(values: np.ndarray, w: int) -> np.ndarray:
    """The median of the ``w`` values before each point from the ``w``-th on."""
    if len(values) <= w:
        return np.empty(0)
    windows = np.lib.stride_tricks.sliding_window_view(values, w)[:-1]
    meds = np.empty(len(windows))
    for at in range(0, len(windows), _BLOCK):
        block = windows[at : at + _BLOCK]
        meds[at : at + len(block)] = _medians(block)
    return meds


def _trailing_sigmas(values: np.ndarray, w: int, meds: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The robust sigma (``_SIGMA`` x the median absolute deviation from ``meds``) of the
    windows of :func:`_trailing_medians` numbered ``at``."""
    mads = np.empty(len(at))
    if not len(at):
        return mads
    windows = np.lib.stride_tricks.sliding_window_view(values, w)[:-1]
    for lo in range(0, len(at), _BLOCK):
        which = at[lo : lo + _BLOCK]
        mads[lo : lo + len(which)] = _medians(np.abs(windows[which] - meds[which, None]))
    return _SIGMA * mads


def _medians(rows: np.ndarray) -> np.ndarray:
    """The median of each row of finite values: its middle value, or the mean of its two
    middle values (``statistics.median``'s numbers; ``np.median``'s too, without importing
    ``numpy.ma``, ~14 ms at a run's end). Rows of a window's length are sorted whole: 4x
    sooner than ``np.partition`` picking the middle (25 -> 6 ms for 100,000 rows of 20)."""
    m = rows.shape[1]
    half = m // 2
    ranked = np.sort(rows, axis=1)
    if m % 2:
        return ranked[:, half]
    with np.errstate(over="ignore"):  # two values near the float max: inf, as in Python
        return (ranked[:, half - 1] + ranked[:, half]) / 2


def _values(points: Sequence[tuple[int, float]], lo: int, hi: int) -> tuple[float, ...]:
    picked = [v for s, v in points if lo <= s <= hi]
    if len(picked) > _MAX_VALUES:
        half = _MAX_VALUES // 2
        picked = picked[:half] + picked[-half:]
    return tuple(picked)


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.4g}"


_LOSS_NAME = re.compile(r"loss", re.IGNORECASE)


def is_loss_key(key: str) -> bool:
    """A loss-like metric: its last path part names a loss (``loss``, ``train/loss``,
    ``val_loss``), but not the AMP loss scale."""
    last = key.rsplit("/", 1)[-1].lower()
    return bool(_LOSS_NAME.search(last)) and "scale" not in last and not key.startswith("amp/")


# Memory in bytes that a leak makes climb: the process RSS and the allocator's live bytes,
# under any prefix (``sys/rss_bytes``, ``sys/rank1/gpu0/allocated_bytes``, a script's own
# ``mem/rss_bytes`` or ``mem/gpu_allocated_bytes``). Peaks only ever rise and reserved
# memory is the allocator's cache, so neither is read as a leak; other units are not bytes.
# ``sys/step/...`` repeats the current device's ``sys/gpu<i>/...`` on every call: one
# diagnosis per leak, not two.
_MEMORY_NAME = re.compile(r"(?:\w+_)?(?:rss|allocated|memory_allocated)_bytes")


def is_memory_key(key: str) -> bool:
    """A memory series the leak detector reads: its last path part names RSS or allocated
    bytes (``sys/rss_bytes``, ``mem/gpu_allocated_bytes``), never a peak."""
    last = key.rsplit("/", 1)[-1].lower()
    if key.startswith("sys/step/") or "peak" in last or "max_" in last:
        return False
    return bool(_MEMORY_NAME.fullmatch(last))


def _is_gpu_key(key: str) -> bool:
    return "gpu" in key.lower() or "cuda" in key.lower()


# ---------------------------------------------------------------------- nonfinite

_NONFINITE_HINT = (
    "Lower the learning rate (or lengthen its warmup), clip gradients "
    "(torch.nn.utils.clip_grad_norm_), check the inputs and labels for NaN, or train in bf16 "
    "/ with a GradScaler instead of plain fp16."
)
_NONFINITE_AMP_HINT = (
    "The run's GradScaler skips the steps whose gradients overflow, but it cannot make a "
    "non-finite value finite: lower the learning rate (or lengthen its warmup), clip "
    "gradients after scaler.unscale_(optimizer), check the inputs and labels for NaN, and "
    "compute the loss in fp32 (torch.autocast(..., enabled=False)) or train in bf16."
)


def scaler_skips(scale: Iterable[Point] = (), skipped: Iterable[Point] = ()) -> tuple[int, ...]:
    """The steps at which a GradScaler skipped an optimizer step, from its series: where
    ``amp/skipped_steps`` rose (a cumulative count from 0 at ``watch()``, or per-point
    counts) or ``amp/loss_scale`` fell (every skip halves the scale; nothing else lowers it).
    """
    steps = {s for (_, p), (s, v) in itertools.pairwise(_finite(_sorted(scale))) if v < p}
    counts = _finite(_sorted(skipped))
    if counts and counts[0][1] > 0:
        steps.add(counts[0][0])  # skips before the first point: the count started at 0
    steps.update(s for s, v in _increments(counts) if v > 0)
    return tuple(sorted(steps))


def nonfinite(
    points: Iterable[Point],
    metric: str = "metric",
    *,
    final: bool = True,
    amp: bool = False,
    skips: Sequence[int] = (),
    limits: HealthLimits | None = None,
) -> Diagnosis | None:
    """The first step of a *persistent* stretch of NaN/±Inf values of one metric.

    A stretch is persistent when it lasts ``limits.persist`` points or more, or when it
    reaches the last point of a run that has ended (``final``). A stretch that recovers
    (finite values follow) and is shorter than ``persist`` is a transient (a skipped batch).

    With ``amp`` (the run logs a GradScaler) any stretch that recovers is AMP's own
    overflow-and-skip, not a problem; and a stretch of a metric that is not a loss (a
    gradient norm) is the scaler's business whenever the scaler skipped steps during it
    (``skips``, from :func:`scaler_skips`), recovered or not: that is its calibration (the
    first steps halve a too-high initial scale) or an overflow it handles; a scale that never
    recovers is :func:`amp_scale_collapse`'s. A loss is computed before the scaling, so a
    non-finite loss that lasts is a problem with or without a scaler.
    """
    limits = limits or HealthLimits()
    points = points if isinstance(points, Sequence) else list(points)
    if _all_finite(points):  # the usual case, in numpy: no sort, no scan
        return None
    pts = _sorted(points)
    amp = amp or bool(skips)
    i = 0
    while i < len(pts):
        if math.isfinite(pts[i][1]):
            i += 1
            continue
        j = i
        while j < len(pts) and not math.isfinite(pts[j][1]):
            j += 1
        length, recovered = j - i, j < len(pts)
        if recovered:
            counts = length >= limits.persist and not amp
        else:
            counts = final or length >= limits.persist
        if counts and not is_loss_key(metric) and _skipped_during(pts, i, j, skips):
            counts = False
        if counts:
            return _nonfinite_diagnosis(metric, pts, i, j, recovered, amp)
        i = j
    return None


def _skipped_during(pts: list[tuple[int, float]], i: int, j: int, skips: Sequence[int]) -> bool:
    """The scaler skipped a step between the finite points around ``pts[i:j]`` (the step
    after the last one when none follows: the scaler's point may be logged one step later)."""
    lo = pts[i - 1][0] if i > 0 else -math.inf
    hi = pts[j][0] if j < len(pts) else pts[-1][0] + 1
    k = bisect.bisect_right(skips, lo)
    return k < len(skips) and skips[k] <= hi


def _nonfinite_diagnosis(
    metric: str, pts: list[tuple[int, float]], i: int, j: int, recovered: bool, amp: bool
) -> Diagnosis:
    step, value = pts[i]
    before = [(s, v) for s, v in pts[:i] if math.isfinite(v)]
    last = f" (last finite value {_fmt(before[-1][1])} at step {before[-1][0]})" if before else ""
    how = f"for {j - i} points" if recovered else "and stayed non-finite"
    end = pts[j - 1][0]
    first = before[-1][0] if before else step
    return Diagnosis(
        NONFINITE,
        "error" if is_loss_key(metric) else "warning",
        step,
        f"{metric} became {_fmt(value)} at step {step}{last} {how} (to step {end}).",
        _NONFINITE_AMP_HINT if amp else _NONFINITE_HINT,
        Evidence(metric, (first, end), _values(pts, first, end)),
    )


# ------------------------------------------------------------ loss spike, divergence


def loss_spike(
    points: Iterable[Point],
    metric: str = "loss",
    *,
    limits: HealthLimits | None = None,
    judge_from: int = 0,
    final: bool = True,
) -> Diagnosis | None:
    """The first finite value far above its trailing window (median + ``spike_sigmas``
    robust standard deviations, and ``spike_ratio`` above the median) that recovers.

    On the series' own scale too: the jump must also be at least ``spike_range`` of the
    range the series covered before it (its highest minus its lowest value so far), so a
    loss that has converged near zero (0.007 jumping to 0.09, after starting at 2.3) has no
    "spike" of 12x; a flat series (small range) still has its real spikes.

    And over its own noise, two ways, each ``spike_over_noise`` times (see
    :func:`_noise_factor`): the highest any of the ``spike_noise_points`` points before it
    rose above its own trailing median -- a per-batch loss of a small batch jumps whenever a
    batch holds a hard example, and one more such jump is not a spike -- and, relative to
    the median, the highest jump of every point judged before it: in a series whose batches
    have jumped 15x their median now and then, another 10x is its noise, however quiet the
    last 200 points were. A smooth loss keeps its real spikes. Spikes are judged from ``2 *
    history`` points on, once that noise has been seen, and from the ``judge_from``-th
    point (see :func:`diagnose`'s ``partial``); the points before it are its memory.

    And alone in the run: none of the ``spike_noise_points`` points after it (once it has
    come back) may jump a third as high relative to its median. A batch-8 loss that is calm
    for 80 steps and then jumps 17x on a hard example jumps 10x again a few steps later: its
    noise had not shown yet. While the run trains (not ``final``) a spike is therefore
    reported once those points are seen; at the end, with the points there are.

    A lone point (the next one is back) that stays below the loss's early level (the median
    of its first ``history`` points) is one hard batch: a model that has memorised its
    data at 1e-4 meets a batch at 0.5 now and then, below what it scored untrained. A lone
    batch above that level (a sample the model never could fit: a bad label, a numerical
    glitch) and a jump that lasts several points (instability) are spikes."""
    limits = limits or HealthLimits()
    pts = _sorted(points)
    values = np.fromiter(map(operator.itemgetter(1), pts), dtype=np.float64, count=len(pts))
    finite = np.isfinite(values)
    if not finite.all():
        pts = list(itertools.compress(pts, finite.tolist()))
        values = values[finite]
    w = limits.history
    candidates: list[tuple[int, int]] = []  # (index, first index back under the bar)
    after_points = limits.spike_noise_points
    early = statistics.median(v for _, v in pts[:w]) if pts else 0.0  # where it started
    bars, relative = _spike_bars(values, w, limits, exact=False)

    def _alone(k: int, back: int) -> bool:
        # The points after the spike (from where it came back): none may jump a third as
        # high, relative to its median; while the run trains, wait until they are seen.
        if not final and k + after_points >= len(pts):
            return False
        later = relative[back : k + 1 + after_points]
        top = float(later.max()) if len(later) else 0.0
        return float(relative[k]) > _noise_factor(len(later), limits) * top

    # the series' own noise is known from 2 * history points on
    judged = values[2 * w :] > bars[2 * w :]
    for k in (int(i) + 2 * w for i in np.flatnonzero(judged)):
        if k < judge_from:
            continue
        bar = float(bars[k])
        after = [v for _, v in pts[k + 1 : k + 1 + limits.persist * 2]]
        if after and min(after) <= bar:  # it came back: a spike, not a divergence
            back = next(j for j in range(k + 1, len(pts)) if pts[j][1] <= bar)
            if back > k + 1 or pts[k][1] > early:  # a lone batch below the start: noise
                candidates.append((k, back))
    spikes = [k for k, back in candidates if _alone(k, back)]
    if not spikes:
        return None
    k = spikes[0]
    step, value = pts[k]
    med = statistics.median(v for _, v in pts[k - w : k])
    more = f"; {len(spikes)} spikes in all" if len(spikes) > 1 else ""
    return Diagnosis(
        LOSS_SPIKE,
        "warning",
        step,
        f"{metric} spiked to {_fmt(value)} at step {step}, {value / med:.3g}x the median "
        f"{_fmt(med)} of the {w} points before it{more}.",
        "Look at the batch of that step (bad samples, a data-order change); lower the "
        "learning rate or clip gradients; with Adam, a larger eps or lower beta2 damps spikes.",
        Evidence(metric, (pts[k - w][0], step), _values(pts, pts[max(0, k - 5)][0], step)),
    )


def _noise_factor(seen: int, limits: HealthLimits) -> float:
    """How many times its own noise a jump must be, after ``seen`` points of that noise.

    ``spike_over_noise`` (3) once ``spike_noise_points`` (200) have been seen, more before:
    for an exponential tail, a new point passes k times the largest of n earlier ones with
    probability n**-k, and the factor keeps that rate (200**-3, about once in 10**7 points)
    for a shorter history -- 26 points need 4.9x, not 3x (a batch-8 loss at step 46 is not
    yet known well enough to call 15x its median a spike)."""
    n = max(seen, 2)
    full = limits.spike_noise_points
    if n >= full:
        return limits.spike_over_noise
    return limits.spike_over_noise * math.log(full) / math.log(n)


def _spike_bars(
    values: np.ndarray, w: int, limits: HealthLimits, *, exact: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Each point's spike bar (from the ``w``-th point on; NaN before) and its height above
    its trailing median relative to that median (0 where the median is <= 0, and before
    the ``w``-th point), for :func:`loss_spike`, in numpy.

    Point ``k``'s bar is its trailing median plus the largest of: ``spike_sigmas`` robust
    sigmas (at least 1e-3 of the median), ``spike_ratio`` of the median, ``spike_range``
    of the range of the points before it, its noise factor (:func:`_noise_factor` of the
    points judged before it) times the highest excursion above their own median of the
    ``spike_noise_points`` points before it, and that factor times the highest relative
    jump of every point before it times the median. The same numbers as judging the points
    one by one (``tests/unit/test_health.py`` holds them equal to that loop).

    Not ``exact``: the sigma term (a median of absolute deviations, half the cost) only
    where the value passes the bar without it; elsewhere that lower bar, which the value
    does not pass either. Whether a point passes its bar, and the bar of every point that
    does, are the same."""
    n = len(values)
    bars = np.full(n, np.nan)
    relative = np.zeros(n)
    if n <= w:
        return bars, relative
    with np.errstate(all="ignore"):  # inf from huge values, as Python's floats give it
        meds = _trailing_medians(values, w)
        judged = n - w
        floor = np.maximum(1e-3 * np.abs(meds), 1e-12)  # sigma's least
        excursion = np.maximum(0.0, values[w:] - meds)
        positive = meds > 0
        rel = np.where(positive, excursion / np.where(positive, meds, 1.0), 0.0)
        relative[w:] = rel
        span = (
            np.maximum.accumulate(values)[w - 1 : n - 1]
            - np.minimum.accumulate(values)[w - 1 : n - 1]
        )
        noise = _sliding_max(np.concatenate((np.zeros(limits.spike_noise_points), excursion)),
                             limits.spike_noise_points)[:judged]  # fmt: skip
        top_rel = np.concatenate(([0.0], np.maximum.accumulate(rel)[:-1]))
        full = limits.spike_noise_points
        factor = np.full(judged, float(limits.spike_over_noise))
        for i in range(min(full, judged)):
            factor[i] = _noise_factor(i, limits)
        rest = np.maximum.reduce(
            [
                limits.spike_ratio * np.abs(meds),
                limits.spike_range * span,
                factor * noise,
                np.where(positive, factor * top_rel * meds, 0.0),
            ]
        )
        bars[w:] = meds + np.maximum(limits.spike_sigmas * floor, rest)
        at = np.arange(judged) if exact else np.flatnonzero(~(values[w:] <= bars[w:]))
        sigma = np.maximum(_trailing_sigmas(values, w, meds, at), floor[at])
        bars[w + at] = meds[at] + np.maximum(limits.spike_sigmas * sigma, rest[at])
        return bars, relative


def _sliding_max(x: np.ndarray, size: int) -> np.ndarray:
    """``out[i] = max(x[i : i + size])`` for every whole window, in O(len(x)): each block of
    ``size`` values' running max from its left and from its right (van Herk / Gil-Werman)."""
    n = len(x)
    if n < size:
        return np.empty(0)
    pad = (-n) % size
    blocks = np.concatenate((x, np.full(pad, -np.inf))).reshape(-1, size)
    left = np.maximum.accumulate(blocks, axis=1).ravel()
    right = np.maximum.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()
    return np.maximum(right[: n - size + 1], left[size - 1 : n])


def divergence(
    points: Iterable[Point], metric: str = "loss", *, limits: HealthLimits | None = None
) -> Diagnosis | None:
    """The loss rose far above its best level and stayed there to the last point.

    The level is a running median over ``history // 2`` points; the best level is its
    minimum. Diverged means above ``best + max(diverge_sigmas * sigma, diverge_progress *
    (start - best), diverge_ratio * |best|)`` for the last ``diverge_points`` points or more;
    the onset is the first point of that final stretch.
    """
    limits = limits or HealthLimits()
    pts = _finite(_sorted(points))
    w = max(3, limits.history // 2)
    if len(pts) < w + limits.diverge_points:
        return None
    vals = [v for _, v in pts]
    # each point's running median of the w points up to it (fewer at the start)
    level = [statistics.median(vals[: k + 1]) for k in range(w - 1)]
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(vals, dtype=np.float64), w)
    level += _medians(windows).tolist()
    start = level[w - 1]
    best_k = min(range(w - 1, len(level)), key=level.__getitem__)
    best = level[best_k]
    _, sigma = _median_sigma(vals[max(0, best_k - w + 1) : best_k + w])
    bar = best + max(
        limits.diverge_sigmas * sigma,
        limits.diverge_progress * (start - best),
        limits.diverge_ratio * abs(best),
    )
    k = len(pts)
    while k > best_k + 1 and vals[k - 1] > bar:
        k -= 1
    if len(pts) - k < limits.diverge_points:
        return None
    lasted = len(pts) - k
    rise = best + max(3 * sigma, 0.1 * (bar - best))  # the rise began where it left the best
    while k > best_k + 1 and vals[k - 1] > rise:
        k -= 1
    step = pts[k][0]
    return Diagnosis(
        DIVERGENCE,
        "error",
        step,
        f"{metric} diverged from step {step}: it stayed above {_fmt(bar)} for "
        f"{lasted} points, up to {_fmt(vals[-1])}, after its best level {_fmt(best)} "
        f"at step {pts[best_k][0]}.",
        "The learning rate is too high for this point of training: lower it or lengthen the "
        "warmup, clip gradients, and check that the schedule does not jump (restarts, "
        "resuming with a fresh optimizer state).",
        Evidence(
            metric,
            (pts[best_k][0], pts[-1][0]),
            _values(pts, pts[max(0, k - 3)][0], pts[-1][0]),
            {"best": best, "threshold": bar},
        ),
    )


# ------------------------------------------------------------------- memory growth


def _thin(pts: list[tuple[int, float]], most: int) -> list[tuple[int, float]]:
    """At most ``most`` points, evenly spread, keeping the first and the last."""
    if len(pts) <= most:
        return pts
    step = (len(pts) - 1) / (most - 1)
    return [pts[round(i * step)] for i in range(most)]


def _theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of pairwise slopes: a line fit that ignores outliers (on <= 60 points)."""
    n = len(xs)
    stride = max(1, n // 60)
    idx = list(range(0, n, stride))
    slopes = [
        (ys[b] - ys[a]) / (xs[b] - xs[a])
        for i, a in enumerate(idx)
        for b in idx[i + 1 :]
        if xs[b] != xs[a]
    ]
    return statistics.median(slopes) if slopes else 0.0


def _onset_of_rise(pts: Sequence[tuple[int, float]], slope: float) -> int:
    """Where a flat start turns into the rise: the last point still within the early level
    before the values keep climbing (the break of a flat-then-line fit).

    A candidate flat stretch that itself climbs at half the overall slope or more is not
    flat: a leak from the first step whose early steps grow faster (RSS is concave while
    the allocator maps fresh pages) has its onset at the start, not where it slows."""
    best_k, best_cost = 0, math.inf
    n = len(pts)
    sx = sy = sxx = sxy = 0.0
    for k in range(0, max(1, n - 4)):
        x, y = float(pts[k][0]), pts[k][1]
        sx, sy, sxx, sxy = sx + x, sy + y, sxx + x * x, sxy + x * y
        m = k + 1
        if m >= 2:
            den = m * sxx - sx * sx
            if den > 0 and (m * sxy - sx * sy) / den >= 0.5 * slope:
                continue  # this "flat" stretch rises like the leak itself
        flat = statistics.median(v for _, v in pts[: k + 1])
        cost = math.fsum(abs(v - flat) for _, v in pts[: k + 1])
        s0 = pts[k][0]
        cost += math.fsum(abs(v - (flat + slope * (s - s0))) for s, v in pts[k + 1 :])
        if cost < best_cost * 0.999:
            best_k, best_cost = k, cost
    return pts[best_k][0]


def memory_growth(
    points: Iterable[Point],
    metric: str = "sys/rss_bytes",
    *,
    min_growth: float | None = None,
    limits: HealthLimits | None = None,
) -> Diagnosis | None:
    """A steady rise of memory over steps (a leak): robust slope in bytes per step.

    Needs ``memory_min_points`` finite samples; the Theil-Sen slope must be positive, the
    rise along it at least ``min_growth`` bytes (default by metric: GPU allocator 32 MiB,
    host RSS 32 MiB), and the medians of the four quarters of the series must each rise --
    a one-time jump (model and optimizer state created), a plateau after warmup or a
    sawtooth (memory freed every N steps) is not a leak.
    """
    limits = limits or HealthLimits()
    pts = _thin(_finite(_sorted(points)), 240)  # the break search below is quadratic
    if len(pts) < limits.memory_min_points:
        return None
    if min_growth is None:
        gpu = _is_gpu_key(metric)
        min_growth = limits.memory_min_growth_gpu if gpu else limits.memory_min_growth_rss
    xs = [float(s) for s, _ in pts]
    ys = [v for _, v in pts]
    slope = _theil_sen(xs, ys)
    span = xs[-1] - xs[0]
    growth = slope * span
    if slope <= 0 or growth < min_growth:
        return None
    q = len(pts) // 4
    medians = [statistics.median(ys[i * q : (i + 1) * q if i < 3 else len(ys)]) for i in range(4)]
    rises = [b - a for a, b in itertools.pairwise(medians)]
    if min(rises) < 0.25 * growth / 4:
        return None
    onset = _onset_of_rise(pts, slope)
    per100 = slope * 100
    where = "GPU memory" if _is_gpu_key(metric) else "Host memory (RSS)"
    return Diagnosis(
        MEMORY_GROWTH,
        "error" if growth >= 1024**3 else "warning",
        onset,
        f"{where} ({metric}) grows ~{format_bytes(slope)} per step "
        f"({format_bytes(per100)} per 100 steps; +{format_bytes(ys[-1] - ys[0])} from step "
        f"{pts[0][0]} to {pts[-1][0]}).",
        "Something keeps each step's tensors alive: a loss or output kept with its graph "
        "(losses.append(loss) instead of loss.item(), or a metric computed outside "
        "torch.no_grad()), a growing cache or list, or retain_graph=True.",
        Evidence(
            metric,
            (pts[0][0], pts[-1][0]),
            _values(pts, pts[0][0], pts[-1][0]),
            {"bytes_per_step": slope},
        ),
    )


# ---------------------------------------------------------------- throughput drop


def throughput_drop(
    points: Iterable[Point],
    metric: str = "sys/step_time_s",
    *,
    wait: Iterable[Point] = (),
    cpu: Iterable[Point] = (),
    limits: HealthLimits | None = None,
) -> Diagnosis | None:
    """A lasting slowdown of step time: a change point that persists.

    ``wait`` is ``sys/step_wait_s``, the seconds per step the loop waited for a CPU that
    other processes held (sampled about once a second; each sample covers the steps since
    the one before), and ``cpu`` is ``sys/step_cpu_s``, the CPU seconds per step the loop
    ran, sampled with it. Where they are known, the time lost to waiting is taken out of each
    step's time first: a loop slowed by other processes on a shared CPU is not a throughput
    problem of the run, while a stall in the loop itself (a slow input pipeline, a sleep,
    I/O) does not wait in the run queue and still counts. With both, the share of the loop's
    demand for a CPU that went to waiting (``wait / (wait + cpu)``) is the share of its wall
    time taken out: a loop on a shared CPU also blocks on its own other threads (the GIL, an
    intra-op worker) that wait as long; with the wait alone, only the wait itself is.

    The baseline is the median step time of the first fifth of the run (at least 10
    points); a point is slow when the median of it and its 4 neighbours is over
    ``slow_factor`` x baseline, so one long step (an evaluation, a checkpoint save) never
    is. A slow stretch must last ``slow_points`` points or more and cost ``slow_min_lost_s``
    seconds over the baseline and ``slow_min_share`` of the run's step time (a few slow
    windows of scheduling noise do not); the first such stretch is reported, whether it
    recovered or not, and it recovered only when ``slow_points`` fast points in a row follow.
    """
    limits = limits or HealthLimits()
    pts = [(s, v) for s, v in _finite(_sorted(points)) if v >= 0]
    if len(pts) < 10 + limits.slow_points:
        return None
    waits = [(s, v) for s, v in _finite(_sorted(wait)) if v >= 0]
    if waits:
        pts = _without_wait(pts, waits, dict(_finite(_sorted(cpu))))
    vals = [v for _, v in pts]
    head = max(10, len(vals) // 5)
    base = statistics.median(vals[:head])
    if base <= 0:
        return None
    smooth = [statistics.median(vals[max(0, k - 2) : k + 3]) for k in range(len(vals))]
    slow = [s > limits.slow_factor * base for s in smooth]
    total = math.fsum(vals)
    k = 0
    while k < len(slow):
        if not slow[k]:
            k += 1
            continue
        j = k
        while j < len(slow) and slow[j]:
            j += 1
        lost = math.fsum(max(0.0, v - base) for v in vals[k:j])
        if (
            j - k >= limits.slow_points
            and lost >= limits.slow_min_lost_s
            and lost >= limits.slow_min_share * total
        ):
            end = _slow_until(slow, j, limits.slow_points)
            return _throughput_diagnosis(metric, pts, base, k, end, bool(waits))
        k = j
    return None


def _slow_until(slow: list[bool], j: int, gap: int) -> int:
    """Where a slow stretch ending at ``j`` really ends: later slow stretches separated by
    fewer than ``gap`` fast points are the same slowdown (a stall that never recovered is
    not "until" a brief fast blip)."""
    end = m = j
    while m < len(slow):
        n = m
        while n < len(slow) and not slow[n]:
            n += 1
        if n >= len(slow) or n - m >= gap:
            break
        while n < len(slow) and slow[n]:
            n += 1
        end = m = n
    return end


def _without_wait(
    pts: list[tuple[int, float]], waits: list[tuple[int, float]], cpu: dict[int, float]
) -> list[tuple[int, float]]:
    """Step times with the time lost to run-queue waits taken out, interval by interval.

    A wait sample at step ``S`` is the mean wait per step over the steps since the sample
    before (``(S', S]``); the steps' times in that interval add up to its wall time. The
    share of that wall time lost to waiting is taken out of each of its steps in proportion,
    so a slow step stays slow relative to its neighbours (subtracting the mean from every
    step would zero the fast ones). The share is the waited share of the loop's demand
    (``wait / (wait + cpu)``) where the CPU sample at ``S`` is known, else the wait's share
    of the wall time. Steps past the last sample take the last share."""
    bounds = [s for s, _ in waits]
    shares: list[float] = []
    lo = -math.inf
    for hi, per_step in waits:
        ran = cpu.get(hi)
        if ran is not None and ran >= 0 and per_step + ran > 0:
            shares.append(min(1.0, per_step / (per_step + ran)))
            lo = hi
            continue
        covered = [v for s, v in pts if lo < s <= hi]
        wall = math.fsum(covered)
        steps = len(covered)  # logged steps (the wait is per step of the loop)
        shares.append(min(1.0, per_step * steps / wall) if wall > 0 else 0.0)
        lo = hi
    out = []
    for step, value in pts:
        i = min(bisect.bisect_left(bounds, step), len(bounds) - 1)
        out.append((step, value * (1.0 - shares[i])))
    return out


def _throughput_diagnosis(
    metric: str, pts: list[tuple[int, float]], base: float, k: int, j: int, less_wait: bool
) -> Diagnosis:
    slow = statistics.median(v for _, v in pts[k:j])
    recovered = j < len(pts)
    until = f"until step {pts[j][0]}" if recovered else "to the last step"
    own = " (not counting time spent waiting for a CPU held by other processes)"
    return Diagnosis(
        THROUGHPUT_DROP,
        "warning",
        pts[k][0],
        f"Steps slowed from {_fmt(base)} s to {_fmt(slow)} s each ({base / slow:.0%} of the "
        f"throughput) from step {pts[k][0]} {until} ({j - k} points)"
        f"{own if less_wait else ''}.",
        "Check data loading (DataLoader num_workers, pin_memory, a slow disk or network "
        "mount), other processes on the machine or GPU, thermal throttling, and work that "
        "grows with the step (logging, evaluation or saving every step).",
        Evidence(
            metric,
            (pts[k][0], pts[j - 1][0]),
            _values(pts, pts[max(0, k - 3)][0], pts[j - 1][0]),
            {"baseline_s": base, "slow_s": slow},
        ),
    )


# ------------------------------------------------------------------- gradients


def grad_explosion(
    points: Iterable[Point],
    metric: str = "grad/global_norm",
    *,
    limits: HealthLimits | None = None,
    final: bool = True,
) -> Diagnosis | None:
    """The gradient norm jumped ``explode_factor`` x above its trailing median and stayed
    there for ``persist`` points (or, once the run has ended -- ``final`` -- to its last
    point); one-point spikes are ignored. While the run trains, a jump in its last points
    waits for ``persist`` of them: they may still come back (a live pass that said
    "exploded" at the jump's first point was wrong whenever the next one recovered).

    On the series' own scale too: the stretch must also rise above the norm's early level
    (the median of its first ``history`` points). A converged model's norm near zero jumps
    10x on every few batches (0.002 to 0.02 after starting at 0.5): that is its noise, not an
    explosion; a real one passes where training began, and its onset is still the first
    point of the stretch."""
    limits = limits or HealthLimits()
    pts = _finite(_sorted(points))
    w = limits.history
    early = statistics.median(v for _, v in pts[:w]) if len(pts) >= w else 0.0
    meds, sigmas = _trailing_median_sigma(pts, w)
    for k in range(w, len(pts)):
        med, sigma = meds[k - w], sigmas[k - w]
        bar = max(limits.explode_factor * med, med + limits.spike_sigmas * sigma)
        if pts[k][1] <= bar or med <= 0:
            continue
        run = pts[k : k + limits.persist]
        end = k
        while end < len(pts) and pts[end][1] > bar:
            end += 1
        high = pts[k:end]  # the stretch above the bar
        if (
            all(v > bar for _, v in run)
            and (len(run) == limits.persist or (final and k + len(run) == len(pts)))
            and max(v for _, v in high) > early
        ):
            step, value = pts[k]
            return Diagnosis(
                GRAD_EXPLOSION,
                "error",
                step,
                f"{metric} exploded at step {step}: {_fmt(value)}, {value / med:.3g}x its "
                f"median {_fmt(med)} over the {w} points before, and stayed high.",
                "Clip gradients (torch.nn.utils.clip_grad_norm_(params, 1.0)), lower the "
                "learning rate or lengthen the warmup; check for a normalization layer "
                "missing or a loss that is not averaged over the batch.",
                Evidence(
                    metric,
                    (pts[k - w][0], run[-1][0]),
                    _values(pts, pts[k - 3][0], run[-1][0]),
                    {"median_before": med},
                ),
            )
    return None


def grad_vanishing(
    points: Iterable[Point], metric: str = "grad/global_norm", *, limits: HealthLimits | None = None
) -> Diagnosis | None:
    """The gradient norm fell below ``vanish_ratio`` x its early median (or below
    ``vanish_floor``) and stayed there to the last point, for ``persist`` points or more."""
    limits = limits or HealthLimits()
    pts = _finite(_sorted(points))
    if len(pts) < limits.persist + 3:
        return None
    early = statistics.median(v for _, v in pts[: max(3, min(limits.history, len(pts) // 5))])
    bar = max(limits.vanish_ratio * early, limits.vanish_floor)
    k = len(pts)
    while k > 0 and pts[k - 1][1] < bar:
        k -= 1
    if len(pts) - k < limits.persist:
        return None
    step = pts[k][0]
    return Diagnosis(
        GRAD_VANISHING,
        "warning",
        step,
        f"{metric} vanished from step {step}: below {_fmt(bar)} for {len(pts) - k} points "
        f"(early median {_fmt(early)}, last {_fmt(pts[-1][1])}).",
        "Gradients no longer reach the weights: look for saturated activations (sigmoid/tanh "
        "on large inputs), dead ReLUs after a too-large step, a detach() or no_grad() in the "
        "forward pass, or a learning rate schedule that reached zero; try normalization "
        "layers, residual connections or a better initialization.",
        Evidence(
            metric,
            (step, pts[-1][0]),
            _values(pts, pts[max(0, k - 3)][0], pts[-1][0]),
            {"early_median": early},
        ),
    )


# ------------------------------------------------------------------------ AMP


def _increments(pts: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Per-point counts of a counter that may be cumulative (non-decreasing) or per-point."""
    vals = [v for _, v in pts]
    cumulative = all(b >= a for a, b in itertools.pairwise(vals))
    if not cumulative:
        return list(pts)
    return [(s, v - p) for (s, v), p in zip(pts[1:], vals, strict=False)]


def amp_scale_collapse(
    scale: Iterable[Point],
    skipped: Iterable[Point] = (),
    *,
    limits: HealthLimits | None = None,
) -> Diagnosis | None:
    """GradScaler's loss scale fell to ``scale_floor`` or below and stayed, or every step
    was skipped for ``skipped_points`` logged points in a row (up to the last one).

    The onset is the first step of the final run of decreases that led below the floor:
    ordinary calibration (a few halvings at the start, then growth) never reaches it. Skips
    from the scaler's first logged point on, with the scale still above the floor, are that
    calibration (a live pass sees it before the first step that is not skipped); only the
    floor tells a calibration that never ends, so without a scale series they count.
    """
    limits = limits or HealthLimits()
    pts = _finite(_sorted(scale))
    counts = _finite(_sorted(skipped))
    if pts and pts[-1][1] <= limits.scale_floor:
        k = len(pts) - 1
        # back to the first point of the final decline (halvings, or a floor plateau)
        while k > 0 and (pts[k - 1][1] > pts[k][1] or pts[k - 1][1] <= limits.scale_floor):
            k -= 1
        onset = pts[min(k + 1, len(pts) - 1)][0]  # the first lowered scale
        if k == 0 and counts and counts[0][0] == pts[0][0] and counts[0][1] > 0:
            onset = pts[0][0]  # skipped from the first update on: already lowered there
        return Diagnosis(
            AMP_SCALE_COLLAPSE,
            "error",
            onset,
            f"The AMP loss scale collapsed from {_fmt(pts[k][1])} at step {pts[k][0]} to "
            f"{_fmt(pts[-1][1])} at step {pts[-1][0]}: every step overflows, so the "
            "optimizer skips them all.",
            _AMP_HINT,
            Evidence("amp/loss_scale", (onset, pts[-1][0]), _values(pts, onset, pts[-1][0])),
        )
    inc = _increments(counts)
    k = len(inc)
    while k > 0 and inc[k - 1][1] > 0:
        k -= 1
    calibrating = bool(pts and counts) and k == 0 and counts[0][1] > 0
    if len(inc) - k >= limits.skipped_points and not calibrating:
        onset = inc[k][0]
        return Diagnosis(
            AMP_SCALE_COLLAPSE,
            "error",
            onset,
            f"Every logged interval since step {onset} skipped optimizer steps "
            f"({len(inc) - k} in a row): the gradients overflow at every step.",
            _AMP_HINT,
            Evidence("amp/skipped_steps", (onset, inc[-1][0]), tuple(v for _, v in inc[k:][-12:])),
        )
    return None


_AMP_HINT = (
    "The fp16 gradients are Inf/NaN at every step, so the scale only shrinks: look for a "
    "non-finite loss or input, an op that overflows in fp16 (use bf16, or keep it in fp32 "
    "with autocast(enabled=False)), or a learning rate so high that the weights overflowed."
)


# -------------------------------------------------------------------- recompiles


def recompiles(
    points: Iterable[Point],
    metric: str = "compile/recompiles",
    *,
    limits: HealthLimits | None = None,
    frames: Sequence[RecompileFact] = (),
) -> Diagnosis | None:
    """torch.compile reached its recompile limit: ``recompile_limit`` (torch's
    ``recompile_limit``, 8) compiles of a frame are 1 compile and ``recompile_limit - 1``
    recompiles, after which Dynamo stops compiling the frame and runs it eagerly ("hit
    config.recompile_limit (8)").

    ``frames`` are torch's own account (``tracker.watch``'s ``recompile_limit`` events): the
    first frame to reach the limit then in force gives the onset (the step of its last
    compile) and the hint names it and the guard that failed. Without them,
    ``compile/recompiles`` -- a cumulative count over every frame (per-interval counts are
    summed) -- decides: the onset is the step it reached ``recompile_limit - 1``."""
    limits = limits or HealthLimits()
    reached = sorted((f for f in frames if f.compiles >= f.limit), key=lambda f: f.step)
    pts = _finite(_sorted(points))
    if reached:
        return _frame_at_limit(reached, pts, metric)
    vals = [v for _, v in pts]
    cumulative = all(b >= a for a, b in itertools.pairwise(vals))
    total = 0.0
    for step, value in pts:
        total = value if cumulative else total + value
        if total >= max(1, limits.recompile_limit - 1):
            return Diagnosis(
                RECOMPILES,
                "warning",
                step,
                f"torch.compile recompiled {int(total)} times by step {step}: a frame "
                f"compiled {int(total) + 1} times reaches torch's recompile limit "
                f"({limits.recompile_limit}), after which it runs without compiling; each "
                "recompile also stalls training for seconds.",
                "Recompiles come from changing shapes, dtypes or Python values the graph "
                "depends on: pad to fixed shapes (drop_last=True), mark dynamic dimensions "
                "(torch._dynamo.mark_dynamic or dynamic=True), keep scalars as tensors; "
                "TORCH_LOGS=recompiles shows the reason of each.",
                Evidence(
                    metric,
                    (pts[0][0], step),
                    _values(pts, pts[0][0], step),
                    {"limit": float(limits.recompile_limit)},
                ),
            )
    return None


def _frame_at_limit(
    reached: Sequence[RecompileFact], pts: Sequence[tuple[int, float]], metric: str
) -> Diagnosis:
    first = reached[0]
    others = len({f.frame for f in reached} - {first.frame})
    more = f" ({others} other frame(s) too)" if others else ""
    if first.reason:
        hint = (
            f"The last recompile of {first.frame} was triggered by the guard failure "
            f'"{first.reason}": {advice(first.reason)}. TORCH_LOGS=recompiles prints the '
            "reason of every recompile."
        )
    else:
        hint = (
            f"TORCH_LOGS=recompiles prints why {first.frame} recompiles: changing shapes, "
            "dtypes or Python values the graph depends on; pad to fixed shapes, mark dynamic "
            "dimensions (torch._dynamo.mark_dynamic or dynamic=True), keep scalars as tensors."
        )
    start = pts[0][0] if pts else first.step
    return Diagnosis(
        RECOMPILES,
        "warning",
        first.step,
        f"torch.compile compiled {first.frame} {first.compiles} times by step {first.step}, "
        f"torch's recompile limit ({first.limit}){more}: from the next recompile on it runs "
        "without compiling; each recompile also stalls training.",
        hint,
        Evidence(
            metric,
            (min(start, first.step), first.step),
            _values(pts, min(start, first.step), first.step),
            {"limit": float(first.limit), "compiles": float(first.compiles)},
        ),
    )


# -------------------------------------------------------------------- checkpoints


@dataclass(frozen=True)
class CheckpointFact:
    """What the doctor knows of one checkpoint: its state and, when verified, the outcome."""

    step: int
    path: str
    state: str  # "ok", "corrupt", "missing", "pending", ...
    created_at: float = 0.0


def checkpoint_problems(facts: Sequence[CheckpointFact]) -> Diagnosis | None:
    """Corrupt or missing checkpoints (a torn file, a hash mismatch, a deleted file)."""
    bad = [f for f in sorted(facts, key=lambda f: f.step) if f.state in ("corrupt", "missing")]
    if not bad:
        return None
    first = bad[0]
    listed = ", ".join(f"step {f.step} ({f.state})" for f in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    return Diagnosis(
        CHECKPOINT_CORRUPT,
        "error",
        first.step,
        f"{len(bad)} checkpoint(s) failed verification: {listed}{more}; a resume skips them.",
        "A torn or changed file no longer matches the sha256 recorded at save: check free "
        "disk space and quotas, that nothing else writes into the checkpoint directory, and "
        "save with tracker.save_checkpoint (temporary file, fsync, rename).",
        Evidence("checkpoints", (first.step, bad[-1].step), tuple(float(f.step) for f in bad[:12])),
    )


# ------------------------------------------------------------------------ routing


def diagnose(
    series: Mapping[str, Sequence[Point]],
    *,
    final: bool,
    checkpoints: Sequence[CheckpointFact] = (),
    recompiled: Sequence[RecompileFact] = (),
    limits: HealthLimits | None = None,
    partial: Collection[str] = (),
    before: Mapping[str, Sequence[Point]] | None = None,
    recent: Mapping[str, int] | None = None,
) -> list[Diagnosis]:
    """Every diagnosis of one run, from its series keyed by metric name, by onset step.

    ``recent``: for a loss read further back than the pass's window, so that every point
    since an earlier pass is judged for spikes (``tracker.store.diagnoses``), how many of
    its newest points the divergence rule reads (the window it reads in every pass).

    ``before``: for a partial series that starts inside a stretch of non-finite values,
    the points where that stretch began (the last finite one before it and the first of
    the stretch): the non-finite rule reads them before the series, so it names the step
    the stretch began at and the last finite value, not the first point a pass read.

    ``partial``: keys whose series is only the newest part of the run's (a pass reads the
    newest points of a long run). A loss spike is judged against the series' own noise
    seen before it; in a partial series the points at its start have little of that
    memory left (a jump that the earlier, unread history shows to be ordinary would look
    new), so spikes are reported only in its newer half, where half the window is known.
    A live pass every few seconds judges each point while it is in that half.

    Which detector reads which metric: every metric for non-finite values; loss-like keys
    (``is_loss_key``) for spikes and divergence; ``sys/rss_bytes`` and
    ``sys/gpu<i>/allocated_bytes`` -- and any key ``is_memory_key`` accepts, such as a
    script's own ``mem/rss_bytes`` -- for memory growth; ``sys/step_time_s`` (less
    ``sys/step_wait_s`` and ``sys/step_cpu_s``) for throughput;
    ``grad/global_norm`` (and ``grad/norm/<param>`` for vanishing) for gradients;
    ``amp/loss_scale`` + ``amp/skipped_steps``; ``compile/recompiles`` with ``recompiled``
    (the frames ``tracker.watch`` saw reach torch's recompile limit, which also diagnose a
    run that has no such series).
    """
    limits = limits or HealthLimits()
    amp = "amp/loss_scale" in series or "amp/skipped_steps" in series
    skips = scaler_skips(series.get("amp/loss_scale", ()), series.get("amp/skipped_steps", ()))
    found: list[Diagnosis | None] = []
    for key, given in series.items():
        points = _sorted(given)  # once for every detector below
        earlier = before.get(key) if before else None
        judged = [*earlier, *points] if earlier else points
        found.append(nonfinite(judged, key, final=final, amp=amp, skips=skips, limits=limits))
        if is_loss_key(key):
            window = recent.get(key) if recent else None
            div = divergence(points[-window:] if window else points, key, limits=limits)
            found.append(div)
            if div is None:
                start = len(points) // 2 if key in partial else 0
                found.append(loss_spike(points, key, limits=limits, judge_from=start, final=final))
        elif is_memory_key(key):
            found.append(memory_growth(points, key, limits=limits))
        elif key == "sys/step_time_s":
            wait = series.get("sys/step_wait_s", ())
            cpu = series.get("sys/step_cpu_s", ())
            found.append(throughput_drop(points, key, wait=wait, cpu=cpu, limits=limits))
        elif key == "grad/global_norm":
            found.append(grad_explosion(points, key, limits=limits, final=final))
            found.append(grad_vanishing(points, key, limits=limits))
        elif key == "compile/recompiles" and FRAME_RECOMPILES not in series:
            found.append(recompiles(points, key, limits=limits, frames=recompiled))
        elif key == FRAME_RECOMPILES:
            # per frame (watch() counts each frame's compiles): several frames recompiling
            # a few times each are not one frame at the limit
            found.append(recompiles(points, key, limits=limits, frames=recompiled))
    if amp:
        found.append(
            amp_scale_collapse(
                series.get("amp/loss_scale", ()), series.get("amp/skipped_steps", ()), limits=limits
            )
        )
    if recompiled and "compile/recompiles" not in series and FRAME_RECOMPILES not in series:
        found.append(recompiles((), limits=limits, frames=recompiled))
    found.append(checkpoint_problems(checkpoints))
    return sorted((d for d in found if d is not None), key=lambda d: (d.step or 0, d.code))
