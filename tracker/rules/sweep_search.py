"""The decisions of a sweep that learns, made by Optuna: pure functions, no I/O.

The store (``tracker.store.sweeps``) is the source of truth; each decision rebuilds an
in-memory Optuna study from the trials stored so far (:class:`TrialRecord`) and asks it
one question:

- :func:`next_params`: the params of trial ``number`` (the sampler: ``tpe``, ``cmaes``,
  ``random`` or ``grid``). The sampler is seeded with a hash of the sweep's seed and
  ``number`` (:func:`trial_seed`), so the same history gives the same answer on any
  controller, before and after a restart.
- :func:`param_importance`: how much each searched param explains the objective, over the
  complete trials (Optuna's PED-ANOVA), for the sweep page's chart.
- :func:`should_prune`: whether a running trial stops at its latest step (the pruner:
  ``asha`` -- Optuna's successive halving, ``hyperband``, ``median`` or ``none``), given the
  metric values it logged so far. The pruner's bookkeeping (the rung a trial reached) comes
  back as ``system_attrs`` for the store to keep.

Running trials are in the study too (as running, with their params): TPE's constant liar
keeps parallel trials apart. A failed trial is told to the sampler as failed; a pruned one
as pruned with its last value.

The search space comes from the ``-c`` grammar of ``tracker sweep`` (``tracker.rules.sweep``):
a comma list or ``choice(...)`` is categorical, ``uniform``/``loguniform`` a float and
``randint`` an integer range; a single value is fixed (the same in every trial).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracker.rules.sweep import Choices, Override, SweepSpecError

if TYPE_CHECKING:
    import optuna

__all__ = [
    "CHECKED",
    "GOALS",
    "METHODS",
    "OBJECTIVES",
    "PRUNERS",
    "SweepSettings",
    "TrialRecord",
    "check_space",
    "fixed_config",
    "grid_size",
    "next_params",
    "param_importance",
    "should_prune",
]

METHODS = ("tpe", "cmaes", "random", "grid")
PRUNERS = ("asha", "hyperband", "median", "none")
GOALS = ("minimize", "maximize")
OBJECTIVES = ("last", "best")
MAX_TRIALS = 10_000
MAX_PARALLEL = 1_000
TRIAL_STATES = ("running", "complete", "pruned", "failed")


@dataclass(frozen=True)
class SweepSettings:
    """How a sweep searches: ``check()`` raises ``SweepSpecError`` naming the option."""

    method: str = "tpe"
    metric: str = ""
    goal: str = "minimize"
    trials: int = 20
    parallel: int = 1
    prune: str = "none"
    seed: int = 0
    objective: str = "last"  # the metric's last value, or its best over the run

    def check(self) -> SweepSettings:
        _one_of("--method", self.method, METHODS)
        _one_of("--prune", self.prune, PRUNERS)
        _one_of("--goal", self.goal, GOALS)
        _one_of("--objective", self.objective, OBJECTIVES)
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise SweepSpecError(
                "--metric: name the metric to optimise, as the script logs it (e.g. val/loss)",
                field="metric",
            )
        if len(self.metric) > 250:
            raise SweepSpecError("--metric: at most 250 characters", field="metric")
        _int_in("--trials", self.trials, 1, MAX_TRIALS)
        _int_in("--parallel", self.parallel, 1, MAX_PARALLEL)
        _int_in("--seed", self.seed, 0, 2**62)
        return self


def _one_of(option: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise SweepSpecError(
            f"{option}: {value!r} is not one of {', '.join(allowed)}", field=option.lstrip("-")
        )


def _int_in(option: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise SweepSpecError(
            f"{option}: {value!r} must be an integer from {lo} to {hi}", field=option.lstrip("-")
        )


@dataclass(frozen=True)
class TrialRecord:
    """A stored trial as the decisions see it. ``intermediate`` maps step -> the metric's
    value there (NaN allowed); ``value`` is the objective of an ended trial."""

    number: int
    params: Mapping[str, Any]
    state: str
    value: float | None = None
    intermediate: Mapping[int, float] = field(default_factory=dict)
    system_attrs: Mapping[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- space


def _searched(overrides: Sequence[Override]) -> list[Override]:
    return [o for o in overrides if not (isinstance(o.spec, Choices) and len(o.spec.values) == 1)]


def fixed_config(overrides: Sequence[Override]) -> dict[str, Any]:
    """The overrides with one value: the same in every trial (dotted key -> value)."""
    return {
        o.key: o.spec.values[0]
        for o in overrides
        if isinstance(o.spec, Choices) and len(o.spec.values) == 1
    }


def check_space(overrides: Sequence[Override], method: str) -> None:
    """Raise ``SweepSpecError`` (naming the ``-c``) for a space the method cannot search."""
    searched = _searched(overrides)
    if not searched:
        raise SweepSpecError(
            "a sweep needs at least one -c with several values or a distribution to search, "
            "e.g. -c 'lr=loguniform(1e-5,1e-1)' or -c width=64,128",
            field="overrides",
        )
    for o in searched:
        if isinstance(o.spec, Choices):
            for value in o.spec.values:
                if value is not None and not isinstance(value, (bool, int, float, str)):
                    raise SweepSpecError(
                        f"-c {o.text}: a searched choice must be a number, a string, true, "
                        f"false or null, not {type(value).__name__}",
                        field=o.key,
                    )
                if isinstance(value, float) and not math.isfinite(value):
                    raise SweepSpecError(
                        f"-c {o.text}: a searched choice must be finite", field=o.key
                    )
        elif method == "grid":
            raise SweepSpecError(
                f"-c {o.text}: --method grid takes comma lists only; use tpe, cmaes or "
                "random to search a distribution",
                field=o.key,
            )


def grid_size(overrides: Sequence[Override]) -> int:
    size = 1
    for o in _searched(overrides):
        if isinstance(o.spec, Choices):
            size *= len(o.spec.values)
    return size


def _distributions(overrides: Sequence[Override]) -> dict[str, Any]:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    out: dict[str, Any] = {}
    for o in _searched(overrides):
        spec = o.spec
        if isinstance(spec, Choices):
            out[o.key] = CategoricalDistribution(list(spec.values))
        elif spec.kind == "randint":
            out[o.key] = IntDistribution(int(spec.low), int(spec.high))
        else:
            out[o.key] = FloatDistribution(
                float(spec.low), float(spec.high), log=spec.kind == "loguniform"
            )
    return out


# ----------------------------------------------------------------------------- study


def _quiet() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def trial_seed(seed: int, number: int) -> int:
    """The sampler seed of trial ``number`` of a sweep seeded ``seed``: a hash of both, so
    sweeps seeded 0 and 1 share no draws (``seed + number`` made them the same sweep shifted
    by one trial)."""
    digest = hashlib.blake2b(f"{seed}/{number}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def _sampler(settings: SweepSettings, overrides: Sequence[Override], number: int) -> Any:
    import optuna

    seed = trial_seed(settings.seed, number)
    if settings.method == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if settings.method == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if settings.method == "grid":
        grid = {
            o.key: list(o.spec.values) for o in _searched(overrides) if isinstance(o.spec, Choices)
        }
        # one seed for every trial: the grid's order is shuffled by it, and grid ids must
        # name the same params across trials
        return optuna.samplers.GridSampler(grid, seed=settings.seed % 2**32)
    return optuna.samplers.RandomSampler(seed=seed)


ASHA_REDUCTION = 3  # successive halving keeps the best third at each rung
ASHA_FIRST_CUT = 3  # ... and makes its first cut at a third of a full trial's steps


def _pruner(settings: SweepSettings, history: Sequence[TrialRecord] = ()) -> Any:
    import optuna

    if settings.prune == "asha":
        # Optuna's "auto" first rung is a hundredth of a trial's steps: at epoch 1 of 20 the
        # ranking says little about epoch 20, and good trials are cut. Under a decaying
        # learning rate (cosine, linear) the ranking settles late: measured in
        # bench/RESULTS.md, a first cut at a ninth or a quarter lost the best trial, a third
        # kept it and still saved 45 % of the steps. So: the first rung at a third of the
        # first complete trial's steps; no trial is pruned before one has completed.
        full = _full_steps(history)
        if full is None:
            return optuna.pruners.SuccessiveHalvingPruner(reduction_factor=ASHA_REDUCTION)
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=max(1, round(full / ASHA_FIRST_CUT)), reduction_factor=ASHA_REDUCTION
        )
    if settings.prune == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if settings.prune == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5)
    return optuna.pruners.NopPruner()


def _full_steps(history: Sequence[TrialRecord]) -> int | None:
    """The steps of the first complete trial (its last step + 1), or None."""
    for record in sorted(history, key=lambda r: r.number):
        if record.state == "complete" and record.intermediate:
            return max(record.intermediate) + 1
    return None


def _study(
    settings: SweepSettings,
    overrides: Sequence[Override],
    history: Sequence[TrialRecord],
    sampler: Any,
    name: str,
) -> optuna.Study:
    import optuna
    from optuna.trial import TrialState, create_trial

    _quiet()
    study = optuna.create_study(
        study_name=name,
        direction="maximize" if settings.goal == "maximize" else "minimize",
        sampler=sampler,
        pruner=_pruner(settings, history),
    )
    space = _distributions(overrides)
    states = {
        "running": TrialState.RUNNING,
        "complete": TrialState.COMPLETE,
        "pruned": TrialState.PRUNED,
        "failed": TrialState.FAIL,
    }
    for record in sorted(history, key=lambda r: r.number):
        params = {k: v for k, v in record.params.items() if k in space}
        dists = {k: space[k] for k in params}
        state = states[record.state]
        value = record.value
        if state == TrialState.COMPLETE and (value is None or not math.isfinite(value)):
            state, value = TrialState.FAIL, None
        if state != TrialState.COMPLETE:
            value = None
        inter = {
            int(s): float(v) for s, v in record.intermediate.items() if not math.isinf(float(v))
        }
        kept, kept_dists = _in_space(params, dists)
        study.add_trial(
            create_trial(
                state=state,
                value=value,
                params=kept,
                distributions=kept_dists,
                intermediate_values=inter,
                system_attrs=_restored(record.system_attrs),
            )
        )
    return study


def _in_space(
    params: dict[str, Any], dists: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The params that still fit the space, and their distributions (a stored value
    outside the space is left out)."""
    kept = {k: v for k, v in params.items() if _fits(dists[k], v)}
    return kept, {k: dists[k] for k in kept}


