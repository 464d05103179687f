"""The runs page's workspace in a real browser: 50 runs of a sweep (10 learning rates x 5
seeds) drawn in one panel per metric, a table row's hover highlighting its run in every
panel, group by ``config.lr`` (the 5 seeds form one band, "lr=0.01 (5 runs)"), and a named
view saved on the server and opened again from the URL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.browser import Dashboard, sweep_dashboard
from tests.support.workspace_seed import LRS
from tracker.store.views import list_views, view_events

pytestmark = [pytest.mark.slow, pytest.mark.browser]

DRAWN = "#ws-grid[data-drawn='1']"
RUNS = 50


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard on a store holding a 10 x 5 sweep (and nothing else)."""
    db = tmp_path_factory.mktemp("workspace") / "tracker.db"
    with sweep_dashboard(db, lrs=LRS[:10], seeds=5, steps=400) as dashboard:
        yield dashboard


def traces(page: Any) -> dict[str, list[dict[str, Any]]]:
    """Per panel (metric key), what its plot holds: per trace its name, role, runs (a line per
    run, broken by gaps: one trace per colour), colour, opacity and points."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('.ws-chart')].map(c => [
            c.dataset.key,
            c.data.map(t => ({
                name: t.name, role: t.meta.role, group: t.meta.group,
                runs: t.meta.runs || (t.meta.run ? [t.meta.run] : []), color: t.line.color,
                opacity: t.opacity === undefined ? 1 : t.opacity,
                points: (t.y || []).filter(v => v !== null).length}))]))"""
    )


def runs_drawn(found: list[dict[str, Any]]) -> list[int]:
    return sorted(r for t in found if t["role"] == "runs" for r in t["runs"])


def wait_drawn(page: Any) -> None:
    page.wait_for_selector(DRAWN, state="attached")


