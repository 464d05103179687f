"""Issue 14, the pages a newcomer meets in the first hour, in a real browser: clone & edit keeps
a float a float and shows one spec in both tabs; the queue says what each job runs; run charts
are readable with few points, bytes and constants; compare and the runs table never leave the
user guessing. Every state a test looks at is saved as a screenshot."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tracker.entities import JobSpec
from tracker.store import jobs as store_jobs
from tracker.store import queue

pytestmark = [pytest.mark.slow, pytest.mark.browser]

VENV_PYTHON = "/home/ada/proj/.venv/bin/python"


def all_job_ids(dashboard: Dashboard) -> set[int]:
    return {j.id for j in store_jobs.list_jobs(dashboard.store, limit=1000)}


# ------------------------------------------------------------------ clone & edit (item 3)


@pytest.fixture(scope="module")
def float_job(dashboard: Dashboard) -> int:
    """A job whose config holds floats that JSON writes like integers (0.0, 1.0)."""
    config = {"lr": 0.001, "weight_decay": 0.0, "label_smoothing": 0.0, "momentum": 1.0,
              "epochs": 3, "opt": {"beta1": 0.9, "eps_scale": 2.0}}  # fmt: skip
    spec = JobSpec([VENV_PYTHON, "examples/train_floats.py"], "floats", config=config, priority=-5)
    return queue.enqueue(dashboard.store, spec).id


def test_clone_keeps_floats_and_both_tabs_show_the_same_spec(
    page: Any, dashboard: Dashboard, float_job: int, screenshot: Any
) -> None:
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/jobs?clone_job={float_job}")
    page.locator("#clone-dialog").wait_for(state="visible")
    row = page.locator('#clone-rows tr[data-key="weight_decay"]')
    assert row.locator(".type").inner_text().lower() == "float"
    assert row.locator("input").first.input_value() == "0.0"
    assert page.locator('#clone-rows tr[data-key="epochs"] .type').inner_text().lower() == "int"
    page.fill('#clone-rows input[name="weight_decay"]', "1e-4")
    assert page.locator("#clone-error").is_hidden()  # not "expected an integer"
    page.fill('#clone-rows input[name="sweep:lr"]', "0.1, 1")
    assert page.locator("#clone-summary").inner_text() == "2 jobs (lr × 2)"
    screenshot(page, "clone-form-float-sweep")

    page.click('#clone-form .seg[data-mode="json"]')
    page.locator("#clone-json").wait_for(state="visible")
    assert page.locator("#clone-summary").inner_text() == "2 jobs (lr × 2)"
    text = page.locator("#clone-json").input_value()
    assert '"label_smoothing": 0.0' in text and '"eps_scale": 2.0' in text, text
    assert '"epochs": 3,' in text
    sweep = page.evaluate("() => JSON.parse(document.querySelector('#clone-sweep-json').value)")
    assert sweep == {"lr": [0.1, 1]}
    assert "1.0" in page.locator("#clone-sweep-json").input_value()  # a float sweep value
    screenshot(page, "clone-json-float-sweep")

    page.click('#clone-form .seg[data-mode="form"]')  # and back: the same spec again
    assert page.locator('#clone-rows input[name="sweep:lr"]').input_value() == "0.1, 1.0"
    assert page.locator('#clone-rows input[name="weight_decay"]').input_value() == "0.0001"
    assert page.locator('#clone-rows tr[data-key="momentum"] .type').inner_text().lower() == "float"
    page.click("#clone-submit")
    page.locator("#clone-dialog").wait_for(state="hidden")
    new = wait_until(lambda: all_job_ids(dashboard) - before, "the sweep's two jobs")
    jobs = [store_jobs.get_job(dashboard.store, i) for i in sorted(new)]
    assert sorted(j.config["lr"] for j in jobs) == [0.1, 1.0]
    for job in jobs:
        config = job.config
        for key in ("lr", "weight_decay", "label_smoothing", "momentum"):
            assert isinstance(config[key], float), (key, config[key])
        assert isinstance(config["opt"]["eps_scale"], float)
        assert isinstance(config["epochs"], int) and config["weight_decay"] == 1e-4


def test_json_tab_edits_reach_the_form_with_their_types(
    page: Any, dashboard: Dashboard, float_job: int
) -> None:
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/jobs?clone_job={float_job}")
    page.locator("#clone-dialog").wait_for(state="visible")
    page.click('#clone-form .seg[data-mode="json"]')
    page.fill("#clone-json", '{"lr": 0.0, "steps": 10, "tag": "x"}')
    page.fill("#clone-sweep-json", '{"steps": [10, 20, 30]}')
    assert page.locator("#clone-summary").inner_text() == "3 jobs (steps × 3)"
    page.click('#clone-form .seg[data-mode="form"]')
    assert page.locator('#clone-rows tr[data-key="lr"] .type').inner_text().lower() == "float"
    assert page.locator('#clone-rows input[name="lr"]').input_value() == "0.0"
    assert page.locator('#clone-rows input[name="sweep:steps"]').input_value() == "10, 20, 30"
    page.click('#clone-form .seg[data-mode="json"]')
    page.click("#clone-submit")
    page.locator("#clone-dialog").wait_for(state="hidden")
    new = wait_until(lambda: all_job_ids(dashboard) - before, "three jobs")
    jobs = [store_jobs.get_job(dashboard.store, i) for i in sorted(new)]
    assert sorted(j.config["steps"] for j in jobs) == [10, 20, 30]
    assert all(isinstance(j.config["lr"], float) for j in jobs)
