"""``tracker submit --fail-on``: a job that exits 0 after its loss diverged ends ``failed``
(class ``divergence``) under the default policy, and ``succeeded`` with ``--fail-on none`` --
through the real ``tracker`` command, a real worker and a real store (SQLite, PostgreSQL).
The same rows for both executors are in the behaviour table
(tests/runner/test_executor_behaviour.py)."""

from __future__ import annotations

import json

from tests.support.runner import Procs, script
from tracker.store import Store
from tracker.store import jobs as store_jobs
from tracker.store.diagnoses import list_diagnoses
from tracker.store.runs import get_run


def _submit(procs: Procs, *args: str) -> dict[str, object]:
    done = procs.run("submit", "--json", *args, "--", *script("behaviour.py", "diverge"))
    assert done.returncode == 0, done.stderr
    job: dict[str, object] = json.loads(done.stdout)
    return job


def test_a_diverged_job_fails_by_default_and_succeeds_with_fail_on_none(
    store: Store, procs: Procs
) -> None:
    default = _submit(procs)
    allowed = _submit(procs, "--fail-on", "none")
    listed = _submit(procs, "--fail-on", "Memory_Growth, divergence")
    assert (default["fail_on"], allowed["fail_on"], listed["fail_on"]) == (
        "errors",
        "none",
        "divergence,memory_growth",
    )
    worker = procs.worker("--gpus", "none", "--exit-when-idle", "--max-jobs", "3")
    assert worker.wait(120, "the worker to run the three jobs") == 0, worker.output()

    failed = store_jobs.get_job(store, int(str(default["id"])))
    assert (failed.status, failed.exit_code, failed.failure_class) == ("failed", 0, "divergence")
    assert failed.failure_hint is not None
    assert failed.failure_hint.startswith("loss diverged from step 25")
    assert "lower it or lengthen the warmup" in failed.failure_hint
    assert failed.failure_hint.endswith("(--fail-on errors)")
    run = get_run(store, failed.run_id or 0)
    assert (run.status, run.failure_class) == ("failed", "divergence")

    ok = store_jobs.get_job(store, int(str(allowed["id"])))
    assert (ok.status, ok.failure_class) == ("succeeded", None), ok.failure_hint
    assert get_run(store, ok.run_id or 0).status == "finished"
    codes = {e.data["code"] for e in list_diagnoses(store, ok.run_id or 0) if e.data}
    assert "divergence" in codes  # diagnosed all the same: the policy only judges the job

    by_list = store_jobs.get_job(store, int(str(listed["id"])))
    assert (by_list.status, by_list.failure_class) == ("failed", "divergence")

    shown = procs.run("jobs", "show", str(failed.id))
    assert shown.returncode == 0, shown.stderr
    assert "  fail on:         errors\n" in shown.stdout
    assert "  failure:         divergence\n" in shown.stdout
    as_json = json.loads(procs.run("jobs", "show", str(ok.id), "--json").stdout)
    assert as_json["job"]["fail_on"] == "none"
    assert "  fail on:         divergence,memory_growth\n" in (
        procs.run("jobs", "show", str(by_list.id)).stdout
    )
