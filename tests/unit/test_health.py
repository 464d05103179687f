"""The health detectors, table-driven: generated failing runs (right code, onset within a
small window) and healthy runs of many shapes (zero diagnoses)."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.errors import InvalidInput
from tracker.rules.health import (
    CODES,
    CheckpointFact,
    Diagnosis,
    HealthError,
    HealthLimits,
    amp_scale_collapse,
    diagnose,
    grad_explosion,
    is_loss_key,
    loss_spike,
    memory_growth,
    nonfinite,
    scaler_skips,
    throughput_drop,
)

MIB = 1024**2
GIB = 1024**3
Series = dict[str, list[tuple[int, float | None]]]
NAN, INF = math.nan, math.inf


def _loss(n: int, *, start: float = 2.3, end: float = 0.3, noise: float = 0.05, seed: int = 0,
          shape: Callable[[float], float] | None = None) -> list[tuple[int, float]]:  # fmt: skip
    rng = random.Random(seed)
    shape = shape or (lambda t: math.exp(-4 * t))
    return [
        (s, end + (start - end) * shape(s / n) + rng.gauss(0, noise) * (end + 0.1))
        for s in range(n)
    ]


def _steps(
    n: int, base: float = 0.05, noise: float = 0.1, seed: int = 1
) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(s, base * (1 + abs(rng.gauss(0, noise)))) for s in range(n)]


def _rss(n: int, base: float = 900 * MIB, noise: float = 4 * MIB, seed: int = 2) -> list:
    rng = random.Random(seed)
    return [(s, base + rng.uniform(-noise, noise)) for s in range(n)]


def _grad(n: int, start: float = 5.0, end: float = 0.5, seed: int = 3) -> list:
    rng = random.Random(seed)
    return [(s, (end + (start - end) * math.exp(-5 * s / n)) * math.exp(rng.gauss(0, 0.2)))
            for s in range(n)]  # fmt: skip


def _grad_scaler_run(n: int, overflows: Callable[[int, float], bool], *, every: int = 50,
                     init_scale: float = 65536.0, growth_interval: int = 2000,
                     nan_loss_from: int | None = None) -> Series:  # fmt: skip
    """The series a loop with a GradScaler stores, step by step as torch produces them.

    ``overflows(step, scale)`` says whether the fp16 gradients overflow at that scale: the
    scaler then skips the step and halves its scale, else it steps and doubles the scale
    after ``growth_interval`` steps in a row. The loop logs ``loss`` and ``grad_norm``
    (``clip_grad_norm_`` after ``scaler.unscale_``: Inf on a skipped step); ``watch(scaler=)``
    logs ``amp/loss_scale`` and the cumulative ``amp/skipped_steps`` after each skip and every
    ``every``-th update, and ``grad/global_norm`` on every ``every``-th optimizer step (an
    optimizer hook: a skipped step has none)."""
    loss, grads = _loss(n), _grad(n)
    out: Series = {"loss": [], "grad_norm": [], "amp/loss_scale": [], "amp/skipped_steps": [],
                   "grad/global_norm": []}  # fmt: skip
    scale, skipped, stepped, tracker = init_scale, 0, 0, 0
    for s in range(n):
        skip = overflows(s, scale)
        bad_loss = nan_loss_from is not None and s >= nan_loss_from
        out["loss"].append((s, NAN if bad_loss else loss[s][1]))
        out["grad_norm"].append((s, INF if skip else grads[s][1]))
        if skip:
            scale, skipped, tracker = scale * 0.5, skipped + 1, 0
        else:
            stepped, tracker = stepped + 1, tracker + 1
            if tracker == growth_interval:
                scale, tracker = scale * 2, 0
            if stepped % every == 0:
                out["grad/global_norm"].append((s, grads[s][1]))
        if skip or (s + 1) % every == 0:
            out["amp/loss_scale"].append((s, scale))
            out["amp/skipped_steps"].append((s, float(skipped)))
    return out


def _overflow_above(limit: float, *, from_step: int = 0) -> Callable[[int, float], bool]:
    """Gradients whose largest element needs a scale below ``limit`` (calibration), and from
    ``from_step`` on gradients that overflow at any scale (a broken model)."""
    return lambda s, scale: scale > limit or s >= from_step > 0


# ------------------------------------------------------------------ failing runs


def _nan_from_high_lr() -> Series:
    loss = _loss(300)
    loss = [(s, v if s < 180 else (v * 10 ** (s - 180) if s < 185 else NAN)) for s, v in loss]
    return {"loss": loss, "sys/step_time_s": _steps(300)}


def _nan_after_amp_calibration() -> Series:
    # an AMP run: an inf grad norm at step 0 (calibration, recovered), later a real collapse
    grad = [(s, INF if s in (0, 1) else v) for s, v in _grad(400)]
    loss = [(s, v if s < 250 else NAN) for s, v in _loss(400)]
    scale = [(s, 65536.0 / (4 if s >= 2 else 2**s)) for s in range(400)]
    return {"loss": loss, "grad/global_norm": grad, "amp/loss_scale": scale}


def _memory_leak() -> Series:
    rng = random.Random(5)
    rss = [(s, 800 * MIB + 3 * MIB * s + rng.uniform(-6, 6) * MIB) for s in range(0, 60)]
    return {"loss": _loss(60), "sys/rss_bytes": [(0, 300 * MIB), *rss[1:]]}


def _concave_leak_from_the_start() -> Series:
    # RSS of a graph kept per step, as measured: fresh pages make the first steps climb
    # faster (8, 17, 21, 27 MB...), then ~3.5 MB per step; the leak began at step 0
    rss = [(s, 900 * MIB + 3.5 * MIB * s + 14 * MIB * (1 - 0.7**s)) for s in range(80)]
    return {"sys/rss_bytes": rss}


def _gpu_leak_after_warmup() -> Series:
    gpu = [(s, 2 * GIB + (max(0, s - 100) * 0.5 * MIB)) for s in range(0, 400, 5)]
    return {"sys/gpu0/allocated_bytes": gpu}


def _stall() -> Series:
    steps = [(s, v * (6 if 120 <= s < 200 else 1)) for s, v in _steps(300)]
    return {"loss": _loss(300), "sys/step_time_s": steps}


def _stall_to_the_end() -> Series:
    steps = [(s, v * (4 if s >= 150 else 1)) for s, v in _steps(200)]
    return {"sys/step_time_s": steps}


def _recompiles() -> Series:
    return {"compile/recompiles": [(s, float(min(s // 5, 20))) for s in range(100)]}


def _scale_collapse() -> Series:
    scale = [(s, 65536.0 if s < 120 else max(65536.0 / 2 ** (s - 119), 2.0**-10))
             for s in range(200)]  # fmt: skip
    skipped = [(s, float(max(0, s - 119))) for s in range(200)]
    return {"loss": _loss(200), "amp/loss_scale": scale, "amp/skipped_steps": skipped}


def _all_skipped() -> Series:
    skipped = [(s * 10, float(max(0, s - 30) * 10)) for s in range(50)]
    return {"amp/skipped_steps": skipped}


def _explosion() -> Series:
    grad = [(s, v * (1e3 * 1.5 ** (s - 150) if s >= 150 else 1)) for s, v in _grad(200)]
    return {"grad/global_norm": grad, "loss": _loss(200)}


def _vanishing() -> Series:
    grad = [(s, v if s < 100 else 1e-9 * v) for s, v in _grad(200)]
    return {"grad/global_norm": grad}


def _divergence() -> Series:
    loss = [(s, v if s < 200 else 0.35 + 0.05 * (s - 200)) for s, v in _loss(300)]
    return {"loss": loss}


def _spike() -> Series:
    loss = [(s, v * (8 if s == 150 else 1)) for s, v in _loss(300)]
    return {"train/loss": loss}


def _amp_nan_loss_after_calibration() -> Series:
    return _grad_scaler_run(600, _overflow_above(2.0**11), nan_loss_from=400)


def _amp_collapse_after_calibration() -> Series:
    return _grad_scaler_run(600, _overflow_above(2.0**11, from_step=300))


def _amp_broken_from_the_start() -> Series:
    return _grad_scaler_run(100, lambda s, scale: True)


FAILING: list[tuple[str, Callable[[], Series], str, int, int]] = [
    ("nan from a too-high lr", _nan_from_high_lr, "nonfinite", 185, 0),
    ("nan after AMP calibration", _nan_after_amp_calibration, "nonfinite", 250, 0),
    ("leak kept graph (60 samples)", _memory_leak, "memory_growth", 0, 3),
    ("gpu leak after warmup", _gpu_leak_after_warmup, "memory_growth", 100, 10),
    ("leak climbing fastest at first", _concave_leak_from_the_start, "memory_growth", 0, 1),
    ("data-loading stall that recovers", _stall, "throughput_drop", 120, 3),
    ("stall to the end", _stall_to_the_end, "throughput_drop", 150, 3),
    ("recompiles", _recompiles, "recompiles", 35, 0),  # 7 recompiles: torch's limit of 8
    ("amp scale collapse", _scale_collapse, "amp_scale_collapse", 120, 0),
    ("all steps skipped", _all_skipped, "amp_scale_collapse", 310, 10),
    ("scaler: NaN loss", _amp_nan_loss_after_calibration, "nonfinite", 400, 0),
    ("scaler: collapse", _amp_collapse_after_calibration, "amp_scale_collapse", 300, 0),
    ("scaler: all skipped", _amp_broken_from_the_start, "amp_scale_collapse", 0, 0),
    ("grad explosion", _explosion, "grad_explosion", 150, 0),
    ("grad vanishing", _vanishing, "grad_vanishing", 100, 0),
    ("loss divergence", _divergence, "divergence", 200, 15),
    ("loss spike", _spike, "loss_spike", 150, 0),
]


@pytest.mark.parametrize(
    ("series", "code", "onset", "window"),
    [
        pytest.param(make, code, onset, window, id=name)
        for name, make, code, onset, window in FAILING
    ],
)
def test_failing_run_is_diagnosed_at_its_onset(
    series: Callable[[], Series], code: str, onset: int, window: int
) -> None:
    found = [d for d in diagnose(series(), final=True) if d.code == code]
    assert found, diagnose(series(), final=True)
    diagnosis = found[0]
    assert abs((diagnosis.step or 0) - onset) <= window, diagnosis
    assert diagnosis.severity in ("error", "warning")
    assert diagnosis.hint and diagnosis.message and diagnosis.evidence is not None
    doc = diagnosis.as_dict()
    assert doc["code"] == code and doc["evidence"]["window"][0] <= doc["evidence"]["window"][1]


def test_every_code_has_a_failing_case() -> None:
    covered = {code for *_, code, _, _ in [(n, m, c, o, w) for n, m, c, o, w in FAILING]}
    assert covered | {"checkpoint_corrupt"} == set(CODES)


# ------------------------------------------------------------------- healthy runs


def _cosine(t: float) -> float:
    return 0.5 * (1 + math.cos(math.pi * t))


def _warmup_cosine() -> Series:
    loss = _loss(1000, shape=lambda t: 1.0 if t < 0.05 else _cosine((t - 0.05) / 0.95))
    lr = [(s, 3e-4 * min(1.0, s / 50) * _cosine(s / 1000)) for s in range(1000)]
    return {"train/loss": loss, "lr": lr, "sys/step_time_s": _steps(1000)}


def _step_schedule() -> Series:
    loss = _loss(900, shape=lambda t: 1.0 if t < 0.33 else (0.5 if t < 0.66 else 0.1))
    return {"loss": loss, "lr": [(s, 0.1 * 0.1 ** (s // 300)) for s in range(900)]}


def _eval_pauses() -> Series:
    steps = [(s, v * (25 if s % 50 == 49 else 1)) for s, v in _steps(600)]
    val = [(s, 1.0 - 0.5 * s / 600 + 0.01 * (s % 7)) for s in range(49, 600, 50)]
    return {"sys/step_time_s": steps, "val/loss": val, "loss": _loss(600)}


def _checkpoint_saves() -> Series:
    steps = [(s, v * (40 if s % 100 == 0 and s else 1)) for s, v in _steps(800)]
    rss = [(s, v + (300 * MIB if s % 100 == 0 and s else 0)) for s, v in _rss(800)]
    return {"sys/step_time_s": steps, "sys/rss_bytes": rss}


def _noisy_loss() -> Series:
    return {"loss": _loss(2000, noise=0.3, seed=9)}


def _plateau() -> Series:
    return {
        "loss": _loss(500, start=2.3, end=2.3, noise=0.02),
        "acc": [(s, 0.1) for s in range(500)],
    }


def _amp_calibration() -> Series:
    scale = [(s, 65536.0 / 2 ** min(s, 4) * (2 if s >= 300 else 1)) for s in range(600)]
    skipped = [(s, float(min(s, 4))) for s in range(600)]
    grad = [(s, INF if s < 4 else v) for s, v in _grad(600)]
    loss = [(s, NAN if s < 2 else v) for s, v in _loss(600)]
    return {"amp/loss_scale": scale, "amp/skipped_steps": skipped, "grad/global_norm": grad,
            "loss": loss}  # fmt: skip


def _warm_restarts() -> Series:
    loss = [
        (s, 0.3 + 1.5 * math.exp(-s / 100) + 0.25 * _cosine((s % 200) / 200)) for s in range(1000)
    ]
    return {"loss": loss}


def _resumed_run() -> Series:
    # a retried job resumes at step 300 of 500: the loss bumps a little after the resume
    first = _loss(500)[:320]
    second = [(s, v * (1.15 if s < 330 else 1)) for s, v in _loss(500, seed=4)[300:]]
    return {"loss": first + second}


def _model_created_then_flat_memory() -> Series:
    rss = [(0, 250 * MIB), *[(s, v) for s, v in _rss(50)[1:]]]
    gpu = [(s, (0 if s == 0 else 3 * GIB) + (s % 10) * MIB) for s in range(50)]
    return {"sys/rss_bytes": rss, "sys/gpu0/allocated_bytes": gpu}


def _sawtooth_memory() -> Series:
    return {"sys/gpu0/allocated_bytes": [(s, 4 * GIB + (s % 100) * 5 * MIB) for s in range(1000)]}


def _grad_decreasing() -> Series:
    return {"grad/global_norm": _grad(800, start=20.0, end=0.2)}


def _grad_rising_slowly() -> Series:
    return {"grad/global_norm": [(s, 0.2 + 0.8 * s / 1000 + 0.05 * (s % 3)) for s in range(1000)]}


def _few_recompiles() -> Series:
    return {"compile/recompiles": [(s, float(min(s, 3))) for s in range(200)]}


def _compile_warmup_steps() -> Series:
    steps = [(s, 30.0 if s == 0 else (2.0 if s < 3 else v)) for s, v in _steps(300)]
    return {"sys/step_time_s": steps}


def _short_run() -> Series:
    return {"loss": _loss(12), "sys/rss_bytes": _rss(3), "sys/step_time_s": _steps(12)}


def _negative_loss() -> Series:
    return {
        "elbo_loss": [
            (s, -10.0 - 50 * (1 - math.exp(-s / 100)) + (s % 5) * 0.3) for s in range(600)
        ]
    }


def _loss_to_zero() -> Series:
    return {"loss": [(s, 2.0 * math.exp(-s / 30) + 1e-5 * (s % 4)) for s in range(600)]}


def _val_overfit() -> Series:
    val = [(s, 1.0 - 0.6 * math.sin(math.pi * s / 2000) ** 0.5 + 0.2 * (s / 2000) ** 2)
           for s in range(0, 2000, 100)]  # fmt: skip
    return {"val/loss": val, "loss": _loss(2000)}


def _metrics_and_constants() -> Series:
    return {
        "acc": [(s, min(0.99, s / 300)) for s in range(500)],
        "lr": [(s, 1e-3) for s in range(500)],
    }


def _mild_slowdown() -> Series:
    return {"sys/step_time_s": [(s, v * (1 + 0.3 * s / 500)) for s, v in _steps(500)]}


def _small_rss_growth() -> Series:
    return {"sys/rss_bytes": [(s, 900 * MIB + 0.05 * MIB * s) for s in range(400)]}


def _one_skipped_nan() -> Series:
    return {"loss": [(s, NAN if s == 77 else v) for s, v in _loss(300)]}


def _every_50_watch() -> Series:
    grad = [(s, v) for s, v in _grad(2000) if s % 50 == 0]
    scale = [(s, 65536.0 * (2 if s >= 1000 else 1)) for s in range(0, 2000, 50)]
    return {"grad/global_norm": grad, "amp/loss_scale": scale,
            "amp/skipped_steps": [(s, 3.0) for s in range(0, 2000, 50)]}  # fmt: skip


def _grad_scaler_calibration() -> Series:
    # 65536 halved five times (the fp16 gradients need <= 2048), then stable: the run
    return _grad_scaler_run(600, _overflow_above(2.0**11))


def _grad_scaler_long_calibration() -> Series:
    return _grad_scaler_run(600, _overflow_above(2.0**4))  # twelve skips, still far from 1


def _grad_scaler_growth_overflows() -> Series:
    # after each growth interval the doubled scale overflows once: one skip, halved again
    return _grad_scaler_run(3000, _overflow_above(2.0**15), growth_interval=500)


def _grad_scaler_watch_every_step() -> Series:
    return _grad_scaler_run(300, _overflow_above(2.0**11), every=1)


HEALTHY: list[tuple[str, Callable[[], Series]]] = [
    ("warmup + cosine", _warmup_cosine),
    ("step schedule", _step_schedule),
    ("eval every 50 steps", _eval_pauses),
    ("checkpoint saves", _checkpoint_saves),
    ("noisy loss", _noisy_loss),
    ("plateau", _plateau),
    ("AMP calibration", _amp_calibration),
    ("warm restarts (SGDR)", _warm_restarts),
    ("resumed run", _resumed_run),
    ("model created, then flat memory", _model_created_then_flat_memory),
    ("sawtooth memory", _sawtooth_memory),
    ("grad norm decreasing", _grad_decreasing),
    ("grad norm rising slowly", _grad_rising_slowly),
    ("a few recompiles", _few_recompiles),
    ("slow first steps (compile)", _compile_warmup_steps),
    ("short run", _short_run),
    ("negative loss", _negative_loss),
    ("loss to ~zero", _loss_to_zero),
    ("val loss overfits mildly", _val_overfit),
    ("accuracy and a constant lr", _metrics_and_constants),
    ("mild slowdown", _mild_slowdown),
    ("small RSS growth", _small_rss_growth),
    ("one skipped NaN batch", _one_skipped_nan),
    ("watch every 50 steps", _every_50_watch),
    ("GradScaler calibration (5 skips)", _grad_scaler_calibration),
    ("GradScaler calibration (12 skips)", _grad_scaler_long_calibration),
    ("GradScaler overflow after each growth", _grad_scaler_growth_overflows),
    ("GradScaler watched every step", _grad_scaler_watch_every_step),
]


@pytest.mark.parametrize("final", [True, False])
@pytest.mark.parametrize("series", [pytest.param(m, id=n) for n, m in HEALTHY])
def test_healthy_run_has_no_diagnosis(series: Callable[[], Series], final: bool) -> None:
    assert diagnose(series(), final=final) == []


def test_at_least_twenty_healthy_shapes() -> None:
    assert len(HEALTHY) >= 20


def _live(series: Series, end: int) -> list[Diagnosis]:
    """A live pass that sees the points before ``end``."""
    prefix = {k: [p for p in v if p[0] < end] for k, v in series.items()}
    return diagnose({k: v for k, v in prefix.items() if v}, final=False)


@pytest.mark.parametrize(
    "series",
    [_grad_scaler_calibration, _grad_scaler_long_calibration, _grad_scaler_watch_every_step],
)
def test_grad_scaler_calibration_is_no_problem_to_a_live_pass(
    series: Callable[[], Series],
) -> None:
    """Live passes during the calibration see Inf gradient norms that have not recovered
    yet and a run of skipped steps: neither is ``nonfinite`` nor a collapse."""
    run = series()
    for end in range(1, 60):
        assert _live(run, end) == [], end


@pytest.mark.parametrize(
    ("series", "code", "metric", "onset", "seen_by"),
    [
        (_amp_nan_loss_after_calibration, "nonfinite", "loss", 400, 403),
        (_amp_collapse_after_calibration, "amp_scale_collapse", "amp/skipped_steps", 300, 305),
        (_amp_broken_from_the_start, "amp_scale_collapse", "amp/loss_scale", 0, 17),
    ],
)
def test_grad_scaler_problem_found_live_at_its_onset_and_not_before(
    series: Callable[[], Series], code: str, metric: str, onset: int, seen_by: int
) -> None:
    run = series()
    for end in range(1, onset):
        assert _live(run, end) == [], end
    found = [(d.code, d.metric, d.step) for d in _live(run, seen_by)]
    assert (code, metric, onset) in found, found
    final = diagnose(run, final=True)
    assert {d.code for d in final} == {code}, final  # the grad norm's Inf is the scaler's
    assert all(d.step == onset for d in final), final


# ------------------------------------------------------------------ single rules


@pytest.mark.parametrize(
    ("points", "final", "amp", "step"),
    [
        ([(0, 1.0), (1, NAN)], True, False, 1),  # the run ended on a NaN
        ([(0, 1.0), (1, NAN)], False, False, None),  # live: may still recover
        ([(0, 1.0), (1, NAN), (2, INF), (3, NAN)], False, False, 1),  # 3 in a row: persistent
        ([(0, NAN), (1, 1.0), (2, 1.0)], True, False, None),  # a transient that recovered
        ([(0, NAN), (1, NAN), (2, NAN), (3, 1.0)], True, True, None),  # AMP skips, recovered
        ([(0, NAN), (1, NAN), (2, NAN), (3, 1.0)], True, False, 0),  # no AMP: 3 bad steps
        ([(0, NAN), (1, 1.0), (5, None), (6, None), (7, None)], False, True, 5),
        ([(3, 1.0), (1, NAN), (2, 2.0)], True, False, None),  # sorted by step first
    ],
)
def test_nonfinite_counts_only_persistent_stretches(
    points: list, final: bool, amp: bool, step: int | None
) -> None:
    found = nonfinite(points, "loss", final=final, amp=amp)
    assert (found.step if found else None) == step


def test_scaler_skips_from_the_count_or_the_scale() -> None:
    skipped = [(0, 1.0), (1, 2.0), (2, 2.0), (49, 2.0), (80, 3.0)]
    assert scaler_skips((), skipped) == (0, 1, 80)
    assert scaler_skips([(0, 8.0), (1, 4.0), (49, 8.0), (80, 4.0)]) == (1, 80)
    assert scaler_skips((), [(9, 0.0), (19, 0.0), (20, 1.0)]) == (20,)  # no skip before 9


@pytest.mark.parametrize(
    ("metric", "points", "skips", "final", "step"),
    [
        ("grad_norm", [(0, INF), (1, INF), (2, INF)], (0, 1, 2), False, None),  # calibrating
        ("grad_norm", [(0, INF), (1, INF), (2, INF)], (), False, 0),  # no scaler skipped
        ("grad_norm", [(0, 1.0), (1, INF), (2, INF), (3, INF)], (4,), True, None),  # logged later
        ("grad_norm", [(0, 1.0), (1, INF), (2, INF), (3, INF)], (0,), True, 1),  # skip before it
        ("loss", [(0, 1.0), (1, NAN), (2, NAN), (3, NAN)], (1, 2, 3), False, 1),  # a loss lasts
    ],
)
def test_nonfinite_of_a_gradient_while_the_scaler_skips_is_the_scalers(
    metric: str, points: list, skips: tuple[int, ...], final: bool, step: int | None
) -> None:
    found = nonfinite(points, metric, final=final, skips=skips)
    assert (found.step if found else None) == step
    if found is not None and skips:
        assert "GradScaler skips" in found.hint  # never "train with a GradScaler"


def test_nonfinite_message_names_metric_step_and_last_finite_value() -> None:
    found = nonfinite([(99, 0.25), (100, NAN), (101, INF), (102, NAN)], "train/loss")
    assert found is not None and found.severity == "error"
    assert found.message.startswith("train/loss became NaN at step 100 (last finite value 0.25")
    assert "learning rate" in found.hint
    other = nonfinite([(0, INF)], "grad/norm/fc.weight")
    assert other is not None and other.severity == "warning" and "+Inf" in other.message


@pytest.mark.parametrize(
    ("key", "loss_like"),
    [("loss", True), ("train/loss", True), ("val_loss", True), ("LossTotal", True),
     ("amp/loss_scale", False), ("acc", False), ("loss/acc", False)],
)  # fmt: skip
def test_loss_keys(key: str, loss_like: bool) -> None:
    assert is_loss_key(key) is loss_like


def test_memory_growth_reports_bytes_per_step() -> None:
    pts = [(s, 1 * GIB + 2 * MIB * s) for s in range(40)]
    found = memory_growth(pts, "sys/gpu0/allocated_bytes")
    assert found is not None and found.evidence is not None
    assert found.evidence.numbers["bytes_per_step"] == pytest.approx(2 * MIB)
    assert "GPU memory (sys/gpu0/allocated_bytes) grows ~2 MiB per step" in found.message
    assert "loss.item()" in found.hint
    assert memory_growth(pts[:7], "sys/rss_bytes") is None  # too few samples


def test_throughput_drop_names_both_step_times() -> None:
    found = throughput_drop([(s, 0.1 if s < 50 else 0.4) for s in range(100)])  # 15 s lost
    assert found is not None and found.step == 50
    assert "Steps slowed from 0.1 s to 0.4 s each (25% of the throughput)" in found.message


def test_scale_collapse_from_the_scale_alone() -> None:
    found = amp_scale_collapse([(s, 2.0 ** (16 - max(0, s - 10))) for s in range(40)])
    assert found is not None and found.step == 11


def test_checkpoint_problems_listed() -> None:
    facts = [CheckpointFact(100, "a.pt", "ok"), CheckpointFact(200, "b.pt", "corrupt"),
             CheckpointFact(300, "c.pt", "missing")]  # fmt: skip
    [found] = diagnose({}, final=True, checkpoints=facts)
    assert found.code == "checkpoint_corrupt" and found.step == 200
    assert "step 200 (corrupt), step 300 (missing)" in found.message


def test_diagnosis_json_uses_the_wire_form_for_nonfinite_values() -> None:
    found = nonfinite([(0, 1.0), (1, NAN), (2, INF), (3, NAN)], "loss")
    assert isinstance(found, Diagnosis)
    assert found.as_dict()["evidence"]["values"] == [1.0, "NaN", "Infinity", "NaN"]
    assert found.key == "nonfinite:loss"


@pytest.mark.parametrize(
    "kwargs", [{"persist": 0}, {"slow_factor": 1.0}, {"vanish_ratio": 2.0}, {"history": 0}]
)
def test_limits_are_checked(kwargs: dict) -> None:
    with pytest.raises(HealthError) as info:
        HealthLimits(**kwargs)
    assert isinstance(info.value, InvalidInput) and info.value.code == "invalid_health_input"


def test_a_jump_on_a_loss_converged_near_zero_is_not_a_spike() -> None:
    """0.007 -> 0.09 is 12x the median, but 3.6% of the way the loss came down from 2.3."""
    rng = random.Random(5)
    pts = [(s, 2.3 * math.exp(-s / 60) + 0.005 + 0.002 * rng.random()) for s in range(600)]
    pts[500] = (500, 0.09)
    assert loss_spike(pts, "train/loss") is None
    flat = [(s, 1.0 + 0.01 * rng.random()) for s in range(200)]
    flat[150] = (150, 3.0)  # a flat loss keeps its real spike
    found = loss_spike(flat, "train/loss")
    assert found is not None and found.step == 150


def _small_batch_loss(seed: int, steps: int = 3000) -> list[tuple[int, float]]:
    """A per-batch loss of a small batch: noisy around a decaying level, and now and then a
    batch with a hard example far above it (the corpus's batch-8 runs look like this)."""
    rng = random.Random(seed)
    pts = []
    for s in range(steps):
        v = (2.0 * math.exp(-s / 300) + 0.02) * rng.expovariate(1.0)
        if rng.random() < 0.02:
            v += rng.uniform(0.2, 0.9)
        pts.append((s, v))
    return pts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hard_examples_of_a_small_batch_are_not_spikes(seed: int) -> None:
    pts = _small_batch_loss(seed)
    assert loss_spike(pts, "train/loss") is None
    pts[2500] = (2500, 8.0)  # far past the series' own jumps: still a spike
    found = loss_spike(pts, "train/loss")
    assert found is not None and found.step == 2500


def _heavy_tailed_loss(seed: int, steps: int) -> list[tuple[int, float]]:
    """A per-batch loss with a heavy (log-normal) tail: now and then a batch 10-20x its
    level, as the corpus's batch-8 fp16 regression loss does over 50,000 steps."""
    rng = random.Random(seed)
    level = [0.5 * math.exp(-s / 2000) + 0.03 for s in range(steps)]
    return [(s, level[s] * rng.lognormvariate(0.0, 0.8)) for s in range(steps)]


def _median_before(pts: list[tuple[int, float]], k: int) -> float:
    return sorted(v for _, v in pts[k - 20 : k])[10]


def _largest_jump(pts: list[tuple[int, float]], upto: int) -> float:
    """The highest (value - trailing median) / trailing median of the points before."""
    return max((pts[k][1] - _median_before(pts, k)) / _median_before(pts, k)
               for k in range(20, upto))  # fmt: skip


def test_a_heavy_tailed_loss_has_no_spike_where_it_jumped_as_far_before() -> None:
    """Over its whole judged history, not only the last 200 points: a series whose batches
    have jumped 15x their median has no spike in another such jump after a quiet stretch."""
    for seed in (1, 2, 3, 4, 5):
        pts = _heavy_tailed_loss(seed, 6000)
        assert loss_spike(pts, "train/loss") is None, seed
    pts = _heavy_tailed_loss(1, 6000)
    top = _largest_jump(pts, 5000)
    assert top > 8  # the series' own noise reaches this far
    level = _median_before(pts, 5000)
    pts[5000] = (5000, level * (1 + 0.9 * top))  # as far as it went before: noise
    assert loss_spike(pts, "train/loss") is None
    pts[5000] = (5000, level * (1 + 4 * top))  # four times past anything it did: a spike
    found = loss_spike(pts, "train/loss")
    assert found is not None and found.step == 5000


def test_a_short_history_asks_more_of_a_spike() -> None:
    """46 points in, the noise of a batch-8 loss is known from 26 of them: a jump must pass
    4.9x its largest excursion (not 3x) to be called a spike, which a far larger one does;
    with 200 points known, 4x is enough."""
    rng = random.Random(7)
    pts = [(s, 0.03 * rng.expovariate(1.0) + 0.01) for s in range(300)]
    for k, times, spike in ((46, 4.0, False), (46, 8.0, True), (250, 4.0, True)):
        trial = list(pts)
        trial[k] = (k, _median_before(pts, k) * (1 + times * _largest_jump(pts, k)))
        found = loss_spike(trial, "train/loss")
        assert (found is not None and found.step == k) is spike, (k, times)


def test_a_partial_series_reports_spikes_only_in_its_newer_half() -> None:
    """A pass that reads the newest points of a long run (``partial``) judges the older
    half of them as memory only; the final pass of a short run judges them all."""
    clean = _loss(900, noise=0.01)
    for k, partial_finds in ((200, False), (600, True)):
        loss = list(clean)
        loss[k] = (k, loss[k][1] * 8)
        whole = diagnose({"train/loss": loss}, final=False)
        assert [(d.code, d.step) for d in whole] == [("loss_spike", k)]
        part = diagnose({"train/loss": loss}, final=False, partial={"train/loss"})
        assert [(d.code, d.step) for d in part] == ([("loss_spike", k)] if partial_finds else [])


def test_a_gradient_jump_in_the_last_points_waits_while_the_run_trains() -> None:
    """Live (``final=False``), a jump in the series' last points is not yet an explosion:
    it needs ``persist`` points high (the next point may come back); once the run has
    ended, high to the last point is enough."""
    rng = random.Random(3)
    norm = [(s, 1.0 + 0.05 * rng.random()) for s in range(100)]
    norm[-1] = (99, 30.0)
    assert grad_explosion(norm, final=False) is None
    found = grad_explosion(norm, final=True)
    assert found is not None and found.step == 99
    norm += [(100, 31.0), (101, 29.0)]
    found = grad_explosion(norm, final=False)
    assert found is not None and found.step == 99


def test_a_jump_of_a_gradient_norm_converged_near_zero_is_not_an_explosion() -> None:
    """The corpus's s1-059 (AdamW on plateau, bf16): the norm starts near 0.5, converges to
    ~0.002 and then jumps 10x for a few batches now and then -- below where it began. A real
    explosion from that small level passes the early level, and its onset is where it began."""
    rng = random.Random(11)
    norm = [(s, 0.5 * math.exp(-s / 40) + 0.002 * rng.expovariate(1.0)) for s in range(600)]
    for s in range(400, 406):
        norm[s] = (s, 0.03)  # 10x its median for 6 points: noise at this scale
    assert grad_explosion(norm) is None
    for s in range(400, 600):
        norm[s] = (s, 0.03 * 1.1 ** (s - 400))  # keeps growing: past 0.5 by step 430
    found = grad_explosion(norm)
    assert found is not None and found.step == 400


def test_a_lone_jump_is_a_spike_only_if_the_points_after_it_stay_below_it() -> None:
    """The corpus's s2-014 (batch 8): calm for 80 steps, 17x on a hard example at 101, 10x
    again a few steps later. Judged by the 200 points after it too, the first jump is the
    series' noise showing; without the later one it is a spike -- reported at the end, and
    live only once those points are seen."""
    rng = random.Random(4)
    base = [(s, 0.05 * (1 + 0.3 * rng.random())) for s in range(400)]
    loss = list(base)
    loss[101] = (101, 0.05 * 18)
    loss[110] = (110, 0.05 * 11)  # its noise, a few steps later
    assert loss_spike(loss, "train/loss") is None
    loss[110] = base[110]
    found = loss_spike(loss, "train/loss")
    assert found is not None and found.step == 101
    assert loss_spike(loss[:250], "train/loss", final=False) is None  # 150 after: not yet
    found = loss_spike(loss[:320], "train/loss", final=False)
    assert found is not None and found.step == 101


def test_one_hard_batch_of_a_memorised_loss_is_not_a_spike_but_a_lasting_jump_is() -> None:
    """The corpus's s2-180 (batch 8, 1,878 steps): the loss starts near 2.3, is memorised to
    ~1e-4 and meets one batch at 0.5 (4,750x its median, a fifth of where it started): a
    hard example. The same jump lasting a few steps is instability; a lone batch above the
    early level is one the model never could fit. Both are spikes."""
    rng = random.Random(9)
    base = [(s, 2.3 * math.exp(-s / 40) + 1e-4 * (1 + rng.random())) for s in range(1200)]
    loss = list(base)
    loss[762] = (762, 0.5)
    assert loss_spike(loss, "train/loss") is None
    for s in (762, 763, 764):
        loss[s] = (s, 0.5 * 0.7 ** (s - 762))  # lasting: it decays over steps
    found = loss_spike(loss, "train/loss")
    assert found is not None and found.step == 762
    loss = list(base)
    loss[762] = (762, 9.0)  # above anything it scored, untrained included
    found = loss_spike(loss, "train/loss")
    assert found is not None and found.step == 762


# finite values for the numpy windows: ties, signed zeros, the tiny and the huge
LOSS_VALUES = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 1e-300, 1e300]),
    st.floats(-1e6, 1e6, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(LOSS_VALUES, max_size=80),
    w=st.integers(1, 25),
)
def test_the_trailing_windows_in_numpy_are_the_median_rule(values: list[float], w: int) -> None:
    """loss_spike and grad_explosion read every point's trailing median and sigma from
    numpy: the same numbers as ``_median_sigma`` of each window (ties, even windows)."""
    from tracker.rules.health import _median_sigma, _trailing_median_sigma

    meds, sigmas = _trailing_median_sigma(list(enumerate(values)), w)
    want = [_median_sigma(values[k - w : k]) for k in range(w, len(values))]
    assert list(zip(meds, sigmas, strict=True)) == want


