"""The workspace follows a running run: points a training process stores after the page
was drawn appear in every panel that charts them, without a reload; once every drawn run has
ended the page stops asking."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import Dashboard, sweep_dashboard
from tests.support.workspace_seed import LRS
from tracker.store.metrics import log_metrics
from tracker.store.runs import finish_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

DRAWN = "#ws-grid[data-drawn='1']"
STEPS = 200


@pytest.fixture()
def dashboard(tmp_path: Any) -> Iterator[Dashboard]:
    """6 runs (3 learning rates x 2 seeds) of STEPS steps; the last one still running."""
    with sweep_dashboard(
        tmp_path / "tracker.db", lrs=LRS[:3], seeds=2, steps=STEPS, running=1
    ) as d:
        yield d


def last_step_drawn(page: Any, key: str, run_id: int) -> float:
    """The largest x the panel of ``key`` draws for ``run_id`` (-1: none). A trace holds one
    colour's runs, broken by gaps; ``customdata[i]`` is the run id of point i."""
    return page.evaluate(
        """([key, run]) => {
            const chart = document.querySelector(`.ws-chart[data-key="${key}"]`);
            let best = -1;
            for (const t of chart.data) {
                if (!t.customdata) continue;
                t.x.forEach((x, i) => {
                    const cd = t.customdata[i];
                    if (cd === run && t.y[i] !== null && x > best) best = x;
                });
            }
            return best;
        }""",
        [key, run_id],
    )


def test_points_stored_after_the_first_draw_appear_in_the_panels(
    page: Any, dashboard: Dashboard
) -> None:
    running = dashboard.seeded.runs[f"lr{LRS[2]:g}-s1"]
    finished = dashboard.seeded.runs[f"lr{LRS[0]:g}-s0"]
    page.goto(f"{dashboard.url}/?project=sweep&ws=1")
    page.wait_for_selector(DRAWN, state="attached")
    assert last_step_drawn(page, "train/loss", running) == STEPS - 1
    assert last_step_drawn(page, "train/loss", finished) == STEPS - 1

    # the training process goes on: 100 more steps of train/loss, a val/loss every 10th
    for step in range(STEPS, STEPS + 100):
        values = {"train/loss": 0.1 + 0.01 * math.sin(step)}
        if step % 10 == 9:
            values["val/loss"] = 0.2
        log_metrics(dashboard.store, running, step, values)

    page.wait_for_function(
        """([run, want]) => {
            const chart = document.querySelector('.ws-chart[data-key="train/loss"]');
            return chart && chart.data.some(t => t.customdata && t.x.some(
                (x, i) => t.customdata[i] === run && x >= want));
        }""",
        arg=[running, STEPS + 90],
        timeout=30_000,
    )
    assert last_step_drawn(page, "val/loss", running) >= STEPS + 89
    # the finished run's line did not move
    assert last_step_drawn(page, "train/loss", finished) == STEPS - 1

    # the run ends: the next poll draws it as ended, then the page stops polling
    assert page.get_attribute("#ws-grid", "data-polling") == "1"
    finish_run(dashboard.store, running, "finished", exit_code=0)
    page.wait_for_function(
        "() => document.getElementById('ws-grid').dataset.polling === '0'", timeout=30_000
    )
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/workspace/" in r.url else None)
    page.wait_for_timeout(6_000)  # > one poll period: no request comes any more
    assert requests == [], requests
