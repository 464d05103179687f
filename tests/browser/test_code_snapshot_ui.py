"""The code a run ran, in real Chromium (issue 28): a run whose job carries a code snapshot
has a Code tab with the commit, whether the tree had uncommitted changes, the diff (as text,
in a scrolling box) and the files (a long list collapsed behind "Show all"); a job without a
snapshot, or a run started by hand, has no Code tab. "Clone & edit" of such a run says
that the copies run the same code, and they do."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.code_snapshots import store_snapshot
from tracker.entities import JobSpec
from tracker.store import jobs as store_jobs
from tracker.store import queue
from tracker.store.metrics import log_metrics
from tracker.store.runs import start_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

COMMIT = "7c4e1a9b3d5f2e8a6b0c1d2e3f4a5b6c7d8e9f0a"
HOSTILE = "<img src=x onerror=alert(1)>"
DIFF = f"""diff --git a/train.py b/train.py
--- a/train.py
+++ b/train.py
@@ -12,7 +12,8 @@ def main() -> None:
     model = build_model(config.width)
-    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
+    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
+    # warm up for 500 steps {HOSTILE}
     for step, batch in enumerate(loader):
         loss = model(batch).loss
"""
FILES = {
    "train.py": b"import torch\n\n\ndef main() -> None:\n    ...\n" * 20,
    "models/resnet.py": b"class ResNet:\n    pass\n" * 40,
    "data/loader.py": b"def loader():\n    yield from ()\n" * 10,
    "scripts/launch.sh": b"#!/bin/sh\nexec python train.py \"$@\"\n",
    "README.md": b"# digits\n",
    **{f"sweeps/lr_{i:02d}.yaml": f"lr: {10.0 ** -(i % 5)}\nseed: {i}\n".encode()
       for i in range(55)},
}  # fmt: skip


def snapshot_run(dashboard: Dashboard, tmp_path: Path) -> tuple[int, Any]:
    """A finished run whose job ran a code snapshot, as ``tracker submit`` and a worker make it."""
    store = dashboard.store
    snap = store_snapshot(store, tmp_path / "digits", FILES, executable={"scripts/launch.sh"},
                          git_commit=COMMIT, git_diff=DIFF, root_name="digits")  # fmt: skip
    spec = JobSpec(["python", "train.py", "--epochs", "3"], "digits", name="adamw-snapshot",
                   config={"lr": 3e-4, "width": 64}, snapshot_id=snap.id)  # fmt: skip
    start = time.time() - 1800
    job = queue.enqueue(store, spec, now=start - 60)
    # the seeded queued jobs all ask for GPUs: a worker without any claims this one
    claimed = queue.claim(store, "cpu-node-02:77", lease_s=3600, max_gpus=0, now=start)
    assert claimed is not None and claimed[0].job.id == job.id
    claim = claimed[0]
    start_run(store, claim.run_id, host="cpu-node-02", pid=77, git_commit=COMMIT, now=start)
    for step in range(50):
        log_metrics(store, claim.run_id, step, {"train/loss": 2.0 / (step + 1)})
    queue.finish(store, claim, exit_code=0, failure=None, now=start + 1500)
    return claim.run_id, snap


def test_the_code_tab_shows_the_snapshot_of_the_runs_job(
    page: Any, dashboard: Dashboard, screenshot: Any, tmp_path: Path
) -> None:
    run_id, snap = snapshot_run(dashboard, tmp_path)
    page.goto(f"{dashboard.url}/runs/{run_id}", timeout=60_000)  # plotly parses slowly on a busy CI
    page.wait_for_selector("#run-status .badge.status-finished")
    tab = page.locator('.tab[data-tab="code"]')
    assert tab.is_visible()
    tab.click()
    card = page.locator("#code-card")
    card.wait_for()
    assert card.get_attribute("data-snapshot-id") == str(snap.id)
    assert page.url.endswith("#code")

    commit = page.locator("#code-commit")
    assert commit.inner_text() == COMMIT[:10] and commit.get_attribute("title") == COMMIT
    facts = page.locator("#code-card .code-facts").inner_text()
    assert "yes: +2 −1 lines" in facts
    assert f"{len(FILES)}" in facts and "digits" in facts
    head = page.locator("#code-card .card-head").inner_text()
    assert f"{len(FILES)} files" in head

    # the diff: the text as it is, markup in it shown, never parsed; a bounded, scrolling box
    diff = page.locator("#code-diff")
    assert diff.inner_text().rstrip("\n") == DIFF.rstrip("\n")
    assert HOSTILE in diff.inner_text()
    assert page.locator("#code-card img").count() == 0
    assert diff.locator(".diff-add").count() == 2 and diff.locator(".diff-del").count() == 1
    box = diff.evaluate("e => [getComputedStyle(e).maxHeight, getComputedStyle(e).overflowY]")
    assert box == ["420px", "auto"]

    # the files: 50 shown, the rest behind "Show all"; sizes and the executable mark
    rows = page.locator("#code-files tbody tr")
    assert rows.count() == 50
    shown = rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert shown == sorted(FILES)[:50]  # by path
    launch = page.locator('#code-files tr[data-path="scripts/launch.sh"]')
    assert launch.locator(".exec-mark").inner_text() == "exec"
    assert page.locator("#code-files .exec-mark").count() == 1
    train = page.locator('#code-files tr[data-path="train.py"]')
    assert train.count() == 0  # past the first 50
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "run-code-snapshot")
    page.click("#code-show-all")
    assert rows.count() == len(FILES)
    assert page.locator("#code-show-all").count() == 0
    assert train.locator("td.num").inner_text() == f"{len(FILES['train.py'])} B"
    assert train.locator(".exec-mark").count() == 0

    # reloaded on #code, the tab opens by itself
    page.reload()
    page.locator("#code-card").wait_for()
    assert page.locator('.tab[data-tab="code"]').get_attribute("aria-selected") == "true"


def test_clone_and_edit_of_a_snapshot_run_queues_the_same_code(
    page: Any, dashboard: Dashboard, tmp_path: Path
) -> None:
    run_id, snap = snapshot_run(dashboard, tmp_path)
    before = {j.id for j in store_jobs.list_jobs(dashboard.store, limit=1000)}
    page.goto(f"{dashboard.url}/runs/{run_id}", timeout=60_000)
    page.wait_for_selector("#run-status .badge.status-finished")
    page.click("#clone-link")
    page.wait_for_url(f"**/jobs?clone_run={run_id}")
    dialog = page.locator("#clone-dialog")
    dialog.wait_for(state="visible")
    note = dialog.locator("#clone-code")
    assert note.is_visible() and f"code snapshot #{snap.id}" in note.inner_text()
    page.fill('#clone-rows input[name="lr"]', "0.001")
    page.click("#clone-submit")
    dialog.wait_for(state="hidden")

    def new_jobs() -> set[int]:
        return {j.id for j in store_jobs.list_jobs(dashboard.store, limit=1000)} - before

    (new_id,) = wait_until(new_jobs, "the cloned job in the store")
    job = store_jobs.get_job(dashboard.store, new_id)
    assert (job.snapshot_id, job.config["lr"], job.status) == (snap.id, 0.001, "queued")
    # a job without a snapshot says nothing about code in its editor
    page.goto(f"{dashboard.url}/jobs?clone_run={dashboard.seeded.runs['adam-lr3e-4']}")
    dialog.wait_for(state="visible")
    assert dialog.locator("#clone-code").is_hidden()


def test_a_run_without_a_snapshot_has_no_code_tab(page: Any, dashboard: Dashboard) -> None:
    submitted = dashboard.seeded.runs["adam-lr3e-4"]  # a job that ran the worker's files
    by_hand = dashboard.seeded.runs["adam-lr1e-3"]  # a script run by hand: no job
    for run_id in (submitted, by_hand):
        page.goto(f"{dashboard.url}/runs/{run_id}#code", timeout=60_000)
        page.wait_for_selector("#run-status .badge.status-finished")
        assert page.locator('.tab[data-tab="code"]').is_hidden()
        # a #code link to such a run opens the charts
        assert page.locator('.tab[data-tab="charts"]').get_attribute("aria-selected") == "true"
        assert page.locator('.tab-panel[data-panel="code"]').is_hidden()
        assert page.locator("#code-card").count() == 0
