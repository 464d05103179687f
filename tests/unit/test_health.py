from __future__ import annotations

import math
import random

import pytest

from tracker.errors import InvalidInput
from tracker.rules.health import Diagnosis, HealthError, memory_growth, nonfinite, throughput_drop

MIB = 1024**2
GIB = 1024**3


# ---------------------------------------------------------------------------- nonfinite


@pytest.mark.parametrize(
    ("points", "step", "fragment"),
    [
        ([(0, 2.3), (1, 2.1), (2, math.nan), (3, math.inf)], 2, "loss became NaN at step 2"),
        ([(0, 2.3), (10, math.inf)], 10, "became +Inf at step 10"),
        ([(5, -math.inf)], 5, "became -Inf at step 5"),
        ([(7, None)], 7, "became NaN at step 7"),
    ],
)
def test_nonfinite_finds_first_bad_step(
    points: list[tuple[int, float | None]], step: int, fragment: str
) -> None:
    diagnosis = nonfinite(points, metric="loss" if step == 2 else "metric")
    assert diagnosis is not None
    assert diagnosis.code == "nonfinite" and diagnosis.step == step
    assert fragment in diagnosis.message


def test_nonfinite_mentions_last_finite_value() -> None:
    diagnosis = nonfinite([(99, 0.25), (100, math.nan)], metric="train/loss")
    assert diagnosis is not None
    assert "train/loss became NaN at step 100 (last finite value 0.25 at step 99)" in (
        diagnosis.message
    )
    assert "learning rate" in diagnosis.message


@pytest.mark.parametrize("points", [[], [(0, 1.0), (1, -1e308), (2, 0.0)]])
def test_nonfinite_healthy(points: list[tuple[int, float]]) -> None:
    assert nonfinite(points) is None


def test_nonfinite_accepts_a_generator() -> None:
    diagnosis = nonfinite((s, 1.0 if s < 50 else math.nan) for s in range(100))
    assert diagnosis == Diagnosis(
        "nonfinite",
        "metric became NaN at step 50 (last finite value 1 at step 49): lower the learning "
        "rate, clip gradients, check inputs for NaN, or use bf16 / a GradScaler with fp16.",
        50,
    )


# ------------------------------------------------------------------------ memory_growth


def _leak(n: int, per_step: float, base: float = 4 * GIB, noise: float = 0.0, seed: int = 0):
    rng = random.Random(seed)
    steps = list(range(0, n * 10, 10))
    values = [base + per_step * s + rng.uniform(-noise, noise) for s in steps]
    return steps, values


def test_memory_growth_detects_steady_leak_with_readable_rate() -> None:
    steps, values = _leak(500, per_step=0.12 * MIB, noise=2 * MIB)  # ~12 MiB per 100 steps
    diagnosis = memory_growth(steps, values)
    assert diagnosis is not None
    assert diagnosis.code == "memory_growth"
    assert diagnosis.step == steps[-1]
    assert "GPU memory grows ~12 MiB per 100 steps" in diagnosis.message
    assert "losses.append(loss) instead of loss.item()" in diagnosis.message


@pytest.mark.parametrize(
    ("per_step", "expected"),
    [(3 * MIB, "~300 MiB per 100 steps"), (0.25 * MIB, "~25 MiB per 100 steps"),
     (0.002 * MIB, "~2 MiB per 1000 steps"), (0.04 * MIB, "~4 MiB per 100 steps"),
     (30 * MIB, "~2.93 GiB per 100 steps")],
)  # fmt: skip
def test_memory_growth_rate_units(per_step: float, expected: str) -> None:
    steps, values = _leak(2000, per_step=per_step)
    diagnosis = memory_growth(steps, values)
    assert diagnosis is not None and expected in diagnosis.message


def test_memory_growth_ignores_flat_memory_after_warmup() -> None:
    steps = list(range(1000))
    # allocator warmup: memory jumps over the first 50 steps, then stays flat with noise
    rng = random.Random(1)
    values = [(2 * GIB if s < 50 else 6 * GIB) + rng.uniform(-8, 8) * MIB for s in steps]
    assert memory_growth(steps, values) is None


def test_memory_growth_ignores_noise_and_sawtooth() -> None:
    rng = random.Random(2)
    steps = list(range(1000))
    noisy = [5 * GIB + rng.uniform(-500, 500) * MIB for _ in steps]
    assert memory_growth(steps, noisy) is None
    sawtooth = [5 * GIB + (s % 100) * 5 * MIB for s in steps]  # freed every 100 steps
    assert memory_growth(steps, sawtooth) is None


