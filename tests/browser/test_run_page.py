"""The run page in a real browser: charts drawn from the downsampled series (band + line,
NaN/Inf marks), zoom re-queries the window, smoothing, the config tree, checkpoints, events,
a live run whose chart gains points while a thread logs them, and a job's logs tailed live."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import tracker
from tests.support.browser import Dashboard
from tracker.store import logs
from tracker.store.metrics import metric_keys

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CARD = '.chart-card[data-key="{}"]'
# Traces of one metric chart without smoothing: band low edge, band high edge, last value.
BAND_AND_LINE = 3


def card(page: Any, key: str) -> Any:
    return page.locator(CARD.format(key))


def svg_traces(page: Any, key: str) -> int:
    """Traces plotly rendered into the chart's SVG (one <g class="trace"> per trace)."""
    return card(page, key).locator(".scatterlayer .trace").count()


def plotted_points(page: Any, key: str, role: str = "last") -> int:
    """Points of the trace with ``role`` that plotly holds for the chart of ``key``."""
    return page.evaluate(
        "([sel, role]) => { const el = document.querySelector(sel + ' .chart');"
        " const t = (el.data || []).find(t => t.meta && t.meta.role === role);"
        " return t ? t.x.length : -1; }",
        [CARD.format(key), role],
    )


def wait_for_chart(page: Any, key: str) -> None:
    card(page, key).scroll_into_view_if_needed()
    card(page, key).locator(".main-svg .scatterlayer .trace").first.wait_for()


def draw_all_charts(page: Any) -> None:
    """Charts are drawn when scrolled near: scroll down, wait for all, scroll back up."""
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.chart-card:not([hidden]) .chart')]"
        ".every(c => c.querySelector('.main-svg'))"
    )
    page.evaluate("window.scrollTo(0, 0)")


