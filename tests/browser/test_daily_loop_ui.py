"""The daily loop in a real browser (issue 29): the pages at 800 px, dark mode (the system's
preference and the top bar's toggle, charts included), keyboard shortcuts, and the runs
table's CSV button."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import WAIT_MS, Dashboard

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROWS = "#runs-body tr[data-run-id]"
CHART = ".js-plotly-plot .scatterlayer .trace"
VIEW = "/?config=optimizer,lr,model.width&metrics=val/acc,train/loss,sys/gpu0/allocated_bytes"

# Elements past the viewport's right edge that no scrolling box holds: what a user at this
# width can neither see nor scroll to (the page itself must not scroll sideways).
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= width + 1 || scrolls(el)) continue;
    if (el.closest('dialog:not([open])')) continue;
    out.push(`${el.tagName.toLowerCase()}#${el.id}.${el.className} right=${Math.round(r.right)}`);
  }
  return { pageWidth: document.documentElement.scrollWidth, width, out: out.slice(0, 10) };
}"""


def row_ids(page: Any) -> list[int]:
    return [int(v) for v in page.eval_on_selector_all(ROWS, "rs => rs.map(r => r.dataset.runId)")]


def assert_nothing_cut(page: Any, where: str) -> None:
    facts = page.evaluate(OVERFLOW)
    assert facts["pageWidth"] <= facts["width"], f"{where}: the page scrolls sideways: {facts}"
    assert not facts["out"], f"{where}: out of view and out of reach: {facts['out']}"


