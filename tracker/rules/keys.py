"""Metric keys: the one rule every package checks them with (pure, no I/O).

A key is 1 to 250 characters of letters (any script), digits, ``_ - . / :`` and spaces --
what MLflow accepts, so ``val loss`` and ``val:acc`` from an MLflow script are stored as they
are; it does not start or end with ``/``, and contains neither ``//`` nor ``..`` (a key may
become part of a file path: media artifacts). Queries quote such keys:
``metrics."val loss" < 0.5``. ``web/static/common.js`` does not check keys:
the server answers with this rule's message. A refused key's message names the part of the
rule it breaks (``'a//b' has '//'``), then states the whole rule (:data:`KEY_RULE`).
"""

from __future__ import annotations

import re

from tracker.errors import InvalidMetricKey

__all__ = ["KEY_RULE", "MAX_KEY_LENGTH", "check_key"]

MAX_KEY_LENGTH = 250
# The README's "Keys." paragraph states this rule in these words; keep the two the same.
KEY_RULE = (
    "keys are 1-250 characters of letters (any script), digits, '_ - . / :' and spaces; "
    "not starting or ending with '/'; no '//' or '..'"
)
_ALLOWED_RE = re.compile(r"[\w.\-/: ]")


def _broken_part(key: str) -> str | None:
    """Which part of the rule ``key`` breaks, in words (the first found), or None."""
    if not key:
        return "is empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"has {len(key)} characters"
    bad = [c for c in dict.fromkeys(key) if not _ALLOWED_RE.fullmatch(c)]
    if bad:
        listed = ", ".join(repr(c) for c in bad[:5])
        return f"has {'a character' if len(bad) == 1 else 'characters'} not allowed: {listed}"
    if key.startswith("/"):
        return "starts with '/'"
    if key.endswith("/"):
        return "ends with '/'"
    if "//" in key:
        return "has '//'"
    if ".." in key:
        return "has '..'"
    return None


def check_key(key: object) -> str:
    """Return the key if it follows the rule (``KEY_RULE``).

    Raises:
        InvalidMetricKey (a ``ValueError``): naming the key, the part of the rule it
            breaks (not a string, empty, too long, a character not allowed, a leading or
            trailing '/', '//' or '..') and then the whole rule.
    """
    if not isinstance(key, str):
        raise InvalidMetricKey(
            f"metric key {key!r} is not a string ({type(key).__name__}): {KEY_RULE}",
            field=repr(key),
        )
    problem = _broken_part(key)
    if problem is not None:
        raise InvalidMetricKey(f"metric key {key[:60]!r} {problem}: {KEY_RULE}", field=key[:60])
    return key
