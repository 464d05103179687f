"""The run page's Logs tab shows (and follows) the console output of a run started by hand."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import tracker
from tests.support.browser import Dashboard

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_logs_tab_follows_a_direct_runs_console(page: Any, dashboard: Dashboard) -> None:
    run = tracker.init("digits", "by-hand", uri=dashboard.store_url, system_interval=None)
    try:
        print("epoch 1/3: loss 2.3", flush=True)
        print("warning: loader is slow", file=sys.stderr, flush=True)
        page.goto(f"{dashboard.url}/runs/{run.id}#logs")
        view = page.locator("#log-view")
        view.locator("text=epoch 1/3").wait_for()
        assert "warning: loader is slow" in view.locator(".log-stderr").inner_text()
        assert "started by hand" in page.locator("#log-job").inner_text()
        print("epoch 2/3: loss 1.7", flush=True)
        view.locator("text=epoch 2/3").wait_for()  # followed live, no reload
    finally:
        tracker.finish()
