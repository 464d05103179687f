"""What the list commands (``tracker runs ls``, ``tracker jobs ls``) share: the ``--limit``
/ ``-n`` option and the config column.

The config column shows, for each listed run or job, the flattened config keys whose values
differ between the listed ones (:func:`tracker.rules.config_diff.diff_configs`, the rule of
the dashboard's compare view and runs table): a sweep reads ``lr=0.001 model.width=32``, not
a whole config cut at the column's width. When no key differs (one item, or all alike) it
shows every key. ``--json`` prints whole configs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from tracker.cli.common import fmt_value
from tracker.rules.config_diff import MISSING, diff_configs

__all__ = ["MAX_LISTED", "config_cells", "limit_option"]

MAX_LISTED = 100_000


def limit_option(noun: str) -> Callable[[Any], Any]:
    """``--limit`` / ``-n``: at most this many ``noun`` (1 to ``MAX_LISTED``; default 50)."""
    return click.option(
        "--limit",
        "-n",
        type=click.IntRange(1, MAX_LISTED),
        default=50,
        show_default=True,
        help=f"At most this many {noun}, newest first.",
    )


def config_cells(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One config cell per config: its ``key=value`` pairs for the keys that differ between
    ``configs`` (every key when none differs); ``-`` when it has none of them.

    A key one config lacks is a difference; that config's cell leaves it out.
    Raises ``ConfigFlattenError`` for a config that cannot be flattened (stored configs can).
    """
    named = {str(i): config for i, config in enumerate(configs)}
    rows = diff_configs(named, only_differing=True) or diff_configs(named)
    cells = []
    for name in named:
        pairs = [f"{row.key}={fmt_value(row.values[name])}" for row in rows
                 if row.values[name] is not MISSING]  # fmt: skip
        cells.append(" ".join(pairs) or "-")
    return cells