# a loss series, the spike rule's window and its noise window: what the bars are made of
BAR_INPUTS = {
    "values": st.lists(LOSS_VALUES, max_size=300),
    "w": st.integers(1, 25),
    "noise_points": st.integers(1, 60),
}


@settings(max_examples=300, deadline=None)
@given(**BAR_INPUTS)
def test_the_spike_bars_in_numpy_are_the_point_by_point_rule(
    values: list[float], w: int, noise_points: int
) -> None:
    """loss_spike computes every point's bar at once in numpy: the same numbers as judging
    the points one by one (the loop it ran before), running range, noise window and the
    highest relative jump included."""
    import numpy as np

    from tracker.rules.health import HealthLimits, _median_sigma, _noise_factor, _spike_bars

    limits = HealthLimits(history=w, spike_noise_points=noise_points)
    bars, relative = _spike_bars(np.asarray(values, dtype=np.float64), w, limits)
    excursions: list[float] = []
    top = 0.0
    want_bars = [math.nan] * min(w, len(values))
    want_relative = [0.0] * len(values)
    for k in range(w, len(values)):
        med, sigma = _median_sigma(values[k - w : k])
        sigma = max(sigma, 1e-3 * abs(med), 1e-12)
        factor = _noise_factor(len(excursions), limits)
        noise = max(excursions[-noise_points:], default=0.0)
        span = max(values[:k]) - min(values[:k])
        want_bars.append(
            med
            + max(
                limits.spike_sigmas * sigma,
                limits.spike_ratio * abs(med),
                limits.spike_range * span,
                factor * noise,
                factor * top * med if med > 0 else 0.0,
            )
        )
        excursions.append(max(0.0, values[k] - med))
        want_relative[k] = excursions[-1] / med if med > 0 else 0.0
        top = max(top, want_relative[k])
    np.testing.assert_array_equal(bars, np.asarray(want_bars))
    np.testing.assert_array_equal(relative, np.asarray(want_relative))


