"""Row ids and integers as they arrive in URLs, query strings and bodies: a pure rule.

Every id column of the store (runs, jobs, projects, checkpoints, schedules, ...) is an
``INTEGER``: 64-bit on SQLite but 32-bit on PostgreSQL, where a larger parameter is a
driver error (``integer out of range``), and SQLite's driver refuses anything past 64 bits
(``OverflowError``). So an id is read as ASCII digits within ``0..MAX_ID`` and anything else
is "no such row" -- the caller answers 404 (or a 400 that names the field), never 500.

Digits are ASCII only: ``str.isdigit`` is true for ``'²'`` (which ``int()`` refuses) and for
Arabic-Indic or full-width digits (which ``int()`` reads), so neither is an id.
"""

from __future__ import annotations

import re

__all__ = ["MAX_ID", "MAX_INT64", "MIN_INT64", "ascii_int", "in_int64", "parse_id"]

MAX_ID = 2**31 - 1  # the largest PostgreSQL INTEGER: the narrowest id column of the store
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
_ASCII_INT = re.compile(r"[+-]?[0-9]{1,40}")


def ascii_int(text: str) -> int | None:
    """The integer ``text`` spells in ASCII decimal (an optional sign, at most 40 digits,
    surrounding whitespace allowed); ``None`` for anything else."""
    text = text.strip()
    return int(text) if _ASCII_INT.fullmatch(text) else None


def parse_id(text: str) -> int | None:
    """A row id from text: ASCII digits within ``0..MAX_ID``; ``None`` otherwise."""
    value = ascii_int(text)
    if value is None or not 0 <= value <= MAX_ID or text.strip()[:1] in "+-":
        return None
    return value


def in_int64(value: int) -> bool:
    """Whether ``value`` fits a signed 64-bit column (what both stores can bind)."""
    return MIN_INT64 <= value <= MAX_INT64
