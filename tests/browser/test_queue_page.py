"""The queue page in a real browser: jobs with their place in the queue, workers, clone a run
with an edited config (the new job appears and is stored with that config), a sweep that
expands into a grid of jobs, cancel, and schedules (add, pause, delete)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store.runs import get_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

JOB_ROWS = "#jobs-table tbody tr"


def job_ids_on_page(page: Any) -> set[int]:
    return {
        int(v) for v in page.eval_on_selector_all(JOB_ROWS, "rs => rs.map(r => r.dataset.jobId)")
    }


def all_job_ids(dashboard: Dashboard) -> set[int]:
    jobs = store_jobs.list_jobs(dashboard.store, limit=1000)
    return {j.id for j in jobs}


def test_queue_lists_jobs_positions_and_workers(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/jobs")
    seeded = dashboard.seeded.jobs
    page.wait_for_selector(f"#job-{seeded['waiting']}")
    assert job_ids_on_page(page) == set(seeded.values())  # the active ones
    queued = page.locator(f"#job-{seeded['queued']} td")
    assert queued.nth(1).inner_text() == "1"  # priority 5 goes first
    assert page.locator(f"#job-{seeded['waiting']} td").nth(1).inner_text() == "2"
    assert "needs 4 GPU" in page.locator(f"#job-{seeded['waiting']} td.reason").inner_text()
    running = page.locator(f"#job-{seeded['running']}")
    assert "on gpu-node-01:4242 · attempt 1/3" in running.inner_text()
    worker = page.locator("#workers-table tbody tr")
    assert worker.count() == 1
    assert "NVIDIA H100 80GB HBM3" in worker.inner_text() and "1/2" in worker.inner_text()
    screenshot(page, "queue")


def test_clone_a_run_with_an_edited_config_into_the_queue(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    run_id = dashboard.seeded.runs["adam-lr3e-4"]
    run = get_run(dashboard.store, run_id)
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.click("#clone-link")
    page.wait_for_url(f"**/jobs?clone_run={run_id}")
    dialog = page.locator("#clone-dialog")
    dialog.wait_for(state="visible")
    assert dialog.locator("#clone-command").inner_text() == " ".join(run.command or [])
    # Types are checked: an integer key refuses text, and nothing is queued.
    page.fill('#clone-rows input[name="model.width"]', "wide")
    error = page.locator("#clone-error")
    error.wait_for(state="visible")
    assert "model.width: expected an integer" in error.inner_text()
    page.click("#clone-submit")
    assert dialog.is_visible() and all_job_ids(dashboard) == before
    page.fill('#clone-rows input[name="model.width"]', "96")
    page.fill('#clone-rows input[name="lr"]', "0.005")
    page.select_option('#clone-rows select[name="data.augment"]', "true")
    assert error.is_hidden()
    assert page.locator("#clone-summary").inner_text() == "1 job"
    screenshot(page, "clone-editor")
    page.click("#clone-submit")
    dialog.wait_for(state="hidden")
    (new_id,) = wait_until(lambda: all_job_ids(dashboard) - before, "the cloned job in the store")
    row = page.locator(f"#job-{new_id}")
    row.wait_for()
    assert "highlight" in (row.get_attribute("class") or "")
    assert row.get_attribute("data-status") == "queued"
    assert "lr=0.005" in row.inner_text()
    expected = copy.deepcopy(run.config)
    expected["lr"] = 0.005
    expected["model"]["width"] = 96
    expected["data"]["augment"] = True
    job = store_jobs.get_job(dashboard.store, new_id)
    assert (job.config, job.argv, job.status) == (expected, run.command, "queued")


def test_a_run_that_no_job_ran_cannot_be_cloned(page: Any, dashboard: Dashboard) -> None:
    """Its recorded command is shown, never launched: the button is disabled with the rule
    as its tooltip, and the editor (reached by URL) names the rule and enqueues nothing."""
    run_id = dashboard.seeded.runs["adam-lr1e-3"]  # logged by a script run by hand
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/runs/{run_id}")
    link = page.locator("#clone-link")
    page.wait_for_function("() => document.querySelector('#clone-link').ariaDisabled === 'true'")
    assert link.get_attribute("href") is None
    assert "only submitted jobs can be cloned" in (link.get_attribute("title") or "")
    page.goto(f"{dashboard.url}/jobs?clone_run={run_id}")
    dialog = page.locator("#clone-dialog")
    dialog.wait_for(state="visible")
    command = dialog.locator("#clone-command").inner_text()
    assert "not submitted as a job" in command and "tracker submit" in command
    assert page.locator("#clone-submit").is_disabled()
    assert all_job_ids(dashboard) == before


def test_sweep_expands_a_grid_into_jobs(page: Any, dashboard: Dashboard) -> None:
    run_id = dashboard.seeded.runs["sgd-lr1e-2"]
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/jobs?clone_run={run_id}")
    page.locator("#clone-dialog").wait_for(state="visible")
    page.fill('#clone-rows input[name="sweep:lr"]', "0.1, 0.01, 0.001")
    page.fill('#clone-rows input[name="sweep:batch_size"]', "32,64")
    assert page.locator("#clone-summary").inner_text() == "6 jobs (lr × 3, batch_size × 2)"
    page.fill("#clone-priority", "3")
    page.click("#clone-submit")
    page.locator("#clone-dialog").wait_for(state="hidden")
    new = wait_until(lambda: all_job_ids(dashboard) - before, "the sweep's jobs in the store")
    jobs = [store_jobs.get_job(dashboard.store, i) for i in sorted(new)]
    combos = {(j.config["lr"], j.config["batch_size"]) for j in jobs}
    assert combos == {(lr, bs) for lr in (0.1, 0.01, 0.001) for bs in (32, 64)}
    assert {j.priority for j in jobs} == {3}
    page.wait_for_function(
        "n => document.querySelectorAll('#jobs-table tr.highlight').length === n", arg=len(new)
    )


def test_json_editor_and_cancel(page: Any, dashboard: Dashboard) -> None:
    job_id = dashboard.seeded.jobs["queued"]
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/jobs")
    page.locator(f"#job-{job_id} button", has_text="Clone & edit").click()
    page.locator("#clone-dialog").wait_for(state="visible")
    page.click('#clone-form .seg[data-mode="json"]')
    page.fill("#clone-json", '{"lr": 0.0002, "optimizer": "adamw", "warmup": 100}')
    page.click("#clone-submit")
    page.locator("#clone-dialog").wait_for(state="hidden")
    (new_id,) = wait_until(lambda: all_job_ids(dashboard) - before, "the cloned job")
    job = store_jobs.get_job(dashboard.store, new_id)
    assert job.config == {"lr": 0.0002, "optimizer": "adamw", "warmup": 100}
    assert job.parent_job_id == job_id

    page.on("dialog", lambda d: d.accept())  # the "Cancel job?" confirmation
    page.locator(f"#job-{new_id} button", has_text="Cancel").click()
    wait_until(
        lambda: store_jobs.get_job(dashboard.store, new_id).status == "cancelled",
        "the job to be cancelled",
    )
    page.wait_for_selector(f"#job-{new_id}", state="detached")  # no longer active


def test_schedules_add_pause_and_delete(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/jobs")
    page.wait_for_selector("#schedules-empty")
    form = page.locator("#schedule-form")
    form.locator('select[name="source"]').select_option("run_id")
    form.locator('input[name="source_id"]').fill(str(dashboard.seeded.runs["adam-lr3e-4"]))
    form.locator('input[name="cron"]').fill("not a cron")
    form.locator("button[type=submit]").click()
    page.locator("#schedule-error").wait_for(state="visible")
    form.locator('input[name="cron"]').fill("0 3 * * 1-5")
    form.locator('input[name="name"]').fill("nightly")
    form.locator("button[type=submit]").click()
    row = page.locator("#schedules-table tbody tr", has_text="nightly")
    row.wait_for()
    assert "0 3 * * 1-5" in row.inner_text() and "active" in row.inner_text()
    row.locator("button", has_text="Pause").click()
    page.locator("#schedules-table tbody tr", has_text="paused").wait_for()
    # The page reads through the app's own connections; this test reads through another
    # one, so poll (bounded) for the paused row rather than assume it is visible at once.
    (schedule,) = wait_until(
        lambda: [s for s in store_schedules.list_schedules(dashboard.store) if s.paused],
        "the schedule to be paused in the store",
    )
    assert schedule.name == "nightly"
    page.on("dialog", lambda d: d.accept())
    page.locator("#schedules-table button", has_text="Delete").click()
    page.wait_for_selector("#schedules-empty:not([hidden])")
    assert store_schedules.list_schedules(dashboard.store) == []
