"""The throughput detector tells a stall in the loop from contention on a shared CPU,
table-driven over realistic series: step times (``sys/step_time_s``, every step) and the
run-queue wait the client samples about once a second (``sys/step_wait_s``: seconds per step
the loop was ready but other processes held the CPU, averaged since the previous sample)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rules.health import HealthError, HealthLimits, diagnose, throughput_drop

Points = list[tuple[int, float]]
Series = dict[str, Points]
SAMPLE = 100  # steps per wait sample: 10 ms steps, one sample a second


def _run(
    n: int,
    own: Callable[[int], float],
    wait: Callable[[int], float] = lambda s: 0.0,
    *,
    seed: int = 7,
    sample: int = SAMPLE,
) -> Series:
    """Step times = the loop's own time (+ jitter) + its run-queue wait, and the wait as
    the client samples it (the mean over the steps each sample covers)."""
    rng = random.Random(seed)
    waited = [wait(s) * (1 + 0.3 * rng.random()) for s in range(n)]
    steps = [(s, own(s) * (1 + abs(rng.gauss(0, 0.1))) + waited[s]) for s in range(1, n)]
    samples = [
        (s, math.fsum(waited[s - sample + 1 : s + 1]) / sample) for s in range(sample, n, sample)
    ]
    return {"sys/step_time_s": steps, "sys/step_wait_s": samples}


def _contended_from(start: int, extra: float) -> Callable[[int], float]:
    return lambda s: extra if s >= start else 0.0


def _contention_mid_run() -> Series:
    # two busy processes arrive at step 300 on a 2-core host: 10 ms steps take 25 ms
    return _run(1500, lambda s: 0.010, _contended_from(300, 0.015))


def _heavy_contention_mid_run() -> Series:
    # 6 busy processes: the loop gets a quarter of a core, and the load comes and goes
    return _run(2000, lambda s: 0.010, lambda s: 0.030 if 400 <= s < 1700 else 0.001)


def _contended_from_the_start_then_alone() -> Series:
    return _run(1200, lambda s: 0.010, lambda s: 0.020 if s < 400 else 0.0)


def _stall_under_contention() -> Series:
    # contended all along; at step 600 the input pipeline starts waiting 50 ms per batch
    return _run(1500, lambda s: 0.010 + (0.050 if s >= 600 else 0.0), lambda s: 0.005)


def _contention_then_stall() -> Series:
    own = lambda s: 0.010 + (0.040 if s >= 900 else 0.0)  # noqa: E731
    return _run(1500, own, _contended_from(300, 0.015))


def _stall_that_recovers() -> Series:
    return _run(1500, lambda s: 0.010 + (0.060 if 500 <= s < 800 else 0.0))


def _a_few_slow_windows() -> Series:
    # no wait series (not Linux): other processes take the CPU for a few seconds 3 times
    slow = lambda s: any(a <= s < a + 15 for a in (400, 900, 1500))  # noqa: E731
    series = _run(2000, lambda s: 0.050 * (3 if slow(s) else 1))
    return {"sys/step_time_s": series["sys/step_time_s"]}


def _no_wait_series(make: Callable[[], Series]) -> Callable[[], Series]:
    return lambda: {"sys/step_time_s": make()["sys/step_time_s"]}


# name, series, expected onset (None: healthy), window
CASES: list[tuple[str, Callable[[], Series], int | None, int]] = [
    ("contention from step 300", _contention_mid_run, None, 0),
    ("heavy contention that comes and goes", _heavy_contention_mid_run, None, 0),
    ("contended at first, then alone", _contended_from_the_start_then_alone, None, 0),
    ("a few slow windows, no wait series", _a_few_slow_windows, None, 0),
    ("stall under contention", _stall_under_contention, 600, 3),
    ("contention, then a stall", _contention_then_stall, 900, 3),
    ("stall that recovers", _stall_that_recovers, 500, 3),
    ("stall, no wait series", _no_wait_series(_stall_under_contention), 600, 3),
    # without the wait the detector cannot tell: contention looks like a drop
    ("contention, no wait series", _no_wait_series(_contention_mid_run), 300, 3),
]


@pytest.mark.parametrize(
    ("make", "onset", "window"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_throughput_drop(make: Callable[[], Series], onset: int | None, window: int) -> None:
    series = make()
    found = [d for d in diagnose(series, final=True) if d.code == "throughput_drop"]
    if onset is None:
        assert found == [], found
        return
    assert len(found) == 1, found
    assert abs((found[0].step or 0) - onset) <= window, found[0]
    taken_out = "waiting for a CPU" in found[0].message
    assert taken_out is ("sys/step_wait_s" in series), found[0].message


def test_wait_samples_are_matched_to_the_steps_they_cover() -> None:
    # a sample at step 200 covers steps 101..200: contention from step 101 is all explained
    steps = [(s, 0.010 if s <= 100 else 0.030) for s in range(1, 400)]
    waits = [(100, 0.0), (200, 0.020), (300, 0.020), (399, 0.020)]
    assert throughput_drop(steps, wait=waits) is None
    shifted = [(s + 100, v) for s, v in waits]  # the same wait, a sample too late
    found = throughput_drop(steps, wait=shifted)
    assert found is not None and found.step == 101


def test_unusable_wait_values_are_ignored() -> None:
    steps = _stall_that_recovers()["sys/step_time_s"]
    waits: list[tuple[int, float | None]] = [(100, None), (200, -1.0), (300, math.inf)]
    found = throughput_drop(steps, wait=waits)
    assert found is not None and abs(found.step - 500) <= 3


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_share_out_of_range(share: float) -> None:
    with pytest.raises(HealthError):
        HealthLimits(slow_min_share=share)


_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.none(),
    st.floats(min_value=0.001, max_value=0.2),
)
_SERIES = st.lists(st.tuples(st.integers(-5, 400), _VALUE), max_size=120)


@settings(max_examples=200, deadline=None)
@given(steps=_SERIES, waits=_SERIES)
def test_any_stored_series_is_judged_without_error(steps: list, waits: list) -> None:
    found = throughput_drop(steps, wait=waits)
    if found is not None:
        assert found.code == "throughput_drop" and found.step is not None


@settings(max_examples=100, deadline=None)
@given(steps=_SERIES, every=st.integers(1, 50))
def test_no_wait_at_all_changes_nothing(steps: list, every: int) -> None:
    zeros = [(s, 0.0) for s in range(0, 401, every)]
    with_zero, without = throughput_drop(steps, wait=zeros), throughput_drop(steps)
    assert (with_zero is None) is (without is None)
    if with_zero is not None and without is not None:
        assert with_zero.step == without.step


def _blocked_on_its_own_threads(stall_from: int | None = None) -> Series:
    """Measured on a 2-core host with 6 busy processes (per 1 s sample of the training
    thread's schedstat): alone, 115 steps/s on 0.90 s of CPU; beside them, 21 steps/s on
    0.17 s of CPU and 0.41 s of run-queue wait: the other 0.42 s it was blocked on its own
    background thread (holding the GIL) that waited for a CPU as long. ``stall_from`` adds
    a 100 ms sleep per step from that step on."""
    rng = random.Random(3)
    steps: Points = []
    waits: Points = []
    cpus: Points = []
    for s in range(1, 1200):
        contended = s >= 240
        cpu, wait = (0.0081, 0.0195) if contended else (0.0078, 0.0)
        blocked = 0.020 if contended else 0.0009
        sleep = 0.100 if stall_from is not None and s >= stall_from else 0.0
        steps.append((s, (cpu + wait + blocked) * (1 + abs(rng.gauss(0, 0.1))) + sleep))
        if s % 20 == 0:
            waits.append((s, wait))
            cpus.append((s, cpu))
    return {"sys/step_time_s": steps, "sys/step_wait_s": waits, "sys/step_cpu_s": cpus}


def test_time_blocked_on_its_own_waiting_threads_is_contention_too() -> None:
    series = _blocked_on_its_own_threads()
    steps, waits, cpus = series.values()
    # the wait alone leaves the blocked time: read as a drop
    assert throughput_drop(steps, wait=waits) is not None
    assert throughput_drop(steps, wait=waits, cpu=cpus) is None
    assert [d for d in diagnose(series, final=True) if d.code == "throughput_drop"] == []


def test_a_stall_beside_the_same_contention_is_still_a_drop() -> None:
    series = _blocked_on_its_own_threads(stall_from=700)
    found = [d for d in diagnose(series, final=True) if d.code == "throughput_drop"]
    assert len(found) == 1 and abs((found[0].step or 0) - 700) <= 3, found


def test_a_stall_that_never_recovers_is_reported_to_the_last_step() -> None:
    # 10 ms steps; from step 300 on 60 ms, with two short fast blips (4 steps each)
    def own(s: int) -> float:
        if s < 300 or 500 <= s < 504 or 700 <= s < 704:
            return 0.010
        return 0.060

    series = _run(1000, own)
    [found] = [d for d in diagnose(series, final=True) if d.code == "throughput_drop"]
    assert abs((found.step or 0) - 300) <= 3
    assert "to the last step" in found.message, found.message


def test_a_stall_that_recovers_says_until_when() -> None:
    series = _run(1000, lambda s: 0.060 if 300 <= s < 500 else 0.010)
    [found] = [d for d in diagnose(series, final=True) if d.code == "throughput_drop"]
    assert "until step" in found.message and "to the last step" not in found.message
