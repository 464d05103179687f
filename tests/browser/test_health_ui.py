"""The doctor in the pages, in real Chromium: the Health panel on the run page, a marker
at the onset step on the diagnosed metric's chart, and a badge in the runs table."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Dashboard
from tracker.store.diagnoses import diagnose_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_health_panel_marker_and_badge(page: Any, dashboard: Dashboard, screenshot: Any) -> None:
    run_id = dashboard.seeded.runs["adam-lr1e-1-diverged"]
    found = diagnose_run(dashboard.store, run_id)
    nonfinite = [d for d in found if d.code == "nonfinite" and d.metric == "train/loss"]
    assert nonfinite and nonfinite[0].step == 420
    page.goto(f"{dashboard.url}/runs/{run_id}", timeout=60_000)  # plotly parses slowly on a busy CI
    panel = page.locator("#run-health")
    panel.locator('.health-item[data-code="nonfinite"]').first.wait_for()
    text = panel.inner_text()
    assert "NaN/Inf" in text and "at step 420" in text and "train/loss" in text
    assert "Try: Lower the learning rate" in text
    chart = page.locator('.chart-card[data-key="train/loss"] .chart')
    chart.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const el = document.querySelector('.chart-card[data-key=\"train/loss\"] .chart');"
        " return el && (el.dataset.healthMarkers || '').includes('nonfinite@420')"
        " && (el.layout.shapes || []).some(s => s.name === 'health' && s.x0 === 420); }"
    )
    # a redraw (log scale) keeps the marker
    page.check("#log-y")
    page.wait_for_function(
        "() => { const el = document.querySelector('.chart-card[data-key=\"train/loss\"] .chart');"
        " return el.layout.yaxis.type === 'log'"
        " && (el.layout.shapes || []).some(s => s.name === 'health' && s.x0 === 420); }"
    )
    page.uncheck("#log-y")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "run-diagnosed")
    healthy = dashboard.seeded.runs["adam-lr3e-4"]
    page.goto(f"{dashboard.url}/runs/{healthy}")
    page.wait_for_selector("#run-status .badge")
    assert page.locator("#run-health").is_hidden()
    page.goto(f"{dashboard.url}/?q=diagnosis%20%3D%3D%20nonfinite")
    badge = page.locator(".health-badge[data-code='nonfinite']")
    badge.first.wait_for()
    assert badge.count() == 1


def test_a_failed_run_says_how_it_ended_in_the_health_panel(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    """The panel agrees with the failure box: a run that failed with a clean series is not
    shown as healthy (no panel); warnings alone are amber, not red."""
    store = dashboard.store
    run = store.create_run("health", "gloo-failed")
    for step in range(30):
        store.log_metrics(run.id, step, {"train/loss": 1.0 / (step + 1)})
    hint = "a rank lost its peer: look at the other ranks' logs"
    store.finish_run(run.id, "failed", failure_class="gloo", failure_hint=hint)
    diagnose_run(store, run.id)
    page.goto(f"{dashboard.url}/runs/{run.id}", timeout=60_000)
    ended = page.locator("#run-health #health-ended")
    ended.wait_for()
    text = ended.inner_text()
    assert "failed" in text.lower() and "gloo" in text and hint in text
    assert "No problem found in its series." in text
    assert page.locator("#run-health").is_visible()
    screenshot(page, "run-failed-health")