def test_charts_are_drawn_as_band_and_line_grouped_by_prefix(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    run_id = dashboard.seeded.runs["adam-lr3e-4"]
    keys = metric_keys(dashboard.store, run_id)
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.wait_for_selector("#run-status .badge.status-finished")
    # the groups are laid out once the run's metric keys have come (after the header)
    page.wait_for_function("() => document.querySelectorAll('section.chart-group').length >= 3")
    groups = page.eval_on_selector_all("section.chart-group", "s => s.map(x => x.dataset.group)")
    assert groups == ["train", "val", "sys"]
    for key in ("train/loss", "train/acc", "val/acc", "val/loss"):
        assert key in keys
        wait_for_chart(page, key)
        assert svg_traces(page, key) == BAND_AND_LINE, key
    # 3000 steps come back as 1000 buckets: min..max band plus the last value of each bucket.
    assert plotted_points(page, "train/loss") == 1000
    assert plotted_points(page, "train/loss", "band-max") == 1000
    gpu = page.locator('.chart-card[data-kind="gpu"]')
    gpu.scroll_into_view_if_needed()
    gpu.locator(".scatterlayer .trace").first.wait_for()
    gpu_keys = [k for k in keys if k.startswith("sys/gpu")]
    assert len(gpu_keys) == 6  # allocated, reserved, peak on two devices
    assert gpu.locator(".scatterlayer .trace").count() == len(gpu_keys)
    legend = gpu.locator(".legend .legendtext").all_text_contents()
    assert "gpu1 reserved" in legend and "gpu0 peak" in legend
    cpu = page.locator('.chart-card[data-kind="cpu"]')
    cpu.locator(".scatterlayer .trace").first.wait_for()
    assert cpu.locator(".scatterlayer .trace").count() == 2  # CPU % and RSS
    draw_all_charts(page)
    screenshot(page, "run")


def test_nonfinite_values_are_marked(page: Any, dashboard: Dashboard, screenshot: Any) -> None:
    run_id = dashboard.seeded.runs["adam-lr1e-1-diverged"]
    page.goto(f"{dashboard.url}/runs/{run_id}")
    wait_for_chart(page, "train/loss")
    assert svg_traces(page, "train/loss") == BAND_AND_LINE + 1  # + the NaN/Inf marks
    assert plotted_points(page, "train/loss", "nonfinite") == 600 - 420  # steps 420..599
    assert card(page, "train/loss").locator(".nonfinite-flag").inner_text() == "180 NaN/Inf"
    assert svg_traces(page, "train/acc") == BAND_AND_LINE
    failure = page.locator("#run-failure")
    assert "nonfinite_loss" in failure.inner_text() and "lower the learning rate" in (
        failure.inner_text()
    )
    draw_all_charts(page)
    screenshot(page, "run-diverged")


def test_zoom_requeries_the_visible_range_at_full_resolution(
    page: Any, dashboard: Dashboard
) -> None:
    run_id = dashboard.seeded.runs["adam-lr3e-4"]
    page.goto(f"{dashboard.url}/runs/{run_id}")
    wait_for_chart(page, "train/loss")
    with page.expect_response(lambda r: "/series?" in r.url and "lo=100" in r.url) as answer:
        page.evaluate(
            "sel => Plotly.relayout(document.querySelector(sel + ' .chart'),"
            " {'xaxis.range[0]': 100, 'xaxis.range[1]': 300})",
            CARD.format("train/loss"),
        )
    payload = answer.value.json()["series"][0]
    assert (payload["lo"], payload["hi"], payload["resolution"]) == (100, 300, "full")
    page.wait_for_function(
        "sel => document.querySelector(sel + ' .chart').data[2].x.length === 201",
        arg=CARD.format("train/loss"),
    )
    with page.expect_response(lambda r: "/series?" in r.url and "lo=" not in r.url):
        page.evaluate(
            "sel => Plotly.relayout(document.querySelector(sel + ' .chart'),"
            " {'xaxis.autorange': true})",
            CARD.format("train/loss"),
        )
    page.wait_for_function(
        "sel => document.querySelector(sel + ' .chart').data[2].x.length === 1000",
        arg=CARD.format("train/loss"),
    )


def test_smoothing_log_y_and_time_axis(page: Any, dashboard: Dashboard) -> None:
    run_id = dashboard.seeded.runs["adam-lr3e-4"]
    page.goto(f"{dashboard.url}/runs/{run_id}")
    wait_for_chart(page, "train/loss")
    page.locator("#smoothing").fill("0.9")
    # Smoothed line on top of the raw line, which stays, faint, behind it.
    page.wait_for_function(
        "sel => document.querySelectorAll(sel + ' .scatterlayer .trace').length === 4",
        arg=CARD.format("train/loss"),
    )
    raw_opacity = page.evaluate(
        "sel => document.querySelector(sel + ' .chart').data[2].opacity", CARD.format("train/loss")
    )
    assert raw_opacity < 1
    page.check("#log-y")
    page.wait_for_function(
        "sel => document.querySelector(sel + ' .chart').layout.yaxis.type === 'log'",
        arg=CARD.format("train/loss"),
    )
    page.select_option("#x-axis", "wall")
    page.wait_for_function(
        "sel => document.querySelector(sel + ' .chart').layout.xaxis.type === 'date'",
        arg=CARD.format("train/loss"),
    )
    page.select_option("#x-axis", "relative")
    page.wait_for_function(
        "sel => document.querySelector(sel + ' .chart').layout.xaxis.title.text"
        ".startsWith('time since start')",
        arg=CARD.format("train/loss"),
    )


def test_config_tree_checkpoints_and_events_tabs(page: Any, dashboard: Dashboard) -> None:
    run_id = dashboard.seeded.runs["adam-lr3e-4"]
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.wait_for_selector("#run-status .badge")
    page.click('.tab[data-tab="config"]')
    tree = page.locator("#config-tree")
    model = tree.locator("details", has_text="model").first
    assert "width: 64" in model.inner_text().replace("\n", " ")
    model.locator("summary").first.click()  # collapsible
    # the same details the locator clicked (the first holding "model"), read again until
    # closed: a CI run read the attribute before the toggle showed
    page.wait_for_function(
        "() => { const d = [...document.querySelectorAll('#config-tree details')]"
        ".find(e => e.textContent.toLowerCase().includes('model')); return d && !d.open; }",
        timeout=10_000,
    )
    page.click('.tab[data-tab="checkpoints"]')
    rows = page.locator("#checkpoints-table tbody tr")
    rows.first.wait_for()
    assert rows.count() == 2
    assert rows.first.locator("td").first.inner_text() == "2999"  # newest first
    href = rows.first.locator("a").get_attribute("href")
    assert href is not None and href.endswith("/download")
    page.click('.tab[data-tab="events"]')
    assert "run finished" in page.locator("#events-table tbody").inner_text()


def test_live_run_chart_gains_points_without_reload(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    run = tracker.init(
        "digits", "live-demo", {"lr": 0.01}, uri=dashboard.store_url,
        system_interval=None, flush_interval=0.05,
    )  # fmt: skip
    try:
        for step in range(20):
            tracker.log({"train/loss": 1.0 / (step + 1)}, step=step)
        tracker.flush()
        page.goto(f"{dashboard.url}/runs/{run.id}")
        page.wait_for_selector("#live-indicator:not([hidden])")
        wait_for_chart(page, "train/loss")
        assert plotted_points(page, "train/loss") == 20
        page.evaluate("window.__marker = 'same page'")  # gone if the page reloads
        new_ranges: list[str] = []
        page.on("request", lambda r: "/series?" in r.url and new_ranges.append(r.url))

        def train() -> None:
            for step in range(20, 60):
                tracker.log({"train/loss": 1.0 / (step + 1)}, step=step)
            tracker.flush()

        writer = threading.Thread(target=train)
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive()
        page.wait_for_function(
            "sel => { const el = document.querySelector(sel + ' .chart');"
            " return el.data && el.data[2].x.length === 60; }",
            arg=CARD.format("train/loss"),
        )
        assert page.evaluate("window.__marker") == "same page"
        assert any("lo=20" in url for url in new_ranges), new_ranges  # only the new steps
        screenshot(page, "run-live")
    finally:
        tracker.finish()
    page.wait_for_selector("#run-status .badge.status-finished")
    assert page.locator("#live-indicator").is_hidden()


def test_logs_tab_tails_the_job_output_live(page: Any, dashboard: Dashboard) -> None:
    run_id = dashboard.seeded.runs["adam-live"]
    claim = dashboard.seeded.claims["running"]
    page.goto(f"{dashboard.url}/runs/{run_id}#logs")
    view = page.locator("#log-view")
    view.locator("text=epoch 1/10").wait_for()
    assert "warning: slow loader" in view.locator(".log-stderr").inner_text()
    assert logs.append(dashboard.store, claim, [("stdout", time.time(), "epoch 2/10: loss 1.7\n")])
    view.locator("text=epoch 2/10").wait_for()
    assert f"output of job {claim.job.id}" in page.locator("#log-job").inner_text()
