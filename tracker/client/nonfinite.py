"""``tracker.init(on_nonfinite="stop")``: stop the training loop at the first *persistent*
NaN/Inf of a loss-like metric, with a clear error, instead of training on garbage.

The rule is the doctor's (:mod:`tracker.rules.health`): a loss-like key
(``is_loss_key``) whose logged value is non-finite ``persist`` times in a row (3 by
default: a lone skipped batch or an AMP overflow step that recovers is not a problem).
Only host values are checked -- floats, ints and tensors already converted on the CPU -- so
the check never synchronizes a GPU. The default policy, ``"record"``, only stores the
values; the doctor diagnoses them either way.

Failure modes: ``InvalidInput`` (field ``on_nonfinite``) for an unknown policy;
``NonFiniteLossError`` from ``log()`` when the policy stops training.
"""

from __future__ import annotations

import math
from typing import Any

from tracker.errors import InvalidInput, NonFiniteLossError
from tracker.rules.health import HealthLimits, is_loss_key

POLICIES = ("record", "stop")


def nonfinite_policy(policy: str) -> bool:
    """True for "stop"; raises InvalidInput for anything but the known policies."""
    if policy not in POLICIES:
        raise InvalidInput(
            f"on_nonfinite={policy!r}: must be one of {', '.join(POLICIES)} "
            '("stop" raises NonFiniteLossError at the first persistent NaN/Inf loss)',
            field="on_nonfinite",
        )
    return policy == "stop"


class NonFiniteGuard:
    """Counts, per loss-like key, the non-finite values logged in a row."""

    def __init__(self, persist: int = HealthLimits().persist) -> None:
        self.persist = persist
        self._loss_keys: dict[str, bool] = {}
        self._bad: dict[str, tuple[int, int]] = {}  # key -> (values in a row, first step)
        self._last_finite: dict[str, tuple[int, float]] = {}

    def check(self, items: dict[str, Any], step: int) -> None:
        for key, value in items.items():
            loss = self._loss_keys.get(key)
            if loss is None:
                loss = self._loss_keys[key] = is_loss_key(key)
            if not loss or type(value) not in (float, int):
                continue  # tensors left on the GPU are not synchronized for this
            if math.isfinite(value):
                self._bad.pop(key, None)
                self._last_finite[key] = (step, float(value))
                continue
            count, first = self._bad.get(key, (0, step))
            self._bad[key] = (count + 1, first)
            if count + 1 >= self.persist:
                raise NonFiniteLossError(self._message(key, value, step, count + 1, first))

    def _message(self, key: str, value: float, step: int, count: int, first: int) -> str:
        last = self._last_finite.get(key)
        before = f"; last finite value {last[1]:.6g} at step {last[0]}" if last else ""
        return (
            f"{key} is {value} at step {step}: non-finite {count} times in a row since step "
            f"{first}{before}. Training stopped (tracker.init(on_nonfinite='stop')). Lower the "
            "learning rate, clip gradients, check the inputs for NaN, or use bf16 / a "
            "GradScaler instead of plain fp16."
        )
