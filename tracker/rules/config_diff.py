"""Side-by-side comparison of run configs: pure functions, no I/O.

Nested configs are flattened to dotted keys by :func:`tracker.rules.config.flatten`
(``{"model": {"width": 64}}`` becomes ``model.width``; lists and other non-mapping values are
leaves, an empty mapping is a leaf ``{}`` so it is not lost). Values are compared by meaning,
not by Python type: ``1 == 1.0``, ``[1, 2] == (1, 2)``, NaN equals NaN (it is the same
setting), but ``True != 1`` and ``"1" != 1`` (a flag and a count, a string and a number are
different settings). A key that one run has and another lacks is a difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.rules.config import flatten

__all__ = ["MISSING", "DiffRow", "canonical", "diff_configs"]


class _Missing:
    """The value of a key in a run whose config does not have that key."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


@dataclass(frozen=True)
class DiffRow:
    """One flattened key: its value in each run (``MISSING`` where absent), in input order."""

    key: str
    values: dict[str, Any]
    differs: bool


def _canonical(value: Any) -> Any:
    """A hashable form in which equal settings are equal (1 and 1.0, lists and tuples)."""
    if value is MISSING:
        return ("missing",)
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        # Python compares and hashes int and float exactly (1 == 1.0, 2**53 + 1 != 2.0**53);
        # NaN is the one value unequal to itself (math.isnan would overflow on huge ints).
        return ("nan",) if value != value else ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical(v) for v in value))
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((str(k), _canonical(v)) for k, v in value.items())))
    return ("other", type(value).__name__, repr(value))


def canonical(value: Any) -> Any:
    """A hashable form of a config value in which equal settings are equal (the comparison
    above: ``1 == 1.0``, NaN equals NaN, ``True != 1``); ``MISSING`` has its own."""
    return _canonical(value)


def _sort_key(key: str) -> tuple[str, ...]:
    # Segment-wise, so every ``model.*`` key stays together before ``model_*``.
    return tuple(key.split("."))


def diff_configs(
    configs: Mapping[str, Mapping[str, Any]], *, only_differing: bool = False
) -> list[DiffRow]:
    """Compare the configs of several runs key by key, sorted by dotted key.

    ``configs`` maps run id to config; each row's ``values`` follows that order. With
    ``only_differing=True`` only rows whose ``differs`` is true are returned. A single run
    never differs from itself.

    Raises ``ConfigFlattenError`` when a config cannot be flattened (see ``flatten``).
    """
    flat = {run_id: flatten(config) for run_id, config in configs.items()}
    keys: set[str] = set()
    for values in flat.values():
        keys.update(values)
    rows: list[DiffRow] = []
    for key in sorted(keys, key=_sort_key):
        values = {run_id: f.get(key, MISSING) for run_id, f in flat.items()}
        differs = len({_canonical(v) for v in values.values()}) > 1
        if differs or not only_differing:
            rows.append(DiffRow(key=key, values=values, differs=differs))
    return rows