def _fits(dist: Any, value: Any) -> bool:
    try:
        return bool(dist._contains(dist.to_internal_repr(value)))
    except (ValueError, TypeError):
        return False


def next_params(
    settings: SweepSettings,
    overrides: Sequence[Override],
    history: Sequence[TrialRecord],
    number: int,
    name: str = "sweep",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The params of trial ``number`` (dotted key -> value, the searched keys only) and the
    sampler's bookkeeping to keep with it (``system_attrs``)."""
    study = _study(settings, overrides, history, _sampler(settings, overrides, number), name)
    trial = study.ask(_distributions(overrides))
    frozen = study.get_trials(deepcopy=False)[-1]
    return dict(trial.params), _jsonable(frozen.system_attrs)


CHECKED = "tracker:checked_step"  # the last step the pruner saw (kept in system_attrs)
MAX_STEPS_PER_CHECK = 1000


def should_prune(
    settings: SweepSettings,
    overrides: Sequence[Override],
    history: Sequence[TrialRecord],
    number: int,
    name: str = "sweep",
    *,
    replay: bool = False,
) -> tuple[int | None, dict[str, Any]]:
    """The step at which running trial ``number`` stops (None: it goes on) and its
    bookkeeping to keep.

    The pruner sees the trial as a training loop's ``should_prune()`` would: once per
    logged step, in order, from the step after the last one it saw (at most the newest
    1000 per call), so successive halving's rungs get the value at their step.

    ``replay``: the trial has ended (it finished between two passes, or was seen only
    partly): every step it logged and the pruner has not seen is shown to it without
    stopping at a decision, so the rungs it reached count for the trials after it. Returns
    ``(None, bookkeeping)``."""
    import copy

    if settings.prune == "none":
        return None, {}
    study = _study(settings, overrides, history, _sampler(settings, overrides, number), name)
    index = sorted(r.number for r in history).index(number)
    trial_id = study.get_trials(deepcopy=False)[index]._trial_id
    storage = study._storage
    frozen = storage.get_trial(trial_id)
    checked = frozen.system_attrs.get(CHECKED)
    values = frozen.intermediate_values
    steps = sorted(s for s in values if checked is None or s > checked)[-MAX_STEPS_PER_CHECK:]
    for step in steps:
        current = copy.copy(storage.get_trial(trial_id))
        current.intermediate_values = {s: v for s, v in values.items() if s <= step}
        storage.set_trial_system_attr(trial_id, CHECKED, step)
        if study.pruner.prune(study, current) and not replay:
            return step, _jsonable(storage.get_trial(trial_id).system_attrs)
    return None, _jsonable(storage.get_trial(trial_id).system_attrs)


def _restored(attrs: Mapping[str, Any]) -> dict[str, Any]:
    special = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
    return {k: special.get(v, v) if isinstance(v, str) else v for k, v in attrs.items()}


def _jsonable(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in attrs.items():
        if isinstance(value, float) and not math.isfinite(value):
            value = repr(value)
        out[str(key)] = value
    return out


MIN_IMPORTANCE_TRIALS = 2


def param_importance(
    settings: SweepSettings, overrides: Sequence[Override], history: Sequence[TrialRecord]
) -> tuple[dict[str, float], str | None]:
    """Each searched param's importance for the objective (dotted key -> share, summing to 1),
    by Optuna's ``PedAnovaImportanceEvaluator`` on a study of the complete trials with a
    finite value; and a note: why there is none, or what Optuna warned of (few trials).

    Never raises: the sweep page shows the rest of a sweep whatever this meets; a sweep with
    fewer than 2 such trials, or one Optuna cannot evaluate, is ``({}, reason)``."""
    import warnings

    done = [
        TrialRecord(number=r.number, params=r.params, state="complete", value=r.value)
        for r in history
        if r.state == "complete" and r.value is not None and math.isfinite(r.value)
    ]
    if len(done) < MIN_IMPORTANCE_TRIALS:
        return {}, (
            f"importance needs at least {MIN_IMPORTANCE_TRIALS} complete trials with a finite "
            f"{settings.metric}; {len(done)} so far"
        )
    try:
        import optuna

        study = _study(
            settings, overrides, done, optuna.samplers.RandomSampler(seed=0), "importance"
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.PedAnovaImportanceEvaluator()
            )
    except Exception as exc:  # any failure is the chart's note, never the page's
        return {}, f"no importance: {type(exc).__name__}: {exc}"
    if not found:
        return {}, "no searched param has a value in the space in every complete trial"
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    return {str(k): float(v) for k, v in found.items()}, (" ".join(notes) or None)