def test_workspace_draws_every_run_in_each_panel_and_follows_the_table(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    # a short table page (limit=8) under the panels: the workspace draws all 50 regardless
    page.goto(f"{dashboard.url}/?project=sweep&ws=1&limit=8")
    wait_drawn(page)
    drawn = traces(page)
    assert sorted(drawn) == ["train/loss", "val/acc", "val/loss"]
    for key, found in drawn.items():
        assert runs_drawn(found) == sorted(dashboard.seeded.runs.values()), key
        assert all(t["points"] > 0 for t in found), key
    assert page.locator("#ws-info").inner_text().startswith(f"showing {RUNS} of {RUNS} runs")
    assert page.locator("#runs-body tr").count() == 8
    page.wait_for_selector("#runs-body tr[data-run-id] .ws-swatch")
    screenshot(page, "workspace")
    # hovering a row of the table highlights that run in every panel
    run_id = dashboard.seeded.runs["lr1e-05-s2"]  # on the table's first page
    page.hover(f'#runs-body tr[data-run-id="{run_id}"] td.name')
    page.wait_for_function(
        "id => [...document.querySelectorAll('.ws-chart')].every(c => c.data.some("
        "t => t.meta.role === 'highlight' && t.meta.run === id && t.line.width === 3))",
        arg=run_id,
    )
    for found in traces(page).values():  # the others fade, the hovered run is drawn on top
        assert {t["opacity"] for t in found if t["role"] == "runs"} == {0.2}
        assert [t["runs"] for t in found if t["role"] == "highlight"] == [[run_id]]
    swatch = page.eval_on_selector(
        f'#runs-body tr[data-run-id="{run_id}"] .ws-swatch', "s => s.style.background"
    )
    line = page.evaluate(
        "id => document.querySelector('.ws-chart').data.find("
        "t => (t.meta.runs || []).includes(id)).line.color",
        run_id,
    )
    assert swatch.replace(" ", "") == _rgb(line)
    # and the other way: the mouse on a point of that run in a panel marks its row
    page.mouse.move(0, 0)
    x, y = page.evaluate(
        """id => {
            const chart = document.querySelector('.ws-chart');
            const t = chart.data.find((t) => t.meta.role === 'runs' && t.meta.runs.includes(id));
            const i = t.customdata.indexOf(id) + 20;  // a point of that run, inside the plot
            const xa = chart._fullLayout.xaxis, ya = chart._fullLayout.yaxis;
            const box = chart.getBoundingClientRect();
            return [box.left + xa._offset + xa.l2p(t.x[i]), box.top + ya._offset + ya.l2p(t.y[i])];
        }""",
        run_id,
    )
    page.evaluate(
        "() => document.querySelector('.ws-chart').on('plotly_hover',"
        " (ev) => { window.hoveredRun = ev.points[0].customdata; })"
    )
    page.mouse.move(x, y)
    page.wait_for_selector("#runs-body tr.ws-hover")
    hovered = page.evaluate("() => window.hoveredRun")  # that run, or one drawn on top of it
    assert hovered in dashboard.seeded.runs.values()
    assert page.locator("#runs-body tr.ws-hover").evaluate_all(
        "rows => rows.map((r) => Number(r.dataset.runId))"
    ) == [hovered]

    # Table hides the panels (and the swatches); Workspace brings them back, drawn again
    page.click("#view-table")
    assert page.locator("#workspace").is_hidden()
    assert page.locator("#runs-body .ws-swatch").count() == 0
    assert "ws=1" not in page.url
    page.click("#view-workspace")
    page.wait_for_selector("#runs-body .ws-swatch")
    wait_drawn(page)
    assert "ws=1" in page.url

    # the table's filter is the workspace's: 5 runs of one learning rate
    page.fill("#query-input", "config.lr == 0.01")
    page.press("#query-input", "Enter")
    page.wait_for_function(
        "() => document.querySelector('#ws-info').innerText.startsWith('showing 5 of 5 runs')"
    )
    wait_drawn(page)
    assert all(len(runs_drawn(found)) == 5 for found in traces(page).values())


def _rgb(hex_color: str) -> str:
    n = int(hex_color.lstrip("#"), 16)
    return f"rgb({n >> 16},{(n >> 8) & 255},{n & 255})"


def test_group_by_a_config_key_draws_bands_with_group_sizes_and_a_view_reopens_from_the_url(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/?project=sweep&ws=1&ws_filter=loss&ws_cols=2&limit=5")
    wait_drawn(page)
    assert sorted(traces(page)) == ["train/loss", "val/loss"]
    page.select_option("#ws-group", "config.lr")
    page.wait_for_selector(".ws-group-row")
    wait_drawn(page)
    rows = page.locator(".ws-group-row").all_inner_texts()
    assert len(rows) == 10
    assert all(r.strip().endswith("5 runs") for r in rows)
    centers = [t for t in traces(page)["train/loss"] if t["role"] == "center"]
    assert len(centers) == 10
    assert "lr=0.01 (5 runs)" in [t["name"] for t in centers]
    bands = [t for t in traces(page)["train/loss"] if t["role"] == "band-hi"]
    assert len(bands) == 10
    # a group expands to its members, in their colours
    first = page.locator(".ws-group-row").first
    first.locator("button").click()
    assert page.locator(".ws-members:not([hidden]) a").count() == 5
    screenshot(page, "workspace-groups")
    query = parse_qs(urlsplit(page.url).query)
    assert query["ws_group"] == ["config.lr"] and query["ws_filter"] == ["loss"]

    page.fill("#ws-view-name", "lr bands")
    page.click("#ws-save")
    page.wait_for_function("() => document.querySelector('#ws-views').selectedIndex > 0")
    (saved,) = list_views(dashboard.store, "sweep")
    assert saved.name == "lr bands" and saved.state["ws_group"] == "config.lr"
    assert view_events(dashboard.store)[0].action == "created"

    # a fresh page that names only the view gets its layout and the table's filter back
    page.goto(f"{dashboard.url}/?project=sweep&ws_view=lr%20bands")
    page.wait_for_url("**ws_group=config.lr**")
    page.wait_for_selector(".ws-group-row")
    wait_drawn(page)
    assert sorted(traces(page)) == ["train/loss", "val/loss"]
    assert page.locator(".ws-group-row").count() == 10
    assert page.input_value("#ws-group") == "config.lr"


@pytest.mark.parametrize("x", ["relative", "wall"])
def test_time_axes_and_smoothing_draw_every_run(page: Any, dashboard: Dashboard, x: str) -> None:
    page.goto(f"{dashboard.url}/?project=sweep&ws=1&ws_keys=train/loss&ws_x={x}&ws_smooth=0.6")
    wait_drawn(page)
    (found,) = traces(page).values()
    assert runs_drawn(found) == sorted(dashboard.seeded.runs.values())
    title = page.evaluate("() => document.querySelector('.ws-chart').layout.xaxis.title.text")
    assert title == ("wall time" if x == "wall" else "time since start (s)")
    assert page.input_value("#ws-x") == x and page.input_value("#ws-smooth") == "0.6"


@pytest.mark.parametrize("query", ["project=sweep&ws=1&limit=8", "ws=1&limit=8"])
def test_the_runs_page_asks_for_the_keys_once_at_load(
    page: Any, dashboard: Dashboard, query: str
) -> None:
    # the table's column picker and the workspace's panels both want the project's keys
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/v1/runs/columns" in r.url else None)
    page.goto(f"{dashboard.url}/?{query}")
    wait_drawn(page)
    page.wait_for_load_state("networkidle")
    assert len(asked) == 1, asked
