"""Browser-test fixtures: the real dashboard on a seeded SQLite store, served by a real HTTP
server in a thread (one per test module), driven by Debian's headless Chromium.

Every page a test opens is checked for uncaught script errors and Content-Security-Policy
violations; screenshots go to ``test-artifacts/screenshots/`` (gitignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import SCREENSHOTS, VIEWPORT, WAIT_MS, Dashboard
from tests.support.browser_seed import seed
from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path, launch_chromium
from tests.support.servers import ServerThread
from tracker.store import Store
from tracker.web.app import create_app


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard on a freshly seeded SQLite store, one per test module."""
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log in test output
    store_url = f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'tracker.db'}"
    store = Store(store_url)
    seeded = seed(store)
    app = create_app({"STORE_URI": store_url, "NO_AUTH": True})
    server = ServerThread(app)
    yield Dashboard(server.url, store_url, store, seeded)
    server.stop()
    app.extensions["tracker"].store.close()
    store.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


PROBLEMS = pytest.StashKey[list[str]]()  # what the page said, while the test ran
SEEN = pytest.StashKey[list[str]]()  # ... frozen when the test function returned


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Freeze the page's problems when the test body ends: what a live page says once the
    fixtures are torn down (a dashboard fixture stopped first, fetches aborted by closing
    the context: "the dashboard server cannot be reached") is not the page's defect."""
    try:
        return (yield)
    finally:
        if PROBLEMS in item.stash:
            item.stash[SEEN] = list(item.stash[PROBLEMS])


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page; fails the test on an uncaught script error or a CSP violation."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    request.node.stash[PROBLEMS] = problems
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))

    def on_console(message: Any) -> None:
        # 4xx answers the test provokes (a bad query) are logged as "Failed to load resource".
        if message.type == "error" and "Failed to load resource" not in message.text:
            problems.append(f"console: {message.text}")

    page.on("console", on_console)
    yield page
    seen = request.node.stash.get(SEEN, list(problems))  # see pytest_runtest_call
    context.close()
    if seen:
        pytest.fail("the page reported errors:\n" + "\n".join(seen))


@pytest.fixture
def screenshot() -> Callable[[Any, str], Path]:
    """Save a full-page screenshot as test-artifacts/screenshots/<name>.png."""

    def take(page: Any, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
