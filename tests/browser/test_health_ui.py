"""The doctor in the pages, in real Chromium: the Health panel on the run page, a marker
at the onset step on the diagnosed metric's chart, and a chip in the runs table (coloured
by severity, with the onset step)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from tests.support.browser import Dashboard
from tracker.store.diagnoses import diagnose_run
from tracker.store.metrics import intern_keys, log_metrics, write_points
from tracker.store.runs import create_run, finish_run

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
    run = create_run(store, "health", "gloo-failed")
    for step in range(30):
        log_metrics(store, run.id, step, {"train/loss": 1.0 / (step + 1)})
    hint = "a rank lost its peer: look at the other ranks' logs"
    finish_run(store, run.id, "failed", failure_class="gloo", failure_hint=hint)
    diagnose_run(store, run.id)
    page.goto(f"{dashboard.url}/runs/{run.id}", timeout=60_000)
    ended = page.locator("#run-health #health-ended")
    ended.wait_for()
    text = ended.inner_text()
    assert "failed" in text.lower() and "gloo" in text and hint in text
    assert "No problem found in its series." in text
    assert page.locator("#run-health").is_visible()
    screenshot(page, "run-failed-health")


def test_runs_table_chips_carry_severity_colour_and_onset_step(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    """A warning chip is amber and an error chip red (the Health panel's colours), each says
    its onset step ("loss spike @1200") and gives the message as its tooltip."""
    store = dashboard.store
    diverged = dashboard.seeded.runs["adam-lr1e-1-diverged"]
    [nonfinite] = [d for d in diagnose_run(store, diverged) if d.key == "nonfinite:train/loss"]
    assert (nonfinite.severity, nonfinite.step) == ("error", 420)
    spiky = create_run(store, "chips", "spiky")
    [key] = intern_keys(store, {"train/loss": 0.0}).values()
    wall = int(time.time() * 1000)
    loss = [2.0 * math.exp(-s / 400) + 0.3 + 0.02 * math.sin(s) for s in range(1500)]
    loss[1200] *= 8  # one bad batch: a loss spike, a warning
    write_points(store, [(spiky.id, key, s, wall + s, v) for s, v in enumerate(loss)])
    finish_run(store, spiky.id, "finished")
    found = diagnose_run(store, spiky.id)
    assert [(d.code, d.severity, d.step) for d in found] == [("loss_spike", "warning", 1200)]

    page.goto(f"{dashboard.url}/?q=diagnosis%20!%3D%20null", timeout=60_000)
    warning = page.locator(f"#runs-body tr:has(a[href='/runs/{spiky.id}']) .health-badge")
    error = page.locator(f"#runs-body tr:has(a[href='/runs/{diverged}']) .health-badge")
    warning.first.wait_for()
    error.first.wait_for()
    assert warning.count() == 1 and warning.inner_text() == "loss spike @1200"
    assert warning.get_attribute("class") == "health-badge warning"
    assert warning.get_attribute("data-step") == "1200"
    assert warning.get_attribute("title").startswith("warning at step 1200: train/loss")
    chip = error.and_(page.locator("[data-code='nonfinite']"))
    assert chip.inner_text() == "NaN/Inf @420" and "error" in chip.get_attribute("class").split()
    assert chip.get_attribute("title").startswith(f"error at step 420: {nonfinite.message}")
    colours = page.evaluate(
        "els => els.map(e => { const s = getComputedStyle(e);"
        " return [s.borderLeftColor, s.color]; })",
        [warning.element_handle(), chip.element_handle()],
    )
    assert colours == [
        ["rgb(245, 158, 11)", "rgb(146, 64, 14)"],  # amber: #f59e0b, as the panel's warning
        ["rgb(220, 38, 38)", "rgb(185, 28, 28)"],  # red: #dc2626, as the panel's error
    ]
    screenshot(page, "runs-health-chips")


def test_a_chart_spanning_many_decades_draws_log_y_with_its_marker_visible(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    """A loss that diverged to 1e25: on a linear axis everything before the blow-up is a flat
    line at zero and the doctor's marker sits on nothing visible. The chart draws itself on a
    log y axis (Log y still off, said on the axis), the divergence marker at its onset; a
    chart of an ordinary range stays linear."""
    store = dashboard.store
    run = create_run(store, "decades", "blew-up")
    [key] = intern_keys(store, {"train/loss": 0.0}).values()
    wall = int(time.time() * 1000)
    loss = [2.0 * math.exp(-s / 100) + 0.3 + 0.01 * math.sin(s) for s in range(600)]
    loss += [0.3 * 10 ** (s / 4) for s in range(1, 101)]  # from step 600 to 0.3e25
    write_points(store, [(run.id, key, s, wall + s, v) for s, v in enumerate(loss)])
    finish_run(store, run.id, "finished")
    [found] = [d for d in diagnose_run(store, run.id) if d.code == "divergence"]
    page.goto(f"{dashboard.url}/runs/{run.id}", timeout=60_000)
    chart = "document.querySelector('.chart-card[data-key=\"train/loss\"] .chart')"
    page.wait_for_function(
        f"step => {{ const el = {chart};"
        " return el && el.layout && el.layout.yaxis.type === 'log' && el.dataset.autoLogY === '1'"
        " && (el.layout.shapes || []).some(s => s.name === 'health' && s.x0 === step); }",
        arg=found.step,
    )
    panel = page.locator("#run-health")
    panel.locator('.health-item[data-code="divergence"]').wait_for()
    assert "null" not in panel.inner_text()  # a finished run has no failure box to show
    assert not page.is_checked("#log-y")
    title = page.evaluate(
        "() => document.querySelector('.chart-card[data-key=\"train/loss\"] .chart')"
        ".layout.yaxis.title.text"
    )
    assert "log" in title and "decades" in title
    screenshot(page, "run-diverged-log-y")
    ordinary = dashboard.seeded.runs["adam-lr3e-4"]
    page.goto(f"{dashboard.url}/runs/{ordinary}", timeout=60_000)
    page.wait_for_function(
        "() => { const el = document.querySelector('.chart-card[data-key=\"train/loss\"] .chart');"
        " return el && el.layout && el.layout.yaxis.type === 'linear'; }"
    )


def test_an_amp_collapse_has_its_own_diagnosis_and_hint_and_a_healthy_run_no_panel(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    """What ``watch(scaler=...)`` logs when every fp16 step overflows from step 60 on (the
    scale halved at each skipped step, down past 1): the panel names the AMP collapse with
    its own hint, not a generic NaN with "lower the learning rate". A healthy run the final
    pass found nothing in has no Health panel at all (both pages kept as screenshots)."""
    store = dashboard.store
    run = create_run(store, "health", "amp-collapsed")
    scale, skipped = 65536.0, 0
    for step in range(120):
        metrics = {"train/loss": 2.0 * math.exp(-step / 60) + 0.3}
        if step >= 60:  # every step overflows: skipped, the scale halved
            scale, skipped = scale / 2, skipped + 1
        if step >= 60 or step % 10 == 9:
            metrics.update({"amp/loss_scale": scale, "amp/skipped_steps": skipped})
        log_metrics(store, run.id, step, metrics)
    finish_run(store, run.id, "finished")
    [collapse] = [d for d in diagnose_run(store, run.id) if d.code == "amp_scale_collapse"]
    assert collapse.severity == "error" and 60 <= (collapse.step or 0) <= 70
    page.goto(f"{dashboard.url}/runs/{run.id}", timeout=60_000)
    panel = page.locator("#run-health")
    panel.locator('.health-item[data-code="amp_scale_collapse"]').first.wait_for()
    text = panel.inner_text()
    assert "loss scale collapsed" in text and "an op that overflows in fp16" in text
    assert panel.locator('.health-item[data-code="nonfinite"]').count() == 0  # not a NaN
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "run-amp-collapse")

    healthy = create_run(store, "health", "healthy").id
    for step in range(300):
        loss = 2.0 * math.exp(-step / 80) + 0.3 + 0.01 * math.sin(step)
        log_metrics(store, healthy, step, {"train/loss": loss, "sys/rss_bytes": 2.0e9})
    finish_run(store, healthy, "finished")
    assert diagnose_run(store, healthy) == []  # the final pass ran and found nothing
    page.goto(f"{dashboard.url}/runs/{healthy}", timeout=60_000)
    page.wait_for_selector("#run-status .badge")
    page.locator('.chart-card[data-key="train/loss"] .chart .main-svg').first.wait_for()
    assert page.locator("#run-health").is_hidden()
    screenshot(page, "run-healthy")
