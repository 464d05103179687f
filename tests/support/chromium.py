"""Launch the system's headless Chromium (Debian's `chromium` package) through Playwright.

Playwright's own browser download is never used: the tests drive the distribution's
binary, found on PATH. Without it the browser tests skip with NO_CHROMIUM_REASON.

In a conftest::

    from playwright.sync_api import sync_playwright
    from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path, launch_chromium

    @pytest.fixture(scope="session")
    def browser():
        if chromium_path() is None:
            pytest.skip(NO_CHROMIUM_REASON)
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            yield browser
            browser.close()
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

NO_CHROMIUM_REASON = (
    "no `chromium` on PATH: install it (Debian: apt-get install chromium) to run the browser tests"
)

# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
# The rest keep a test browser quiet and offline: no GPU, no QUIC, no first-run UI, and no
# background traffic (component updates, sync, field trials).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> str | None:
    """The Chromium executable on PATH, or None when there is none."""
    return shutil.which("chromium")


def launch_chromium(playwright: Playwright) -> Browser:
    """Launch headless Chromium from PATH; the caller closes the returned browser.

    Raises RuntimeError when there is no chromium on PATH (check chromium_path() first to
    skip instead), and Playwright's Error when the binary fails to start.
    """
    path = chromium_path()
    if path is None:
        raise RuntimeError(NO_CHROMIUM_REASON)
    return playwright.chromium.launch(executable_path=path, headless=True, args=list(CHROMIUM_ARGS))
