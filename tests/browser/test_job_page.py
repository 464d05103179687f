"""The job page (/jobs/<id>) in real Chromium with a real retried job: a real ``tracker
worker`` runs a script from a code snapshot that fails on its first attempt and, retried,
waits on its second for the test's go-ahead. The page shows the spec, the snapshot (commit,
uncommitted diff, files), both attempts (where each ran, exit code, failure class and hint),
each attempt's own output, and follows the job live to its end without a reload; the queue
table and the run page link to it; cancel is reachable from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.code_snapshots import store_snapshot
from tests.support.runner import Procs
from tracker.entities import JobSpec
from tracker.store import jobs as store_jobs
from tracker.store import queue

pytestmark = [pytest.mark.slow, pytest.mark.browser]

COMMIT = "3b9f0c2d4e6a8b1c3d5e7f9a0b2c4d6e8f0a1b3c"
DIFF = """diff --git a/flaky.py b/flaky.py
--- a/flaky.py
+++ b/flaky.py
@@ -1,2 +1,3 @@
 import os
+# retried once: the data mount is flaky on its first read
"""
# Attempt 1 fails with exit code 3 and says why on stderr; attempt 2 waits (bounded) for
# the test's go-ahead file, so the page can be seen while it runs, then succeeds.
FLAKY = b"""import os, pathlib, sys, time
attempt = int(os.environ["TRACKER_ATTEMPT"])
print(f"attempt {attempt}: loading shards", flush=True)
if attempt == 1:
    print("OSError: shard 7 unreadable on /data (attempt 1)", file=sys.stderr, flush=True)
    sys.exit(3)
