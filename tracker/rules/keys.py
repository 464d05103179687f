"""Metric keys: the one rule every package checks them with (pure, no I/O).

A key is 1 to 250 characters of letters (any script), digits, ``_ - . / :`` and spaces --
what MLflow accepts, so ``val loss`` and ``val:acc`` from an MLflow script are stored as they
are; it does not start or end with ``/``, and contains neither ``//`` nor ``..`` (a key may
become part of a file path: media artifacts). Queries quote such keys:
``metrics."val loss" < 0.5``. ``web/static/common.js`` does not check keys:
the server answers with this rule's message.
"""

from __future__ import annotations

import re

from tracker.errors import InvalidMetricKey

__all__ = ["KEY_RULE", "MAX_KEY_LENGTH", "check_key"]

MAX_KEY_LENGTH = 250
KEY_RULE = (
    "keys are 1-250 characters of letters, digits, '_', '-', '.', '/', ':' and spaces, "
    "not starting or ending with '/', without '//' or '..'"
)
_KEY_RE = re.compile(r"[\w.\-: ]+(?:/[\w.\-: ]+)*")


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
