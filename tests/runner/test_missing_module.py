"""A training script whose environment lacks a module ends ``failed`` with the class
``missing_module`` and a hint that names the module and how to get it: run by a real
``tracker worker``, and started by hand (the client classifies its own console output)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.runner import Procs
from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store.runs import get_run, list_runs

pytestmark = pytest.mark.slow

# The import fails after the run exists, as in a training script that imports its data
# pipeline lazily (Python names the first missing part of the dotted name).
SCRIPT = """\
import tracker

with tracker.init(project="deps", config={"lr": 0.1}):
    tracker.log({"loss": 1.0}, step=0)
    print("epoch 1 loss 1.0", flush=True)
    import no_such_dep_pkg.submodule  # noqa: F401
"""


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "train_missing.py"
    path.write_text(SCRIPT)
    return path


def test_worker_job_that_imports_a_missing_module(
    store: Store, procs: Procs, tmp_path: Path
) -> None:
    job = queue.enqueue(store, JobSpec(argv=[sys.executable, str(_script(tmp_path))]))
    worker = procs.worker("--gpus", "none", "--exit-when-idle")
    assert worker.wait(120) == 0, worker.output()

    job = store_jobs.get_job(store, job.id)
    assert (job.status, job.failure_class) == ("failed", "missing_module"), job.failure_hint
    assert "'no_such_dep_pkg'" in job.failure_hint
    assert "pip install no_such_dep_pkg" in job.failure_hint
    assert job.run_id is not None
    run = get_run(store, job.run_id)
    assert run.failure_class == "missing_module", (run.status, run.failure_hint)
    shown = procs.run("jobs", "show", str(job.id)).stdout
    assert "missing_module" in shown and "pip install no_such_dep_pkg" in shown, shown


def test_run_started_by_hand_that_imports_a_missing_module(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = store_url
    done = subprocess.run(
        [sys.executable, str(_script(tmp_path))], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "No module named 'no_such_dep_pkg'" in done.stderr
    [run] = list_runs(store)
    assert (run.status, run.failure_class) == ("failed", "missing_module"), run.failure_hint
    assert "pip install no_such_dep_pkg" in (run.failure_hint or "")
