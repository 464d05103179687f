"""Health detectors over metric streams: pure functions, no I/O, no clock.

Each detector looks at one stream and returns a ``Diagnosis`` (a stable ``code``, a message
that says what to try, and the step it points at) or ``None`` when the stream looks healthy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracker.errors import InvalidInput
from tracker.rules.units import MIB, format_bytes

__all__ = [
    "Diagnosis",
    "HealthError",
    "memory_growth",
    "nonfinite",
    "throughput_drop",
]


class HealthError(InvalidInput):
    """Detector inputs that break a rule (lengths differ, thresholds out of range)."""

    code = "invalid_health_input"


@dataclass(frozen=True)
class Diagnosis:
    code: str
    message: str
    step: int | None


def _same_length(a_name: str, a: Sequence[object], b_name: str, b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise HealthError(
            f"{b_name}: {len(b)} values for {len(a)} {a_name}; each needs exactly one",
            field=b_name,
        )


def _describe(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def nonfinite(
    points: Iterable[tuple[int, float | None]], metric: str = "metric"
) -> Diagnosis | None:
    """The first point (in the given order) whose value is NaN or ±Inf; ``None`` means NaN.

    The message names the metric, the step and the last finite value before it.
    """
    last_finite: tuple[int, float] | None = None
    for step, raw in points:
        value = math.nan if raw is None else float(raw)
        if math.isfinite(value):
            last_finite = (step, value)
            continue
        before = (
            f" (last finite value {last_finite[1]:.6g} at step {last_finite[0]})"
            if last_finite
            else ""
        )
        return Diagnosis(
            code="nonfinite",
            message=(
                f"{metric} became {_describe(value)} at step {step}{before}: lower the learning "
                "rate, clip gradients, check inputs for NaN, or use bf16 / a GradScaler with fp16."
            ),
            step=step,
        )
    return None


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope of ys over xs and R² (the fraction of variance it explains)."""
    mx = statistics.fmean(xs)
    my = statistics.fmean(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    if sxx == 0:
        return 0.0, 0.0
    slope = sxy / sxx
    r2 = 1.0 if syy == 0 else (sxy * sxy) / (sxx * syy)
    return slope, r2


def _per_steps(slope: float) -> tuple[float, int]:
    # "~12 MiB per 100 steps"; slower leaks are given per 1000 or 10000 steps to read >= 1 MiB.
    for n in (100, 1000):
        if slope * n >= MIB:
            return slope * n, n
    return slope * 10_000, 10_000


def memory_growth(
    steps: Sequence[int],
    bytes_: Sequence[float],
    *,
    min_points: int = 20,
    min_r2: float = 0.8,
    min_growth_bytes: float = 32 * MIB,
    warmup_fraction: float = 0.1,
) -> Diagnosis | None:
    """A steady linear rise of allocated GPU memory across steps (a leak), or ``None``.

    Points in the first ``warmup_fraction`` of the step range are ignored: memory normally
    rises there (optimizer state, allocator caches) and then stays flat. The rest must be
    ``min_points`` or more, fit a rising line with R² >= ``min_r2``, and grow by at least
    ``min_growth_bytes`` along it. Non-finite byte counts are skipped.

    Raises ``HealthError`` when the lengths differ or a threshold is out of range.
    """
    _same_length("steps", steps, "bytes", bytes_)
    if not 0 <= warmup_fraction < 1 or not 0 <= min_r2 <= 1 or min_points < 2:
        raise HealthError(
            "memory_growth: needs 0 <= warmup_fraction < 1, 0 <= min_r2 <= 1, min_points >= 2",
            field="memory_growth",
        )
    pairs = [(s, float(b)) for s, b in zip(steps, bytes_, strict=True) if math.isfinite(b)]
    if len(pairs) < min_points:
        return None
    lo, hi = min(s for s, _ in pairs), max(s for s, _ in pairs)
    cut = lo + warmup_fraction * (hi - lo)
    kept = [(s, b) for s, b in pairs if s >= cut]
    if len(kept) < min_points:
        return None
    xs = [float(s) for s, _ in kept]
    slope, r2 = _fit(xs, [b for _, b in kept])
    first, last = min(xs), max(xs)
    growth = slope * (last - first)
    if slope <= 0 or r2 < min_r2 or growth < min_growth_bytes:
        return None
    amount, per = _per_steps(slope)
    return Diagnosis(
        code="memory_growth",
        message=(
            f"GPU memory grows ~{format_bytes(amount)} per {per} steps "
            f"(+{format_bytes(growth)} from step {int(first)} to {int(last)}, R² {r2:.2f}): "
            "are you keeping tensors that require grad (e.g. losses.append(loss) instead of "
            "loss.item())?"
        ),
        step=int(last),
    )


def throughput_drop(
    times: Sequence[float],
    steps: Sequence[int],
    *,
    window: int = 10,
    threshold: float = 0.5,
) -> Diagnosis | None:
    """Steps/s over the last ``window`` intervals fell below ``threshold`` x the earlier median.

    ``times`` are wall-clock seconds of each logged step, in logging order. The baseline is
    the median of per-interval rates before the last window; at least ``2 * window`` such
    intervals are needed. Intervals with no time elapsed or no step progress are skipped.

    Raises ``HealthError`` when the lengths differ, ``window < 1`` or ``threshold`` is not in
    (0, 1).
    """
    _same_length("times", times, "steps", steps)
    if window < 1 or not 0 < threshold < 1:
        raise HealthError(
            f"throughput_drop: window={window!r}, threshold={threshold!r}; needs window >= 1 "
            "and 0 < threshold < 1",
            field="throughput_drop",
        )
    if len(times) < 3 * window + 1:
        return None
    split = len(times) - 1 - window
    rates = [
        (steps[i] - steps[i - 1]) / (times[i] - times[i - 1])
        for i in range(1, split + 1)
        if times[i] > times[i - 1] and steps[i] > steps[i - 1]
    ]
    elapsed = times[-1] - times[split]
    progress = steps[-1] - steps[split]
    if len(rates) < 2 * window or elapsed <= 0 or progress < 0:
        return None
    baseline = statistics.median(rates)
    recent = progress / elapsed
    if recent >= threshold * baseline:
        return None
    return Diagnosis(
        code="throughput_drop",
        message=(
            f"throughput fell to {recent:.3g} steps/s over steps {steps[split]}–{steps[-1]}, "
            f"{recent / baseline:.0%} of the earlier median {baseline:.3g} steps/s: check data "
            "loading (num_workers, disk), other processes on the GPU, thermal throttling, or "
            "work that grows with the step (e.g. evaluation or logging every step)."
        ),
        step=steps[-1],
    )
