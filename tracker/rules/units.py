"""Durations and byte sizes as people write them: one parser each, pure, no I/O.

Durations (``--timeout 2h``, the run-search language's ``duration > 1h30m``): a plain number
of seconds (``90``, ``0.5``) or number-unit parts with the units ``d``, ``h``, ``m`` and
``s`` (``90s``, ``45m``, ``1.5h``, ``1d``, ``1h30m``, ``1h 30m 15s``), each unit at most once
and from largest to smallest, case-insensitive. The result is seconds as a float; a negative,
infinite or (unless ``allow_zero``) zero duration is refused.

Sizes (``--gpu-memory 20GiB``): a number with a unit, ``K``/``M``/``G``/``T`` optionally
followed by ``B`` or ``iB``, case-insensitive; every prefix is a power of 1024 here
(``16000MB`` is 16000 MiB), because the sizes compared with them are GPU memory as NVML and
``torch.cuda`` report it, in binary units. A bare number (``20``) is refused: bytes or
gigabytes would both be plausible. :func:`format_bytes` writes sizes back in the same units.

Failure modes: :class:`DurationError` and :class:`SizeError` (both ``InvalidInput``, HTTP
400), whose message quotes the text, states the rule and names ``field``.
"""

from __future__ import annotations

import math
import re

from tracker.errors import InvalidInput

__all__ = [
    "GIB",
    "KIB",
    "MIB",
    "DurationError",
    "SizeError",
    "format_bytes",
    "parse_duration",
    "parse_size",
]

KIB = 1024
MIB = 1024**2
GIB = 1024**3


class DurationError(InvalidInput):
    """A duration such as ``--timeout 2h`` that does not parse."""

    code = "invalid_duration"


class SizeError(InvalidInput):
    """A byte size such as ``--gpu-memory 20GiB`` that does not parse."""

    code = "invalid_size"


# ------------------------------------------------------------------------- durations

_SECONDS = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)")
_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_HELP = "expected a duration like 90s, 45m, 2h, 1d, 1h30m or a number of seconds"


def parse_duration(text: str, *, field: str = "duration", allow_zero: bool = False) -> float:
    """Seconds in a duration such as ``90``, ``90s``, ``45m``, ``2h``, ``1.5h``, ``1h30m``.

    Raises:
        DurationError: the text is not a duration (see the module docstring), the units are
            repeated or out of order, or the duration is negative, infinite, or zero (unless
            ``allow_zero``); the error's field is ``field``.
    """
    s = text.strip().lower()
    if _SECONDS.fullmatch(s):
        total = float(s)
    elif not s:
        raise DurationError(f"duration {text!r}: {_DURATION_HELP}", field=field)
    else:
        total, pos, last_rank = 0.0, 0, -1
        ranks = list(_DURATION_UNITS)
        while pos < len(s):
            m = _DURATION_PART.match(s, pos)
            if m is None or m.group(2) not in _DURATION_UNITS:
                raise DurationError(f"duration {text!r}: {_DURATION_HELP}", field=field)
            rank = ranks.index(m.group(2))
            if rank <= last_rank:
                raise DurationError(
                    f"duration {text!r}: units must appear once each, largest first (1h30m)",
                    field=field,
                )
            total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
            pos, last_rank = m.end(), rank
    if not math.isfinite(total) or total < 0 or (total == 0 and not allow_zero):
        rule = "must not be negative" if allow_zero else "must be greater than 0"
        raise DurationError(f"duration {text!r}: {rule}", field=field)
    return total


# ----------------------------------------------------------------------------- sizes

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": KIB, "M": MIB, "G": GIB, "T": 1024**4}


def parse_size(text: str, *, field: str = "size") -> int:
    """Bytes in ``20GiB``, ``20G``, ``512MiB``, ``16000MB`` (K/M/G/T are powers of 1024).

    Raises:
        SizeError: no unit, not a number, or a size that rounds to 0 bytes; the error's field
            is ``field``.
    """
    m = _SIZE.fullmatch(text)
    if not m or not (m.group(2) or m.group(3)):
        raise SizeError(
            f"{field} {text!r}: give a size with a unit, like 20GiB or 512MiB", field=field
        )
    size = int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])
    if size <= 0:
        raise SizeError(f"{field} {text!r}: must be more than 0", field=field)
    return size


def format_bytes(n: float) -> str:
    """``12.5 MiB``-style text: three significant digits in the largest unit that fits."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"
