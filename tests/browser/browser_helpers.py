"""Helpers for the browser tests: the server thread, bounded waits, where screenshots go."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_seed import Seeded

from tracker.store import Store

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
VIEWPORT = {"width": 1440, "height": 1000}
WAIT_MS = 15_000  # bounded waits for the page: generous, since CI machines can be slow


@dataclass
class Dashboard:
    url: str
    store_url: str
    store: Store
    seeded: Seeded


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = WAIT_MS / 1000) -> Any:
    """Poll ``predicate`` (outside the browser) until truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
