"""The one throttle of periodic work: when a task (or any key) may run again.

A key runs again ``every_s`` after its last start, and never sooner than ``slowdown`` (10)
times its last run's duration after it, so a pass over a huge store or run costs at most
~10% of the thread that runs it, however short the period. Pure: the caller passes the
times (its own clock). Used by :mod:`tracker.periodic` and the SQL sink's live doctor.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

SLOWDOWN = 10.0

__all__ = ["SLOWDOWN", "Throttle"]


@dataclass
class Throttle:
    """``due(key, now)``: may ``key`` run now; ``ran(key, started, took, every_s)``: it ran."""

    slowdown: float = SLOWDOWN
    _next: dict[Hashable, float] = field(default_factory=dict, init=False)

    def due(self, key: Hashable, now: float) -> bool:
        return now >= self._next.get(key, -float("inf"))

    def ran(self, key: Hashable, started: float, took: float, every_s: float) -> None:
        self._next[key] = started + max(every_s, self.slowdown * max(0.0, took))

    def wait(self, key: Hashable, until: float) -> None:
        """Not before ``until`` (a first run that should not come at once)."""
        self._next[key] = until

    def next_at(self) -> float:
        """The earliest time any key is due (``inf`` with none)."""
        return min(self._next.values(), default=float("inf"))