@settings(max_examples=300, deadline=None)
@given(**BAR_INPUTS)
def test_the_lazy_spike_bars_decide_as_the_exact_ones(
    values: list[float], w: int, noise_points: int
) -> None:
    """loss_spike asks for the sigma term only where a value passes the bar without it:
    each point passes its bar or not as with the exact bars, and the bar of each point
    that passes is the exact one."""
    import numpy as np

    from tracker.rules.health import HealthLimits, _spike_bars

    limits = HealthLimits(history=w, spike_noise_points=noise_points)
    array = np.asarray(values, dtype=np.float64)
    exact, relative = _spike_bars(array, w, limits)
    lazy, lazy_relative = _spike_bars(array, w, limits, exact=False)
    np.testing.assert_array_equal(array > lazy, array > exact)
    passing = array > exact
    np.testing.assert_array_equal(lazy[passing], exact[passing])
    np.testing.assert_array_equal(lazy_relative, relative)
    assert not (lazy > exact).any()  # never above: a lower bar where it is not exact


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=100),
    size=st.integers(1, 30),
)
def test_the_sliding_max_is_each_windows_max(values: list[float], size: int) -> None:
    import numpy as np

    from tracker.rules.health import _sliding_max

    got = _sliding_max(np.asarray(values), size).tolist()
    assert got == [max(values[i : i + size]) for i in range(len(values) - size + 1)]


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.integers(-(2**40), 2**40), max_size=60),
    values=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=60),
)
def test_a_series_of_arrays_is_what_the_detectors_read_from_pairs(
    steps: list[int], values: list[float]
) -> None:
    """``series_of`` (the doctor's reads of sealed chunks) hands the detectors a series
    they need not sort again only when it is in order with one value a step: the series
    each detector reads is the one it reads from the same pairs given as a list."""
    import numpy as np

    from tracker.rules.health import _sorted, series_of

    n = min(len(steps), len(values))
    pairs = list(zip(steps[:n], values[:n], strict=True))
    made = series_of(np.asarray(steps[:n], dtype=np.int64), np.asarray(values[:n]))

    def bits(points: list[tuple[int, float]]) -> list[tuple[int, bytes]]:
        return [(s, struct.pack("<d", v)) for s, v in points]

    assert bits(_sorted(made)) == bits(_sorted(pairs))
    assert bits(made) == bits([(s, float(v)) for s, v in pairs])  # every pair, as given