def test_memory_growth_ignores_small_total_growth_and_decrease() -> None:
    steps, values = _leak(100, per_step=1024)  # 1 KiB per step: < 32 MiB over the run
    assert memory_growth(steps, values) is None
    steps, values = _leak(100, per_step=-1 * MIB)
    assert memory_growth(steps, values) is None


def test_memory_growth_needs_enough_points() -> None:
    steps, values = _leak(10, per_step=10 * MIB)
    assert memory_growth(steps, values) is None
    assert memory_growth(steps, values, min_points=5) is not None
    assert memory_growth([], []) is None


def test_memory_growth_skips_nonfinite_samples() -> None:
    steps, values = _leak(200, per_step=MIB)
    values[10] = math.nan
    values[20] = math.inf
    assert memory_growth(steps, values) is not None


def test_memory_growth_identical_steps_give_no_slope() -> None:
    assert memory_growth([5] * 50, [float(i) * GIB for i in range(50)]) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"warmup_fraction": 1.0}, {"warmup_fraction": -0.1}, {"min_r2": 1.5}, {"min_points": 1}],
)
def test_memory_growth_rejects_bad_thresholds(kwargs: dict) -> None:
    with pytest.raises(HealthError, match="memory_growth"):
        memory_growth([0, 1], [0, 1], **kwargs)


def test_lengths_must_match() -> None:
    with pytest.raises(HealthError) as info:
        memory_growth([0, 1, 2], [1.0, 2.0])
    assert "bytes: 2 values for 3 steps" in str(info.value)
    assert isinstance(info.value, InvalidInput) and info.value.code == "invalid_health_input"
    with pytest.raises(HealthError, match="steps: 1 values for 2 times"):
        throughput_drop([0.0, 1.0], [0])


# ---------------------------------------------------------------------- throughput_drop


def _timeline(rates: list[float], steps_per_log: int = 10) -> tuple[list[float], list[int]]:
    times, steps = [1_700_000_000.0], [0]
    for rate in rates:
        times.append(times[-1] + steps_per_log / rate)
        steps.append(steps[-1] + steps_per_log)
    return times, steps


def test_throughput_drop_detected_with_numbers_in_message() -> None:
    times, steps = _timeline([10.0] * 40 + [3.0] * 10)
    diagnosis = throughput_drop(times, steps)
    assert diagnosis is not None
    assert diagnosis.code == "throughput_drop" and diagnosis.step == steps[-1] == 500
    assert "throughput fell to 3 steps/s over steps 400–500, 30% of the earlier median 10" in (
        diagnosis.message
    )
    assert "num_workers" in diagnosis.message


def test_throughput_steady_or_mild_slowdown_is_fine() -> None:
    rng = random.Random(4)
    times, steps = _timeline([10.0 + rng.uniform(-2, 2) for _ in range(60)])
    assert throughput_drop(times, steps) is None
    times, steps = _timeline([10.0] * 40 + [6.0] * 10)  # 60% of median, above the 50% bar
    assert throughput_drop(times, steps) is None
    assert throughput_drop(times, steps, threshold=0.7) is not None


def test_throughput_single_slow_interval_in_history_does_not_move_median() -> None:
    times, steps = _timeline([10.0] * 20 + [0.1] + [10.0] * 19 + [4.0] * 10)
    diagnosis = throughput_drop(times, steps)
    assert diagnosis is not None and "of the earlier median 10 steps/s" in diagnosis.message


def test_throughput_needs_history() -> None:
    times, steps = _timeline([10.0] * 19 + [1.0] * 10)  # 19 intervals of history, 20 needed
    assert throughput_drop(times, steps) is None
    assert throughput_drop(times, steps, window=5) is not None


def test_throughput_stalled_steps_count_as_zero_rate() -> None:
    times, steps = _timeline([10.0] * 30)
    for _ in range(10):
        times.append(times[-1] + 5.0)
        steps.append(steps[-1])  # logging continues, steps do not advance
    diagnosis = throughput_drop(times, steps)
    assert diagnosis is not None and "fell to 0 steps/s" in diagnosis.message


def test_throughput_step_reset_or_clock_skew_is_ignored() -> None:
    times, steps = _timeline([10.0] * 40)
    steps_reset = steps[:-10] + [s - 10_000 for s in steps[-10:]]
    assert throughput_drop(times, steps_reset) is None
    frozen_clock = times[:-11] + [times[-11]] * 11
    assert throughput_drop(frozen_clock, steps) is None


@pytest.mark.parametrize("kwargs", [{"window": 0}, {"threshold": 0.0}, {"threshold": 1.0}])
def test_throughput_rejects_bad_settings(kwargs: dict) -> None:
    with pytest.raises(HealthError, match="throughput_drop"):
        throughput_drop([0.0], [0], **kwargs)
