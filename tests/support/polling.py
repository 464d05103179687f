"""The one bounded poll the tests share: import ``wait_for`` from here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    interval: float = 0.05,
    *,
    required: bool = True,
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail the test after
    ``timeout`` seconds, naming ``what`` it waited for. ``required=False``: return the last
    (falsy) value instead of failing (the caller checks what it needs from its data)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            if not required:
                return value
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
