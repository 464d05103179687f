"""How numbers read in the CLI's text output (pure: values in, text out).

``format_metric(key, value)``: a metric whose name ends in ``_bytes`` (``sys/rss_bytes``,
``gpu0/allocated_bytes``) reads with a binary unit (``499 MiB``, via
:func:`tracker.rules.units.format_bytes`); any other number as ``format_number`` writes it.
``format_number``: whole numbers with thousands separators (``522,895,360``, never
``5.22895e+08``), large fractions with two decimals, others with six significant digits;
NaN and infinities as ``nan``, ``inf``, ``-inf``. Never raises for a number; anything else
is ``str()``-ed.
"""

from __future__ import annotations

import math
from typing import Any

from tracker.rules.units import format_bytes

__all__ = ["format_metric", "format_number", "is_bytes_key"]

_WHOLE_LIMIT = 1e15  # past this a float's integer digits are not all meaningful


def is_bytes_key(key: str) -> bool:
    """Whether a metric (or column) named ``key`` holds a size in bytes: its last ``/`` part
    is ``bytes`` or ends in ``_bytes``."""
    last = key.rsplit("/", 1)[-1]
    return last == "bytes" or last.endswith("_bytes")


def format_number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    magnitude = abs(value)
    if value.is_integer() and magnitude < _WHOLE_LIMIT:
        return f"{int(value):,}"
    if 1e4 <= magnitude < _WHOLE_LIMIT:
        return f"{value:,.2f}"
    return f"{value:.6g}"


def format_metric(key: str, value: Any) -> str:
    """``value`` of the metric ``key`` as text: with a byte unit for ``*_bytes`` keys."""
    if (
        is_bytes_key(key)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    ):
        return format_bytes(value)
    return format_number(value)