def test_runs_and_other_pages_are_usable_at_800px(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(dashboard.url + VIEW)
    page.locator(ROWS).first.wait_for()
    names = page.eval_on_selector_all(
        f"{ROWS} td.name", "tds => tds.map(td => td.getBoundingClientRect().width)"
    )
    assert names and min(names) >= 120, names  # never one letter per line
    filter_width = page.eval_on_selector("#query-input", "el => el.getBoundingClientRect().width")
    assert filter_width >= 300
    metric_cut = page.eval_on_selector_all(
        f"{ROWS} td.col-metric, #runs-head th.col-metric",
        "cs => cs.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent)",
    )
    assert metric_cut == []  # metric values and headers whole
    wrap = page.eval_on_selector(
        ".table-wrap", "w => ({scroll: w.scrollWidth, client: w.clientWidth})"
    )
    assert wrap["scroll"] > wrap["client"]  # the table scrolls inside its box, not the page
    assert_nothing_cut(page, "runs")
    screenshot(page, "runs-800px")

    best = dashboard.seeded.runs["adam-lr3e-4"]
    others = ",".join(str(i) for i in list(dashboard.seeded.runs.values())[:3])
    for path, ready in (
        (f"/runs/{best}", CHART),
        (f"/compare?runs={others}", "#overlay-chart .trace"),
        ("/jobs", "#jobs-table tbody tr"),
    ):
        page.goto(dashboard.url + path)
        page.locator(ready).first.wait_for()
        assert_nothing_cut(page, path)


@pytest.fixture
def dark_page(browser: Any) -> Iterator[Any]:
    """A page in a browser whose system preference is dark; fails on script errors."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    yield page
    context.close()
    assert not problems, problems


# Recorded by the page itself when <body> first exists: before anything in it is painted.
THEME_AT_BODY = """
new MutationObserver((_m, obs) => {
  if (document.body) {
    window.__themeAtBody = document.documentElement.dataset.theme;
    obs.disconnect();
  }
}).observe(document, { childList: true, subtree: true });
"""

PLOT_COLOURS = """sel => { const gd = document.querySelector(sel);
  return { plot: gd._fullLayout.plot_bgcolor, font: gd._fullLayout.font.color,
           grid: gd._fullLayout.yaxis.gridcolor }; }"""


def test_dark_mode_follows_the_system_and_the_toggle(
    dark_page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page = dark_page
    page.add_init_script(THEME_AT_BODY)
    page.goto(f"{dashboard.url}/runs/{dashboard.seeded.runs['adam-lr3e-4']}")
    page.locator(CHART).first.wait_for()
    assert page.evaluate("window.__themeAtBody") == "dark"  # no light flash first
    assert page.locator("#theme-select").input_value() == "system"
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(11, 17, 32)"  # app.css's dark --bg
    chart = ".chart-card .js-plotly-plot"
    assert page.eval_on_selector(chart, "gd => gd._fullLayout.plot_bgcolor") == "#111827"
    screenshot(page, "run-dark")

    page.select_option("#theme-select", "light")  # the toggle wins over the system
    page.wait_for_function("document.documentElement.dataset.theme === 'light'")
    page.wait_for_function(
        "sel => document.querySelector(sel)._fullLayout.plot_bgcolor === '#ffffff'", arg=chart
    )  # the charts drawn dark were re-themed
    colours = page.evaluate(PLOT_COLOURS, chart)
    assert colours == {"plot": "#ffffff", "font": "#475569", "grid": "#eef2f7"}
    assert page.evaluate("localStorage.getItem('tracker.theme')") == "light"
    page.reload()
    page.locator(CHART).first.wait_for()
    assert page.evaluate("window.__themeAtBody") == "light"  # remembered, before paint
    assert page.eval_on_selector(chart, "gd => gd._fullLayout.plot_bgcolor") == "#ffffff"

    page.select_option("#theme-select", "dark")
    page.wait_for_function(
        "sel => document.querySelector(sel)._fullLayout.plot_bgcolor === '#111827'", arg=chart
    )
    page.select_option("#theme-select", "system")  # back to the system's (dark) preference
    assert page.evaluate("localStorage.getItem('tracker.theme')") is None
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"


def test_keyboard_shortcuts_on_the_runs_table(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + VIEW)
    page.locator(ROWS).first.wait_for()
    ids = row_ids(page)
    cursor = "#runs-body tr.kbd-cursor"

    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "query-input"
    page.keyboard.type("jjx")  # typed into the filter, not shortcuts
    assert page.locator(cursor).count() == 0
    assert page.input_value("#query-input") == "jjx"
    page.keyboard.press("Escape")  # leaves the filter; keys are shortcuts again
    page.fill("#query-input", "")
    page.evaluate("document.activeElement.blur()")

    page.keyboard.press("j")
    assert page.get_attribute(cursor, "data-run-id") == str(ids[0])
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert page.get_attribute(cursor, "data-run-id") == str(ids[1])
    page.keyboard.press("x")
    page.keyboard.press("k")
    page.keyboard.press("x")
    assert page.locator("#runs-body tr.selected").count() == 2
    assert page.inner_text("#selection-count") == "2 selected"

    page.keyboard.press("?")
    dialog = page.locator("#shortcuts-dialog")
    assert dialog.is_visible() and "Compare the selected runs" in dialog.inner_text()
    page.keyboard.press("j")  # keys go to the open dialog, not the table
    assert page.get_attribute(cursor, "data-run-id") == str(ids[0])
    page.keyboard.press("Escape")
    assert not dialog.is_visible()

    with page.expect_navigation():
        page.keyboard.press("c")
    assert page.url.endswith(f"/compare?runs={min(ids[:2])},{max(ids[:2])}")
    page.go_back()
    page.locator(ROWS).first.wait_for()
    page.keyboard.press("k")  # from no highlight: the last row
    assert page.get_attribute(cursor, "data-run-id") == str(ids[-1])
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(f"/runs/{ids[-1]}")


def test_csv_button_downloads_the_rows_and_columns_shown(
    page: Any, dashboard: Dashboard, tmp_path: Path
) -> None:
    page.goto(dashboard.url + VIEW + "&sort=metrics.val/acc&order=desc&limit=25")
    page.locator(ROWS).first.wait_for()
    page.fill("#query-input", 'config.optimizer == "adam"')
    page.press("#query-input", "Enter")
    # the view's columns name config.optimizer already: wait for the query's answer (the
    # link is set with the rows it answered, in one task)
    page.wait_for_function(
        "() => document.getElementById('csv-link').href.includes('q=config.optimizer')"
    )
    shown = row_ids(page)
    with page.expect_download() as info:
        page.click("#csv-link")
    download = info.value
    assert download.suggested_filename == "runs.csv"
    target = tmp_path / "runs.csv"
    download.save_as(target)
    rows = list(csv.reader(io.StringIO(target.read_text())))
    assert [int(r[0]) for r in rows[1:]] == shown and shown
    assert rows[0][-6:] == [
        "config.optimizer", "config.lr", "config.model.width",
        "metrics.val/acc", "metrics.train/loss", "metrics.sys/gpu0/allocated_bytes",
    ]  # fmt: skip
    assert {r[rows[0].index("config.optimizer")] for r in rows[1:]} == {"adam"}


def test_an_answer_for_an_older_view_does_not_replace_the_newer_one(
    page: Any, dashboard: Dashboard
) -> None:
    """The table's answer for the view asked first comes late (held here; a live refresh
    under way when the user filters is the same race): the filter typed meanwhile wins, and
    the rows agree with the CSV link."""
    held: list[Any] = []

    def hold_unfiltered(route: Any) -> None:
        if "q=" in route.request.url or held:
            route.continue_()
        else:
            held.append(route)  # let through below, once the filtered view is drawn

    page.goto(dashboard.url + VIEW)
    page.locator(ROWS).first.wait_for()
    everything = row_ids(page)
    page.route("**/api/v1/runs?*", hold_unfiltered)
    page.press("#query-input", "Enter")  # the unfiltered view again: its answer is held
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the unfiltered request never left the page"
    page.fill("#query-input", 'config.optimizer == "adam"')
    page.press("#query-input", "Enter")
    page.wait_for_function(
        f"n => document.querySelectorAll('{ROWS}').length < n", arg=len(everything),
        timeout=WAIT_MS,
    )  # fmt: skip
    filtered = row_ids(page)
    before = int(page.evaluate("() => Number(document.body.dataset.rowsAnswered || 0)"))
    held[0].continue_()  # the stale answer arrives now; the page handles it (or draws it)
    page.wait_for_function(
        "n => Number(document.body.dataset.rowsAnswered || 0) > n", arg=before, timeout=WAIT_MS
    )
    assert row_ids(page) == filtered and 0 < len(filtered) < len(everything)
    assert "optimizer" in (page.get_attribute("#csv-link", "href") or "")


def test_a_figure_of_a_trace_type_outside_the_partial_bundle_loads_the_full_one(
    page: Any, dashboard: Dashboard
) -> None:
    """The pages load plotly's partial bundle; a logged figure drawn with another trace type
    (here a polar scatter) loads the full bundle once and is drawn, not dropped."""
    from tracker.store.artifacts import put_artifact

    run_id = dashboard.seeded.runs["sgd-lr1e-2"]
    figure = {"data": [{"type": "scatterpolar", "r": [1, 2, 3], "theta": [0, 90, 180]}]}
    put_artifact(dashboard.store, run_id, f"media/figures/polar/{1:09d}.plotly.json",
                 json.dumps(figure).encode(), media_type="application/json", step=1)  # fmt: skip
    full_bundle = "[...document.scripts].filter(s => s.src.includes('/vendor/plotly.min.js'))"
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.locator(CHART).first.wait_for()
    assert page.evaluate(f"{full_bundle}.length") == 0  # the run's own charts: partial only
    page.click('.tab[data-tab="media"]')
    plot = '.media-card[data-key="polar"] .media-plot'
    page.wait_for_function(
        "sel => { const p = document.querySelector(sel); return p && p._fullLayout"
        " && p._fullLayout.polar && p.querySelector('.polarlayer .trace'); }",
        arg=plot,
    )
    assert page.evaluate(f"{full_bundle}.length") == 1
    page.click('.tab[data-tab="charts"]')  # the run's charts still redraw with the full one
    page.check("#log-y")
    page.wait_for_function(
        "() => document.querySelector('.chart-card .js-plotly-plot')._fullLayout.yaxis.type"
        " === 'log'"
    )
