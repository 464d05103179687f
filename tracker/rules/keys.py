"""Metric keys: the one rule every package checks them with (pure, no I/O).

A key is 1 to 250 characters of letters, digits, ``_ - . /``; it does not start or end with
``/``, and contains neither ``//`` nor ``..``. ``web/static/common.js`` does not check keys:
the server answers with this rule's message.
"""

from __future__ import annotations

import re

from tracker.errors import InvalidMetricKey

__all__ = ["KEY_RULE", "MAX_KEY_LENGTH", "check_key"]

MAX_KEY_LENGTH = 250
KEY_RULE = (
    "keys are 1-250 characters of letters, digits, '_', '-', '.', '/', "
    "not starting or ending with '/', without '//' or '..'"
)
_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*")


def check_key(key: object) -> str:
    """Return the key if it follows the rule, else raise InvalidMetricKey naming it."""
    if not isinstance(key, str):
        raise InvalidMetricKey(
            f"metric key {key!r} is a {type(key).__name__}: {KEY_RULE}", field=repr(key)
        )
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidMetricKey(
            f"metric key {key[:60]!r} has {len(key)} characters: {KEY_RULE}", field=key[:60]
        )
    if not _KEY_RE.fullmatch(key) or ".." in key:
        raise InvalidMetricKey(f"metric key {key!r} is not allowed: {KEY_RULE}", field=key)
    return key
