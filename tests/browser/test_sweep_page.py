"""The sweeps pages in a real browser: a sweep that learns whose trials ran through the real
queue (five complete, one the median pruner stopped, one queued), listed on /sweeps; its page
shows every trial, the four charts drawn from the stored data (objective by trial with the
best so far, parameter importance, parallel coordinates, learning curves with the pruned
trial dashed and marked where it stopped), and its Stop button stops it in the store."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.browser_seed import Seeded
from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path
from tests.support.servers import ServerThread
from tracker.entities import Failure, JobSpec
from tracker.rules.sweep_search import SweepSettings
from tracker.store import Store, queue, sweeps
from tracker.store.jobs import get_job
from tracker.store.metrics import log_metrics
from tracker.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]
pytest.importorskip("optuna")

SPEC = JobSpec(argv=["python", "train.py"], project="sweeps", config={"lr": 0.1, "width": 32})


def _claim(store: Store) -> Any:
    got = queue.claim(store, "gpu-node-01:1", lease_s=600)
    assert got is not None
    return got[0]


def _drive(store: Store) -> int:
    """A sweep of 8 trials: 5 complete (val/loss falling over 6 steps), the 6th pruned at its
    first step, the 7th queued. Returns the sweep's id."""
    settings = SweepSettings(method="tpe", metric="val/loss", goal="minimize", trials=8,
                             parallel=1, prune="median", seed=7)  # fmt: skip
    space = ["lr=loguniform(1e-4,1e-1)", "width=32,64", "epochs=6"]
    sweep = sweeps.create_sweep(store, SPEC, space, settings, name="lr and width search")
    for n in range(5):
        sweeps.control_once(store)
        claim = _claim(store)
        for step in range(6):
            log_metrics(store, claim.run_id, step, {"val/loss": (1.0 + 0.3 * n) / (step + 1)})
        queue.finish(store, claim, exit_code=0, failure=None)
    sweeps.control_once(store)
    claim = _claim(store)
    for step in range(3):
        log_metrics(store, claim.run_id, step, {"val/loss": 40.0 - step})
    sweeps.control_once(store)
    queue.finish(store, claim, exit_code=None, failure=Failure("cancelled", "stopped"))
    sweeps.control_once(store)
    found = sweeps.trials(store, sweep.id)
    assert [t.state for t in found] == ["complete"] * 5 + ["pruned", "running"], found
    return sweep.id


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard on a fresh SQLite store holding one sweep driven through the queue."""
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    store_url = f"sqlite:///{tmp_path_factory.mktemp('sweeps') / 'tracker.db'}"
    store = Store(store_url)
    sweep_id = _drive(store)
    app = create_app({"STORE_URI": store_url, "NO_AUTH": True})
    server = ServerThread(app)
    yield Dashboard(server.url, store_url, store, Seeded(runs={"sweep": sweep_id}))
    server.stop()
    app.extensions["tracker"].store.close()
    store.close()


def _answered(page: Any, attr: str, after: int = 0) -> int:
    page.wait_for_function(
        f"n => Number(document.body.dataset.{attr} || 0) > n", arg=after
    )  # fmt: skip
    return int(page.evaluate(f"() => Number(document.body.dataset.{attr})"))


def _plot_data(page: Any, selector: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = page.eval_on_selector(
        selector,
        "el => (el.data || []).map(t => ({name: t.name, type: t.type, n: (t.x || []).length,"
        " dash: t.line && t.line.dash, symbol: t.marker && t.marker.symbol}))",
    )
    return data


def test_the_list_shows_the_sweep(page: Any, dashboard: Dashboard) -> None:
    sweep_id = dashboard.seeded.runs["sweep"]
    page.goto(f"{dashboard.url}/sweeps")
    _answered(page, "sweepsAnswered")
    row = page.locator(f"#sweep-{sweep_id}")
    assert "lr and width search" in row.inner_text()
    assert row.locator("td.trials-done").inner_text() == "6/8"
    assert row.locator("td.best").inner_text() == "0.1667"  # 1.0 / 6 at trial 0's last step
    assert page.locator("nav a.active").inner_text() == "Sweeps"
    page.click(f"#sweep-{sweep_id} a.sweep-link")
    page.wait_for_url(f"**/sweeps/{sweep_id}")


def test_the_sweep_page_shows_trials_and_its_four_charts(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    sweep_id = dashboard.seeded.runs["sweep"]
    page.goto(f"{dashboard.url}/sweeps/{sweep_id}")
    _answered(page, "sweepAnswered")
    rows = page.locator("#trials-table tbody tr")
    assert rows.count() == 7
    states = page.eval_on_selector_all(
        "#trials-table tbody tr", "rs => rs.map(r => r.dataset.state)"
    )
    assert states == ["complete"] * 5 + ["pruned", "running"]
    pruned = page.locator("#trial-5")
    assert "pruned" in pruned.inner_text() and "at step 0" in pruned.inner_text()
    trial = sweeps.trials(dashboard.store, sweep_id)[0]
    first = page.locator("#trial-0")
    assert f"#{trial.job_id}" in first.inner_text() and f"#{trial.run_id}" in first.inner_text()
    assert first.locator(f'a[href="/runs/{trial.run_id}"]').count() == 1
    assert "width=" in first.inner_text() and "lr=" in first.inner_text()

    objective = _plot_data(page, "#objective-chart")
    names = {t["name"]: t for t in objective}
    assert names["complete"]["n"] == 5 and names["best so far"]["n"] == 5
    assert names["pruned"]["n"] == 1 and names["pruned"]["symbol"] == "x"
    importance = _plot_data(page, "#importance-chart")
    assert importance[0]["type"] == "bar" and importance[0]["n"] == 2  # lr and width
    parcoords = page.locator("#parcoords-chart")
    assert parcoords.get_attribute("data-lines") == "5"
    assert parcoords.locator("svg polyline").count() == 5
    curves = _plot_data(page, "#curves-chart")
    by_name = {t["name"]: t for t in curves}
    assert {f"trial {n}" for n in range(5)} <= set(by_name)
    assert by_name["trial 5 (pruned)"]["dash"] == "dash" and by_name["trial 5 (pruned)"]["n"] == 3
    assert by_name["trial 0"]["dash"] == "solid" and by_name["trial 0"]["n"] == 6
    assert by_name["pruned here"]["n"] == 1 and by_name["pruned here"]["symbol"] == "x"
    assert page.locator("#curves-chart").get_attribute("data-prune-marks") == "1"
    screenshot(page, "sweep")


def test_stop_stops_the_sweep_in_the_store(page: Any, dashboard: Dashboard) -> None:
    sweep_id = dashboard.seeded.runs["sweep"]
    page.goto(f"{dashboard.url}/sweeps/{sweep_id}")
    _answered(page, "sweepAnswered")
    assert page.locator("#sweep-resume").is_hidden()
    page.click("#sweep-stop")
    page.wait_for_selector('body[data-sweep-status="stopped"]')
    assert sweeps.get_sweep(dashboard.store, sweep_id).status == "stopped"
    last = sweeps.trials(dashboard.store, sweep_id)[-1]
    assert wait_until(
        lambda: get_job(dashboard.store, last.job_id).status == "cancelled",
        "the queued trial's job cancelled",
    )
    page.locator("#sweep-resume").wait_for(state="visible")
    assert page.locator("#sweep-stop").is_hidden()
    assert page.locator("#sweep-status .badge").inner_text() == "stopped"


def test_the_clone_editor_starts_a_sweep_that_learns(page: Any, dashboard: Dashboard) -> None:
    source = sweeps.trials(dashboard.store, dashboard.seeded.runs["sweep"])[0]
    before = {s.id for s in sweeps.list_sweeps(dashboard.store)}
    page.goto(f"{dashboard.url}/jobs?clone_job={source.job_id}")
    page.locator("#clone-dialog").wait_for(state="visible")
    page.check("#clone-learn-on")
    assert page.locator("#clone-submit").inner_text() == "Start sweep"
    page.fill('#clone-rows input[name="sweep:lr"]', "loguniform(1e-4,1e-2)")
    page.select_option("#clone-learn-method", "random")
    page.fill("#clone-learn-trials", "3")
    page.click("#clone-submit")  # no metric: the server names the field, nothing is stored
    error = page.locator("#clone-error")
    error.wait_for(state="visible")
    assert error.inner_text().startswith("metric:")
    assert {s.id for s in sweeps.list_sweeps(dashboard.store)} == before
    page.fill("#clone-learn-metric", "val/loss")
    page.click("#clone-submit")
    page.wait_for_url("**/sweeps/*")
    (new,) = [s for s in sweeps.list_sweeps(dashboard.store) if s.id not in before]
    assert page.url.endswith(f"/sweeps/{new.id}")
    assert new.space == ["lr=loguniform(1e-4,1e-2)"] and new.method == "random"
    assert new.trials == 3 and new.metric == "val/loss"
    assert new.spec["argv"] == SPEC.argv
