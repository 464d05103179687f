"""Issue 14, the pages a newcomer meets in the first hour, in a real browser: clone & edit keeps
a float a float and shows one spec in both tabs; the queue says what each job runs; run charts
are readable with few points, bytes and constants; compare and the runs table never leave the
user guessing. Every state a test looks at is saved as a screenshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.browser_seed import Seeded
from tests.support.servers import ServerThread
from tracker.entities import Failure, GpuDevice, JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store import workers as store_workers
from tracker.web.app import create_app

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


# ---------------------------------------------------------------------------- queue (item 6)

WORKER = "gpu-node-02:7"


@pytest.fixture(scope="module")
def busy_worker(dashboard: Dashboard) -> dict[str, int]:
    """A worker running two jobs: one requeued by hand past its retries (attempt 2 of 1),
    one on its first attempt; a third job cancelled while queued."""
    store = dashboard.store
    gpus = [GpuDevice(0, "NVIDIA L4", 24 * 1024**3)]
    store_workers.register_worker(store, WORKER, host="gpu-node-02", pid=7, gpus=gpus, max_jobs=2)

    def claim() -> Any:
        claimed = queue.claim(store, WORKER, lease_s=3600, max_gpus=0)
        assert claimed is not None
        return claimed[0]

    mnist = JobSpec([VENV_PYTHON, "examples/train_mnist.py", "--epochs", "3"], "digits",
                    config={"lr": 0.01, "model": {"width": 32}}, priority=100)  # fmt: skip
    requeued = queue.enqueue(store, mnist).id
    first = claim()
    assert first.job.id == requeued
    queue.finish(store, first, exit_code=1, failure=Failure("exit_nonzero", "exit code 1"))
    store_jobs.requeue(store, requeued, reason="requeued by hand")
    assert claim().job.id == requeued
    cifar = JobSpec([VENV_PYTHON, "-u", "/home/ada/proj/examples/train_cifar.py"], "digits",
                    config={"lr": 0.1}, priority=100)  # fmt: skip
    second = queue.enqueue(store, cifar).id
    assert claim().job.id == second
    cancelled = queue.enqueue(store, JobSpec([VENV_PYTHON, "examples/train_mnist.py"], "digits"))
    store_jobs.cancel(store, cancelled.id)
    return {"requeued": requeued, "second": second, "cancelled": cancelled.id}


def test_queue_shows_the_script_config_attempts_and_worker_jobs(
    page: Any, dashboard: Dashboard, busy_worker: dict[str, int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/jobs")
    requeued = page.locator(f"#job-{busy_worker['requeued']}")
    requeued.wait_for()
    command = requeued.locator("code.command")
    assert command.inner_text() == "examples/train_mnist.py --epochs 3"
    assert ".venv" in (command.get_attribute("title") or "")  # the full argv on hover
    assert requeued.locator("code.config").inner_text() == "lr=0.01 model.width=32"
    other = page.locator(f"#job-{busy_worker['second']}")
    assert other.locator("code.command").inner_text() == "…/examples/train_cifar.py"
    status = requeued.locator("td").nth(2).inner_text()
    assert "attempt 2 (requeued by hand)" in status and "2/1" not in status, status
    assert requeued.locator(".badge").inner_text() == "running"  # not the last attempt's failure
    worker = page.locator("#workers-table tbody tr", has_text="gpu-node-02")
    jobs = worker.locator("td.worker-jobs").inner_text()
    assert "2/2 busy" in jobs and f"#{busy_worker['requeued']}, #{busy_worker['second']}" in (
        jobs.replace("\n", " ")
    ), jobs
    screenshot(page, "queue-active")

    page.click('.seg[data-status^="succeeded"]')
    cancelled = page.locator(f"#job-{busy_worker['cancelled']}")
    cancelled.wait_for()
    assert cancelled.locator(".badge").inner_text() == "cancelled"
    screenshot(page, "queue-finished")


def test_a_schedule_shows_its_script_and_config(
    page: Any, dashboard: Dashboard, busy_worker: dict[str, int]
) -> None:
    spec = JobSpec([VENV_PYTHON, "examples/train_mnist.py", "--epochs", "3"], "digits",
                   config={"lr": 0.01, "model": {"width": 32}})  # fmt: skip
    store_schedules.add_schedule(dashboard.store, "0 3 * * *", spec, name="nightly-mnist")
    page.goto(f"{dashboard.url}/jobs")
    row = page.locator("#schedules-table tbody tr", has_text="nightly-mnist")
    row.wait_for()
    assert row.locator("code.command").inner_text() == "examples/train_mnist.py --epochs 3"
    assert row.locator("code.config").inner_text() == "lr=0.01 model.width=32"


@pytest.fixture
def finished_only(tmp_path: Path, browser: Any) -> Iterator[Dashboard]:
    """A dashboard whose queue holds only finished jobs."""
    url = f"sqlite:///{tmp_path / 'finished.db'}"
    store = Store(url)
    for i in range(2):
        queue.enqueue(store, JobSpec(["python", f"job{i}.py"], "p"))
    store_jobs.cancel(store, 1)
    store_jobs.cancel(store, 2)
    app = create_app({"STORE_URI": url, "NO_AUTH": True})
    server = ServerThread(app)
    yield Dashboard(server.url, url, store, Seeded())
    server.stop()
    app.extensions["tracker"].store.close()
    store.close()


def test_an_empty_active_tab_says_what_the_other_tabs_hold(
    page: Any, finished_only: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{finished_only.url}/jobs")
    empty = page.locator("#jobs-empty")
    empty.wait_for(state="visible")
    page.wait_for_function("() => document.querySelector('#jobs-empty').textContent.includes('Finished')")
    text = empty.inner_text()
    assert text != "No jobs." and "2 cancelled" in text and "Finished tab" in text, text
    screenshot(page, "queue-empty-active")
