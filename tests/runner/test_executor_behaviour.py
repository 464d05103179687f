"""One behaviour table, run against every executor: the local worker and the Slurm dispatcher
(a real single-node cluster, tests/support/slurm_cluster.py), on SQLite and PostgreSQL.

Each row is a real job (tests/runner/scripts/behaviour.py) and the end the store must show;
both executors share one verdict (runner/verdict.py) and one job-environment rule
(runner/job_env.py), so a row may never differ between them. Before they did: a job whose
loss went NaN succeeded under Slurm, and the dispatcher's MASTER_PORT reached its jobs.

The rows, and what each executor does to make them happen:

- how a job's own code ends (``TABLE``): ok, NaN loss, missing module, exception, environment;
- a timeout the job ignores SIGTERM for, and a cancel (``STOPS``): the job ends
  ``timed_out``/``timeout`` resp. ``cancelled``/``cancelled``, its run ``killed``, and its
  process is gone. The worker stops a job at its ``timeout_s`` (SIGTERM, SIGKILL after the
  grace); Slurm at its time limit, ``timeout_s`` + grace + 60 s of signal slack in whole
  minutes (``rules.slurm.time_limit``), so the Slurm row takes two minutes of Slurm's own
  clock, in which the store plays no part: it runs on SQLite only (PostgreSQL's half of
  every other Slurm row runs);
- preemption: the retry resumes from the last *verified* checkpoint (the job's newest one is
  damaged, so the one before it). Slurm: ``scontrol requeue``. Locally there is no scheduler
  to take a job back; the equivalent is the worker being stopped (SIGTERM, as a machine
  being shut down sends it) and another worker running the retry;
- node failure: the attempt ends ``crashed``, the retry resumes as above. Slurm: the node set
  DOWN. Locally the worker's host going away is the worker SIGKILLed (its supervisor takes
  the job with it): the lease expires, the reaper crashes the attempt.

The first attempt of a preemption ends ``crashed``/``preempted`` on both executors (a worker
told to stop took the job back as a scheduler does). A node failure is named by what the
executor saw (``INTERRUPTED``): only a cluster scheduler says "node failed"; locally the
reaper sees a lease that expired (``crashed``). Both are retried by the same rule
(``runner.retry.ALWAYS_RETRIED``).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_for
from tests.support.runner import REAP, Proc, Procs, alive, read_json, script
from tests.support.slurm_cluster import SlurmCluster, slurm_jobs
from tracker.entities import JobInfo, JobSpec
from tracker.store import Store, logs, queue
from tracker.store import jobs as store_jobs
from tracker.store.diagnoses import list_diagnoses
from tracker.store.metrics import metric_history
from tracker.store.runs import get_run

KINDS = ["local", pytest.param("slurm", marks=pytest.mark.slurm)]

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

# a job stopped from outside -> (job status, failure class, run status)
STOPS: dict[str, tuple[str, str, str]] = {
    "timeout": ("timed_out", "timeout", "killed"),  # the job ignores SIGTERM
    "cancel": ("cancelled", "cancelled", "killed"),
}

# (row, executor) -> (status, failure class) of the attempt the row interrupted
INTERRUPTED: dict[tuple[str, str], tuple[str, str]] = {
    ("preemption", "local"): ("crashed", "preempted"),
    ("preemption", "slurm"): ("crashed", "preempted"),
    ("node failure", "local"): ("crashed", "crashed"),
    ("node failure", "slurm"): ("crashed", "node_fail"),
}


def _start(
    kind: str, procs: Procs, tmp: Path, request: pytest.FixtureRequest, *args: str,
    jobs: int = 1, local: Sequence[str] = (), until_idle: bool = True,
) -> Proc:  # fmt: skip
    """The worker or the dispatcher with ``args``; the worker runs ``jobs`` jobs at once and
    also gets ``local`` (the dispatcher hands Slurm up to 100)."""
    idle = ["--exit-when-idle"] if until_idle else []
    if kind == "local":
        return procs.worker("--gpus", "none", "--max-jobs", str(jobs), *local, *idle, *args)
    request.getfixturevalue("slurm")  # the cluster, started once per session
    return _dispatcher(procs, tmp, "dispatcher", *idle, *args)


def _dispatcher(procs: Procs, tmp: Path, name: str, *args: str) -> Proc:
    return procs.tracker(
        "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", "--log-dir",
        str(tmp / "slurm-logs"), *REAP, *args, name=name,
    )  # fmt: skip


def _stdout(store: Store, job_id: int) -> str:
    chunks = logs.logs_after(store, job_id, limit=10_000, stream="stdout")
    return "".join(c.text for c in chunks)


def _ended(store: Store, job_id: int, timeout: float, what: str) -> JobInfo:
    found: JobInfo = wait_for(
        lambda: (j := store_jobs.get_job(store, job_id)).is_final and j, timeout, what
    )
    return found


def _published(path: Path, timeout: float, what: str) -> str:
    text: str = wait_for(lambda: path.exists() and path.read_text(), timeout, what)
    return text


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
    starter = _start(kind, procs, tmp_path, request, jobs=3)
    for row, job in jobs.items():
        wait_for(
            lambda j=job.id: store_jobs.get_job(store, j).is_final, 120, f"the {row} job to end"
        )
    for row, (_, (status, cls, hint)) in TABLE.items():
        job = store_jobs.get_job(store, jobs[row].id)
        assert (job.status, job.failure_class) == (status, cls), (kind, row, job.failure_hint)
        assert hint in (job.failure_hint or ""), (kind, row, job.failure_hint)
        assert get_run(store, job.run_id).failure_class == cls, (kind, row)
    # the doctor recorded what it found whatever the policy: the run that succeeded too
    allowed = get_run(store, jobs["diverge-allowed"].run_id)
    assert allowed.status == "finished"
    assert "divergence" in {e.data["code"] for e in list_diagnoses(store, allowed.id) if e.data}
    assert _stdout(store, jobs["env"].id) == "MASTER_PORT=-\nBEHAVIOUR_MARK=from-starter\n"
    assert starter.wait(60) == 0, starter.output()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("store_url", "kind"),
    [("sqlite", "local"), ("postgresql", "local"),
     pytest.param("sqlite", "slurm", marks=pytest.mark.slurm)],
    indirect=["store_url"],
)  # fmt: skip
def test_timeout_and_cancel_end_the_job_and_its_process(
    kind: str, store: Store, procs: Procs, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = {row: tmp_path / row for row in STOPS}
    for d in out.values():
        d.mkdir()
    spec = {
        "timeout": JobSpec(argv=script("behaviour.py", "stubborn", str(out["timeout"])),
                           timeout_s=2),
        "cancel": JobSpec(argv=script("behaviour.py", "sleep", str(out["cancel"]))),
    }  # fmt: skip
    jobs = {row: queue.enqueue(store, spec[row]) for row in STOPS}
    starter = _start(kind, procs, tmp_path, request, "--grace-seconds", "1", jobs=2)
    pids = {row: int(_published(out[row] / "pid-1", 60, f"{row} job to start")) for row in STOPS}
    if kind == "slurm":
        cluster: SlurmCluster = request.getfixturevalue("slurm")
        [(slurm_id, _, _)] = slurm_jobs(cluster, store, jobs["timeout"].id)
        # 2 s, the 1 s grace, Slurm's 60 s signal slack: 63 s, rounded up to whole minutes
        assert "TimeLimit=00:02:00" in cluster.run("scontrol", "show", "job", "-o", slurm_id)
    said = procs.run("jobs", "cancel", str(jobs["cancel"].id))
    assert "cancel requested" in said.stdout, said.stdout + said.stderr
    for row, job in jobs.items():
        done = _ended(store, job.id, 240, f"the {row} job to end")
        status, cls, run_status = STOPS[row]
        assert (done.status, done.failure_class, done.attempt) == (status, cls, 1), (
            kind, row, done.failure_hint,
        )  # fmt: skip
        run = get_run(store, job.run_id)
        assert (run.status, run.failure_class) == (run_status, cls), (kind, row)
        wait_for(lambda p=pids[row]: not alive(p), 30, f"the {row} job's process to end")
    if kind == "slurm":  # Slurm itself stopped the job that ignored SIGTERM, at its time limit
        [(_, state, _)] = slurm_jobs(request.getfixturevalue("slurm"), store, jobs["timeout"].id)
        assert state == "TIMEOUT"
    assert starter.wait(60) == 0, starter.output()


def _interrupt(
    row: str, kind: str, starter: Proc, procs: Procs, request: pytest.FixtureRequest,
    store: Store, job_id: int,
) -> None:  # fmt: skip
    """Preempt the running job, or fail its node, the way ``kind`` can; a retry follows."""
    if kind == "local":
        starter.signal(signal.SIGTERM if row == "preemption" else signal.SIGKILL)
        starter.wait(30, "the stopped worker to exit")
        # another worker runs the retry (and reaps the killed worker's expired lease)
        procs.worker("--gpus", "none", name="second-worker")
        return
    cluster: SlurmCluster = request.getfixturevalue("slurm")
    [(slurm_id, _, _)] = slurm_jobs(cluster, store, job_id)
    if row == "preemption":
        cluster.run("scontrol", "requeue", slurm_id)
        return
    with cluster.node_down():
        wait_for(lambda: store_jobs.attempts(store, job_id)[0].status != "running", 90,
                 "the node failure to end attempt 1")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("row", ["preemption", "node failure"])
def test_interrupted_job_is_retried_from_its_last_verified_checkpoint(
    row: str, kind: str, store: Store, procs: Procs, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    job = queue.enqueue(
        store, JobSpec(argv=script("behaviour.py", "resume", str(out)), max_retries=1)
    )
    # a short lease: the reaper finds the SIGKILLed worker's job within seconds
    local = ["--lease-seconds", "2", "--no-housekeeping"]
    starter = _start(kind, procs, tmp_path, request, "--grace-seconds", "1", local=local,
                     until_idle=False)  # fmt: skip
    saved = _published(out / "saved-1", 120, "attempt 1 to checkpoint")
    first: Any = read_json(out / "attempt-1.json")
    _interrupt(row, kind, starter, procs, request, store, job.id)
    wait_for(lambda: not alive(first["pid"]), 60, "attempt 1's process to end")
    done = _ended(store, job.id, 180, "the retry to end")
    tries = store_jobs.attempts(store, job.id)
    assert [(t.status, t.failure_class) for t in tries] == [
        INTERRUPTED[row, kind],
        ("succeeded", None),
    ], (tries[0].failure_hint, done.failure_hint)
    assert (done.status, done.attempt) == ("succeeded", 2)
    assert tries[1].resume_checkpoint == saved  # step 2: the damaged step 3 was skipped
    second: Any = read_json(out / "attempt-2.json")
    assert (second["resume"], second["env"], second["start"]) == (saved, saved, 3)
    run = get_run(store, job.run_id)
    assert run.status == "finished"
    assert [p.step for p in metric_history(store, run.id, "loss")] == [0, 1, 2, 3, 4, 5]


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
    started = [
        _dispatcher(procs, tmp_path, f"dispatcher{n}", "--max-jobs", "2", "--exit-when-idle")
        for n in range(3)
    ]
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
