"""The one backoff rule: how long to wait before attempt ``n + 1`` after ``n`` failed.

Pure: the caller passes the attempt number, the first delay, the cap and, when it wants
jitter, a random fraction it drew itself (``random.random()``), so the rule reads no clock
and no random generator and a test can give every input. Used by the HTTP client
(:mod:`tracker.client.http`), the client's writer thread, the SQLite WAL switch in
``tracker.store.engine`` and the runner's job retries (``tracker.runner.retry``).

Also the one reading of an HTTP ``Retry-After`` header (:func:`retry_after_seconds`), with
the current time passed in.
"""

from __future__ import annotations

import email.utils
import math

__all__ = ["backoff_delay", "retry_after_seconds"]

_MAX_EXPONENT = 64  # 2.0 ** 10_000 would overflow a float; 2 ** 64 is past every cap


def backoff_delay(
    attempt: int, *, base_s: float, cap_s: float, jitter: float | None = None
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first).

    ``base_s`` doubled ``attempt - 1`` times, at most ``cap_s``. With ``jitter`` (a fraction
    in ``[0, 1]``), the delay is spread over its upper half: ``d / 2 + jitter * d / 2``, so
    many clients failing together do not retry together, and none waits less than half.

    Raises ValueError when ``attempt < 1``, a delay is negative or not finite, or
    ``jitter`` is outside ``[0, 1]``.
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt: got {attempt!r}; attempts are numbered from 1")
    for name, value in (("base_s", base_s), ("cap_s", cap_s)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name}: got {value!r}; it must be a finite number >= 0")
    delay = min(float(cap_s), float(base_s) * 2.0 ** min(attempt - 1, _MAX_EXPONENT))
    if jitter is None:
        return delay
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter: got {jitter!r}; it must be a fraction in [0, 1]")
    return delay / 2 + jitter * (delay / 2)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: its number of seconds, or its HTTP date
    minus ``now`` (epoch seconds), never negative. ``None`` when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)