print("attempt 2: waiting for the go-ahead", flush=True)
gate = pathlib.Path(os.environ["GO_AHEAD_FILE"])
deadline = time.monotonic() + 120
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print("attempt 2: trained 3 epochs", flush=True)
"""


@pytest.fixture
def worker_procs(dashboard: Dashboard, tmp_path: Path) -> Iterator[Procs]:
    procs = Procs(dashboard.store_url, tmp_path)
    yield procs
    procs.close()
    for proc in procs.started:
        print(f"----- {proc.log.name} -----\n{proc.output()[-4000:]}")


def attempt_status(dashboard: Dashboard, job_id: int, attempt: int) -> str | None:
    tried = store_jobs.attempts(dashboard.store, job_id)
    return tried[attempt - 1].status if len(tried) >= attempt else None


def test_a_retried_job_on_its_page(
    page: Any, dashboard: Dashboard, worker_procs: Procs, tmp_path: Path, screenshot: Any
) -> None:
    store = dashboard.store
    files = {"flaky.py": FLAKY, "README.md": b"# digits\n"}
    snap = store_snapshot(store, tmp_path / "digits", files, git_commit=COMMIT, git_diff=DIFF,
                          root_name="digits")  # fmt: skip
    gate = tmp_path / "go"
    spec = JobSpec(["python", "flaky.py", "--shards", "8"], "digits", name="flaky-shards", cwd=".",
                   env={"GO_AHEAD_FILE": str(gate)},
                   config={"lr": 0.003, "model": {"width": 64}}, priority=2, max_retries=1,
                   retry_on_failure=True, timeout_s=600.0, snapshot_id=snap.id)  # fmt: skip
    job = queue.enqueue(store, spec)
    # the seeded queued jobs all ask for GPUs: this worker claims only ours; no housekeeping,
    # so the seeded "running" job of a made-up worker is left as it is
    worker = worker_procs.worker(
        "--gpus", "none", "--no-housekeeping", "--exit-when-idle", "--name", "gpu-node-07:4711"
    )  # fmt: skip

    # the queue table links to the job's page
    page.goto(f"{dashboard.url}/jobs?job={job.id}")
    page.click(f"#job-{job.id} a.job-link")
    page.wait_for_url(f"**/jobs/{job.id}")

    # the second attempt runs: the first is shown failed, with its exit code, class and hint
    wait_until(lambda: attempt_status(dashboard, job.id, 2) == "running", "attempt 2 to start", 60)
    page.wait_for_selector('#attempt-2[data-status="running"]')
    first = page.locator("#attempt-1")
    assert first.get_attribute("data-status") == "failed"
    assert first.locator(".exit-code").inner_text() == "3"
    stored = store_jobs.attempts(store, job.id)[0]
    assert (
        stored.failure_class
        and stored.failure_class in first.locator(".attempt-status").inner_text()
    )
    assert stored.failure_hint and stored.failure_hint in first.inner_text()
    for n in (1, 2):
        ran_on = page.locator(f"#attempt-{n} .ran-on").inner_text()
        assert "local worker" in ran_on and "gpu-node-07:4711" in ran_on
    assert page.locator("#job-status .badge").get_attribute("data-status") == "running"
    assert page.locator("#job-live").is_visible()

    # the spec as submitted, the snapshot it runs
    spec_text = page.locator("#job-spec").inner_text()
    assert "python flaky.py --shards 8" in spec_text
    assert "lr=0.003" in spec_text and "model.width=64" in spec_text
    assert "GO_AHEAD_FILE" in spec_text and str(gate) not in spec_text  # env values never shown
    assert page.locator('#job-spec tr[data-key="Priority"] td').inner_text() == "2"
    assert page.locator('#job-spec tr[data-key="Retries"] td').inner_text().startswith("1")
    assert page.locator('#job-spec tr[data-key="Timeout"] td').inner_text() == "10m 00s"
    assert page.locator("#job-commit").get_attribute("title") == COMMIT
    assert page.locator("#job-files").inner_text() == "2"
    page.click(".job-diff summary")
    assert "+# retried once" in page.locator("#job-diff").inner_text()
    assert page.locator(f'#job-code-links a[href="/runs/{job.run_id}#code"]').count() == 1

    # each attempt's own output: the newest followed, an older one on demand
    log = page.locator("#job-log")
    page.wait_for_function(
        "() => document.getElementById('job-log').textContent.includes('waiting for the go-ahead')"
    )
    assert "shard 7 unreadable" not in log.inner_text()
    page.click("#attempt-1 button")
    page.wait_for_function(
        "() => document.getElementById('job-log').textContent.includes('shard 7 unreadable')"
    )
    assert "go-ahead" not in log.inner_text()
    assert page.locator("#job-log .log-stderr").count() >= 1
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "job-page")

    # live: the job ends while the page is open; it follows without a reload
    gate.write_text("go")
    assert worker.wait(60) == 0, worker.output()
    page.wait_for_selector('#job-status .badge[data-status="succeeded"]')
    page.wait_for_selector('#attempt-2[data-status="succeeded"]')
    assert page.locator("#job-live").is_hidden()
    assert page.locator("#job-cancel").is_hidden()  # nothing to cancel any more
    page.select_option("#job-log-attempt", "2")
    page.wait_for_function(
        "() => document.getElementById('job-log').textContent.includes('trained 3 epochs')"
    )

    # the run page's "Job N" links here; the job page links back to its run
    page.click("#job-run-link")
    page.wait_for_url(f"**/runs/{job.run_id}")
    link = page.locator("#job-link")
    link.wait_for()
    assert link.get_attribute("href") == f"/jobs/{job.id}"
    link.click()
    page.wait_for_url(f"**/jobs/{job.id}")
    page.wait_for_selector("#attempt-2")


def test_cancel_and_clone_from_the_job_page(page: Any, dashboard: Dashboard) -> None:
    job = queue.enqueue(dashboard.store, JobSpec(argv=["python", "train.py"], gpus=8))
    page.goto(f"{dashboard.url}/jobs/{job.id}")
    page.wait_for_selector('#job-status .badge[data-status="queued"]')
    assert page.locator("#job-no-attempts").is_visible()
    assert page.locator("#job-clone").get_attribute("href") == f"/jobs?clone_job={job.id}"
    page.once("dialog", lambda d: d.accept())
    page.click("#job-cancel")
    page.wait_for_selector('#job-status .badge[data-status="cancelled"]')
    assert store_jobs.get_job(dashboard.store, job.id).status == "cancelled"
    assert page.locator("#job-cancel").is_hidden()
    page.click("#job-clone")
    page.wait_for_url(f"**/jobs?clone_job={job.id}")
    page.locator("#clone-dialog").wait_for(state="visible")


def test_an_unknown_job_says_so(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/jobs/987654")
    message = page.locator("#job-missing")
    message.wait_for()
    assert "Job 987654 does not exist" in message.inner_text()
