"""User strings in charts stay text (issue 9): plotly renders names, titles, hover text and
tick labels as its own pseudo-HTML, so a run named ``<a href="https://evil.example">x</a>``
became a live link in the compare chart's legend. Every chart must show it as written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Dashboard
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

LINK = '<a href="https://evil.example">x</a>'
BOLD = "<b>bold</b> & co"
VALUE = '<a href="https://evil.example/v">v</a>'  # a config value: a category tick label


@pytest.fixture(scope="module")
def markup_runs(dashboard: Dashboard) -> list[int]:
    store = dashboard.store
    ids = []
    for i, name in enumerate((LINK, BOLD)):
        run = create_run(store, "markup", name, {"opt": VALUE if i == 0 else "plain", "i": i})
        for step in range(3):
            log_metrics(store, run.id, step, {"val/acc": 0.1 * step + i, "train/loss": 1.0 - i})
        ids.append(run.id)
    return ids


def no_live_markup(page: Any) -> None:
    """No link and no bold text that plotly built from a user string, in any plot."""
    found = page.evaluate(
        """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => ({
            links: [...p.querySelectorAll('a')].map(a => a.getAttribute('href') || ''),
            bold: [...p.querySelectorAll('tspan')].filter(
                t => (t.getAttribute('style') || '').includes('bold') && t.textContent === 'bold'
            ).length,
        }))"""
    )
    assert found, "no plot on the page"
    for plot in found:
        assert not [h for h in plot["links"] if "evil.example" in h], plot
        assert plot["bold"] == 0, plot


def test_run_names_with_markup_are_text_in_every_compare_chart(
    page: Any, dashboard: Dashboard, markup_runs: list[int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/compare?runs={','.join(map(str, markup_runs))}")
    overlay = page.locator("#overlay-chart")
    overlay.locator(".legendtext").first.wait_for()
    legend = overlay.locator(".legendtext").all_text_contents()
    expected = [f"{LINK} #{markup_runs[0]}", f"{BOLD} #{markup_runs[1]}"]
    assert legend == expected

    # Scatter: a config key against a metric; the config value is a category tick label.
    page.wait_for_function("() => document.querySelector('#scatter-chart').dataset.points === '2'")
    page.select_option("#scatter-x", "opt")
    ticks_js = "() => [...document.querySelectorAll('#scatter-chart g.xtick text')]"
    page.wait_for_function(f"{ticks_js}.length === 2")  # drawn (it is cleared while loading)
    ticks = page.evaluate(f"() => ({ticks_js})().map(t => t.textContent)")
    assert VALUE in ticks, ticks
    hover = page.evaluate(
        """() => {
            const plot = document.querySelector('#scatter-chart');
            Plotly.Fx.hover(plot, [{curveNumber: 0, pointNumber: 0}]);
            return [...plot.querySelectorAll('.hovertext text')].map(t => t.textContent);
        }"""
    )
    assert any(LINK in text or BOLD in text for text in hover), hover
    no_live_markup(page)
    screenshot(page, "compare-markup")


def test_run_page_charts_show_no_markup(
    page: Any, dashboard: Dashboard, markup_runs: list[int]
) -> None:
    page.goto(f"{dashboard.url}/runs/{markup_runs[0]}")
    page.locator(".js-plotly-plot .scatterlayer .trace").first.wait_for(state="attached")
    assert LINK in page.title()  # the page title is text, not markup
    no_live_markup(page)
