"""One behaviour table, run against every executor: the local worker and the Slurm dispatcher
(a real single-node cluster, tests/support/slurm_cluster.py), on SQLite and PostgreSQL.

Each row is a real job (tests/runner/scripts/behaviour.py) and the end the store must show;
both executors share one verdict (runner/verdict.py) and one job-environment rule
(runner/job_env.py), so a row may never differ between them. Before they did: a job whose
loss went NaN succeeded under Slurm, and the dispatcher's MASTER_PORT reached its jobs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.runner import REAP, Proc, Procs, script
from tracker.entities import JobSpec
from tracker.store import Store, logs, queue
from tracker.store import jobs as store_jobs
from tracker.store.diagnoses import list_diagnoses

# row -> (mode of behaviour.py, the job's --fail-on), (job status, failure class, words in the
# failure hint). A diverged loss or a leak ends as the job's policy says (runner/verdict.py).
TABLE: dict[str, tuple[tuple[str, str], tuple[str, str | None, str]]] = {
    "ok": (("ok", "errors"), ("succeeded", None, "")),
    "nan": (("nan", "errors"), ("failed", "nonfinite_loss", "loss became NaN at step 5")),
    "diverge": (("diverge", "errors"), ("failed", "divergence", "loss diverged from step 25")),
    "diverge-allowed": (("diverge", "none"), ("succeeded", None, "")),
    "leak": (("leak", "errors"), ("succeeded", None, "")),  # memory growth is a warning
    "leak-listed": (
        ("leak", "errors,memory_growth"),
        ("failed", "memory_growth", "(--fail-on errors,memory_growth)"),
    ),
    "missing": (("missing", "errors"), ("failed", "missing_module", "no_such_dep_pkg")),
    "exception": (("exception", "errors"), ("failed", "python_exception", "ValueError: bad value")),
    "env": (("env", "errors"), ("succeeded", None, "")),
}


def _start(kind: str, procs: Procs, tmp: Path, request: pytest.FixtureRequest) -> Proc:
    if kind == "local":
        return procs.worker("--gpus", "none", "--exit-when-idle", "--max-jobs", "3")
    request.getfixturevalue("slurm")  # the cluster, started once per session
    return _dispatcher(procs, tmp, "dispatcher")


def _dispatcher(procs: Procs, tmp: Path, name: str, *args: str) -> Proc:
    return procs.tracker(
        "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", "--log-dir",
        str(tmp / "slurm-logs"), *REAP, "--exit-when-idle", *args, name=name,
    )  # fmt: skip


def _stdout(store: Store, job_id: int) -> str:
    chunks = logs.logs_after(store, job_id, limit=10_000, stream="stdout")
    return "".join(c.text for c in chunks)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["local", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_behaviour_table(
    kind: str,
    store: Store,
    procs: Procs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    # the starter's own rendezvous port must not reach a job; its ordinary variables do
    monkeypatch.setenv("MASTER_PORT", "12345")
    monkeypatch.setenv("BEHAVIOUR_MARK", "from-starter")
    jobs = {
        row: queue.enqueue(store, JobSpec(argv=script("behaviour.py", mode), fail_on=fail_on))
        for row, ((mode, fail_on), _) in TABLE.items()
    }
    starter = _start(kind, procs, tmp_path, request)
    for row, job in jobs.items():
        wait_for(
            lambda j=job.id: store_jobs.get_job(store, j).is_final, 120, f"the {row} job to end"
        )
    for row, (_, (status, cls, hint)) in TABLE.items():
        job = store_jobs.get_job(store, jobs[row].id)
        assert (job.status, job.failure_class) == (status, cls), (kind, row, job.failure_hint)
        assert hint in (job.failure_hint or ""), (kind, row, job.failure_hint)
        assert store.get_run(job.run_id).failure_class == cls, (kind, row)
    # the doctor recorded what it found whatever the policy: the run that succeeded too
    allowed = store.get_run(jobs["diverge-allowed"].run_id)
    assert allowed.status == "finished"
    assert "divergence" in {e.data["code"] for e in list_diagnoses(store, allowed.id) if e.data}
    assert _stdout(store, jobs["env"].id) == "MASTER_PORT=-\nBEHAVIOUR_MARK=from-starter\n"
    assert starter.wait(60) == 0, starter.output()


TICKER = """
import sys, time
for i in range(4):
    print(f"job {sys.argv[1]} line {i}", flush=True)
    time.sleep(0.8)
"""


@pytest.mark.slow
@pytest.mark.slurm
def test_three_dispatchers_on_one_store_follow_each_job_once(
    slurm: object, store: Store, procs: Procs, tmp_path: Path
) -> None:
    # every dispatcher sees every tagged Slurm job on every poll; only the owner follows it
    jobs = [
        queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", TICKER, str(n)])) for n in range(6)
    ]
    started = [_dispatcher(procs, tmp_path, f"dispatcher{n}", "--max-jobs", "2") for n in range(3)]
    for job in jobs:
        wait_for(
            lambda j=job.id: store_jobs.get_job(store, j).is_final, 180, f"job {job.id} to end"
        )
    for n, job in enumerate(jobs):
        done = store_jobs.get_job(store, job.id)
        assert (done.status, done.attempt) == ("succeeded", 1), done.failure_hint
        assert _stdout(store, job.id) == "".join(f"job {n} line {i}\n" for i in range(4))
    for proc in started:
        assert proc.wait(60) == 0, proc.output()
        said = proc.output()
        assert "adopted slurm job" not in said, said  # no live attempt taken over
        assert "lease lost" not in said and "no longer holds the lease" not in said, said
