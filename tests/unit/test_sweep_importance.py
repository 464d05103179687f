"""``tracker.rules.sweep_search.param_importance``: the sweep page's importance chart, by
Optuna's PED-ANOVA over the complete trials; fewer than two, or anything Optuna cannot
evaluate, is an empty answer with its reason, never an exception."""

from __future__ import annotations

import math

import pytest

from tracker.rules.sweep import parse_overrides
from tracker.rules.sweep_search import SweepSettings, TrialRecord, param_importance

pytest.importorskip("optuna")

SETTINGS = SweepSettings(method="tpe", metric="val/loss", goal="minimize")
SPACE = parse_overrides(["lr=loguniform(1e-5,1e-1)", "width=32,64", "epochs=3"])


def _trials(n: int) -> list[TrialRecord]:
    """``val/loss`` follows lr (the closer to 1e-3, the lower); width does nothing."""
    out = []
    for i in range(n):
        lr = 10 ** (-5 + 4 * i / max(1, n - 1))
        value = abs(math.log10(lr) + 3) + 0.01 * (i % 2)
        out.append(TrialRecord(i, {"lr": lr, "width": (32, 64)[i % 2]}, "complete", value))
    return out


def test_importance_of_the_searched_params_sums_to_one() -> None:
    found, note = param_importance(SETTINGS, SPACE, _trials(16))
    assert set(found) == {"lr", "width"}  # epochs is fixed: not searched
    assert math.isclose(sum(found.values()), 1.0, rel_tol=1e-6)
    assert found["lr"] > found["width"], (found, note)


@pytest.mark.parametrize(
    "history",
    [
        [],
        _trials(1),
        [TrialRecord(0, {"lr": 1e-3, "width": 32}, "complete", 1.0),
         TrialRecord(1, {"lr": 1e-2, "width": 64}, "pruned", 0.5),
         TrialRecord(2, {"lr": 1e-4, "width": 64}, "failed"),
         TrialRecord(3, {"lr": 1e-4, "width": 32}, "running"),
         TrialRecord(4, {"lr": 1e-4, "width": 32}, "complete", math.nan)],
    ],
    ids=["none", "one", "one-finite-complete"],
)  # fmt: skip
def test_fewer_than_two_complete_trials_is_empty_with_the_reason(
    history: list[TrialRecord],
) -> None:
    found, note = param_importance(SETTINGS, SPACE, history)
    assert found == {}
    assert note is not None and "at least 2 complete trials" in note and "val/loss" in note


def test_params_outside_the_space_never_raise() -> None:
    # values stored before the space was what it is now (or never in it) are left out
    odd = [
        TrialRecord(0, {"lr": "fast", "width": 48}, "complete", 1.0),
        TrialRecord(1, {"lr": -1.0}, "complete", 2.0),
        TrialRecord(2, {}, "complete", 3.0),
    ]
    found, note = param_importance(SETTINGS, SPACE, odd)
    assert isinstance(found, dict)
    assert found or note  # an answer or its reason, never an exception
