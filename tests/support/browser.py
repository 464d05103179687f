"""Helpers for the browser tests (tests/browser): bounded waits, where screenshots go."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.browser_seed import Seeded
from tests.support.polling import wait_for
from tracker.store import Store

REPO = Path(__file__).resolve().parents[2]
# Every page state a browser test looks at is saved here (TRACKER_SCREENSHOTS overrides it);
# scripts/refresh_tour.py copies the README's tour images from here into docs/screenshots.
SCREENSHOTS = Path(os.environ.get("TRACKER_SCREENSHOTS") or REPO / "test-artifacts" / "screenshots")
VIEWPORT = {"width": 1440, "height": 1000}
# Bounded waits for the page: generous, since CI machines can be slow; a machine under heavy
# load (the first page that loads plotly.js compiles it: tens of seconds at load 20) may set
# TRACKER_BROWSER_WAIT_MS higher.
WAIT_MS = int(os.environ.get("TRACKER_BROWSER_WAIT_MS") or 15_000)


@dataclass
class Dashboard:
    url: str
    store_url: str
    store: Store
    seeded: Seeded


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = WAIT_MS / 1000) -> Any:
    """Poll ``predicate`` (outside the browser) until truthy; fail after ``timeout`` seconds."""
    return wait_for(predicate, timeout, what)


@contextlib.contextmanager
def sweep_dashboard(db_path: Path, **seed: Any) -> Iterator[Dashboard]:
    """A dashboard (no auth) on a fresh SQLite store at ``db_path`` holding only a sweep
    (:func:`tests.support.workspace_seed.seed_sweep` with ``seed``'s arguments); skips the
    test where Chromium is missing."""
    import pytest

    from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path
    from tests.support.servers import ServerThread
    from tests.support.workspace_seed import seed_sweep
    from tracker.web.app import create_app

    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    store_url = f"sqlite:///{db_path}"
    store = Store(store_url)
    runs = seed_sweep(store, **seed)
    app = create_app({"STORE_URI": store_url, "NO_AUTH": True})
    server = ServerThread(app)
    try:
        yield Dashboard(server.url, store_url, store, Seeded(runs=runs))
    finally:
        server.stop()
        app.extensions["tracker"].store.close()
        store.close()
