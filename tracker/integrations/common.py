"""What the Lightning logger and the Hugging Face callback share (no framework imports).

Key mapping (deterministic, documented in the README): a metric key that the tracker's key
rule (:mod:`tracker.rules.keys`) accepts is kept as it is. Any other key is mapped by

1. replacing every character other than letters, digits, ``_ - . /`` with ``_``
   (``"val loss"`` -> ``"val_loss"``, ``"val:acc"`` -> ``"val_acc"``);
2. collapsing runs of ``/`` into one and runs of ``.`` into one;
3. dropping ``/`` at both ends (an empty result becomes ``_``);
4. cutting to 250 characters.

A key that the rule accepts is never changed, so when the rule later accepts more characters
the keys it then accepts pass through unchanged. Two keys that map to the same key share one
series; the first time that happens a warning names both.

Config conversion: hyperparameters (dicts, ``argparse.Namespace``, dataclasses, Lightning's
``AttributeDict``, ``TrainingArguments.to_dict()``) become a JSON-safe dict; a value the
tracker cannot store as config (a torch dtype, a module, an enum, NaN) is stored as its
``str()``, so a logger never stops training over a hyperparameter.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

from tracker.errors import InvalidMetricKey
from tracker.rules.keys import MAX_KEY_LENGTH, check_key

__all__ = [
    "KeyMapper",
    "map_key",
    "numeric_metrics",
    "to_config",
]

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")
_SLASHES = re.compile(r"/{2,}")
_DOTS = re.compile(r"\.{2,}")


def map_key(key: str) -> str:
    """The key as stored: unchanged when the key rule accepts it, else mapped (module doc)."""
    key = str(key)
    try:
        return check_key(key)
    except InvalidMetricKey:
        pass
    mapped = _BAD_CHARS.sub("_", key)
    mapped = _DOTS.sub(".", _SLASHES.sub("/", mapped)).strip("/")
    mapped = (mapped or "_")[:MAX_KEY_LENGTH].rstrip("/") or "_"
    return check_key(mapped)


class KeyMapper:
    """``map_key`` with a cache, warning once when two different keys map to one."""

    def __init__(self) -> None:
        self._mapped: dict[str, str] = {}
        self._source: dict[str, str] = {}

    def __call__(self, key: str) -> str:
        found = self._mapped.get(key)
        if found is not None:
            return found
        mapped = map_key(key)
        self._mapped[key] = mapped
        first = self._source.setdefault(mapped, key)
        if first != key:
            warnings.warn(
                f"metric keys {first!r} and {key!r} are both stored as {mapped!r}",
                stacklevel=3,
            )
        return mapped


def numeric_metrics(metrics: Mapping[str, Any], keys: KeyMapper) -> dict[str, Any]:
    """The metrics that are numbers (int, float, bool, numpy scalars, one-element tensors),
    under their mapped keys; strings and other values (Hugging Face logs ``train_runtime``
    next to text) are left out. Values are passed through: the run converts them."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, str | bytes) or value is None:
            continue
        numel = getattr(value, "numel", None)
        if numel is not None and callable(numel) and numel() != 1:
            continue
        if not (isinstance(value, int | float) or hasattr(value, "item")):
            continue
        out[keys(key)] = value
    return out


def to_config(hparams: Any) -> dict[str, Any]:
    """Hyperparameters as a JSON-safe dict (see the module doc)."""
    if hparams is None:
        return {}
    if dataclasses.is_dataclass(hparams) and not isinstance(hparams, type):
        hparams = {f.name: getattr(hparams, f.name) for f in dataclasses.fields(hparams)}
    elif type(hparams).__name__ == "Namespace":
        hparams = vars(hparams)
    if not isinstance(hparams, Mapping):
        return {"hparams": _value(hparams)}
    return {str(k): _value(v) for k, v in hparams.items()}


def _value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return _value(value.value)
    if isinstance(value, Mapping) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return to_config(value)
    if type(value).__name__ == "Namespace":
        return to_config(value)
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if type(value).__module__.startswith("numpy") and hasattr(value, "item"):
        try:
            return _value(value.item())
        except (TypeError, ValueError):
            return str(value)
    return str(value)
