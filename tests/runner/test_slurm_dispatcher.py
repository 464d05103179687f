"""``tracker dispatcher --executor slurm`` against a real single-node Slurm cluster.

The cluster (munged, slurmctld, slurmd) starts once per session (tests/support/slurm_cluster.py);
these tests skip only where it cannot run (not root, Slurm not installed). Each test runs a
real dispatcher process against SQLite and PostgreSQL and real jobs through sbatch.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.polling import wait_for
from tests.support.runner import REAP, Proc, Procs, alive, read_json, script
from tests.support.slurm_cluster import SlurmCluster, slurm_jobs
from tests.support.web import free_port
from tracker.entities import JobSpec
from tracker.rules.slurm import SlurmSite
from tracker.runner.slurm import SlurmExecutor
from tracker.store import Store, logs, queue
from tracker.store import jobs as store_jobs
from tracker.store.metrics import metric_history
from tracker.store.runs import get_run, list_runs

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# A test that waits minutes of Slurm's own clock (time limits: whole minutes, 60 s of signal
# slack), in which the store plays no part, runs on SQLite only; the PostgreSQL half of every
# other test here runs.
SLURM_CLOCK = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def dispatcher(procs: Procs, tmp: Path, *args: str) -> Proc:
    log_dir = tmp / "slurm-logs"
    return procs.tracker(
        "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", "--log-dir",
        str(log_dir), *REAP, *args, name="dispatcher",
    )  # fmt: skip


def job_text(store: Store, job_id: int, stream: str | None = None) -> str:
    chunks = logs.logs_after(store, job_id, limit=10_000, stream=stream)
    return "".join(c.text for c in chunks if c.stream != "meta")


def ended(store: Store, job_id: int, timeout: float, what: str) -> object:
    return wait_for(lambda: (j := store_jobs.get_job(store, job_id)).is_final and j, timeout, what)


SPEAKER = """
import os, sys, time
print("first line é✓ " + os.environ["SLURM_JOB_ID"] + " " + os.environ["SITE"], flush=True)
print("to stderr", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print("last line ∑", flush=True)
"""


def test_job_runs_through_sbatch_and_streams_its_logs(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    template = tmp_path / "site.sh"
    template.write_text("#!/bin/sh\n#SBATCH --nice=0\nexport SITE=from-template\n")
    job = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", SPEAKER, str(release)]))
    dispatcher(procs, tmp_path, "--template", str(template))
    # streamed while the job still runs in Slurm
    wait_for(lambda: "first line" in job_text(store, job.id), 60, "the first line in the store")
    running = store_jobs.get_job(store, job.id)
    assert running.status == "running" and running.lease_owner.startswith("slurm-")
    [(slurm_id, state, _)] = slurm_jobs(slurm, store, job.id)
    assert state == "RUNNING"
    release.write_text("go")
    done = ended(store, job.id, 60, "the job to end")
    assert (done.status, done.exit_code, done.failure_class) == ("succeeded", 0, None)
    assert job_text(store, job.id, "stdout") == (
        f"first line é✓ {slurm_id} from-template\nlast line ∑\n"
    )
    assert job_text(store, job.id, "stderr") == "to stderr\n"
    assert get_run(store, job.run_id).status == "finished"
    [(_, state, _)] = slurm_jobs(slurm, store, job.id)
    assert state == "COMPLETED"
    shown = procs.run("jobs", "logs", str(job.id))
    assert "last line ∑" in shown.stdout
    # Slurm's job id is on the attempt: the store, `tracker jobs show` (+ --json), the API
    [attempt] = store_jobs.attempts(store, job.id)
    assert attempt.external_id == slurm_id
    show = procs.run("jobs", "show", str(job.id))
    assert "CLUSTER JOB" in show.stdout and f" {slurm_id} " in show.stdout, show.stdout
    as_json = json.loads(procs.run("jobs", "show", str(job.id), "--json").stdout)
    assert [a["external_id"] for a in as_json["attempts"]] == [slurm_id]
    assert store_jobs.external_ids(store, [job.id]) == {job.id: slurm_id}


def test_the_site_template_chooses_the_python_of_a_py_job(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    """``tracker submit train.py`` records ``python train.py``; a template that activates an
    environment (here: puts its bin first on PATH) runs the job under that python, and a
    template that chose none under the dispatcher's."""
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(f'#!/bin/sh\necho "site python" >&2\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    train = tmp_path / "train.py"
    train.write_text("print('trained')\n")
    template = tmp_path / "site.sh"
    template.write_text(f'#!/bin/sh\n#SBATCH --nice=0\nexport PATH="{bin_dir}:$PATH"\n')
    job = queue.enqueue(store, JobSpec(argv=["python", str(train)], cwd=str(tmp_path)))
    dispatcher(procs, tmp_path, "--template", str(template), "--exit-when-idle")
    done = ended(store, job.id, 90, "the job to end")
    assert (done.status, done.exit_code) == ("succeeded", 0), done.failure_hint
    assert job_text(store, job.id, "stdout") == "trained\n"
    assert job_text(store, job.id, "stderr") == "site python\n"


def test_failing_job_gets_its_failure_class(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    job = queue.enqueue(store, JobSpec(argv=script("fail.py", "oom")))
    dispatcher(procs, tmp_path)
    done = ended(store, job.id, 90, "the failing job to end")
    assert (done.status, done.failure_class) == ("failed", "cuda_oom")
    assert done.exit_code == 1 and "tried to allocate 2.00 GiB" in done.failure_hint
    assert get_run(store, job.run_id).failure_class == "cuda_oom"


def test_history_finds_ended_jobs_in_the_completion_log(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    # No accounting here, so sacct falls back to ``sacct -c`` over jobcomp/filetxt: what the
    # executor reads once slurmctld has forgotten a job (MinJobAge passed)
    executor = SlurmExecutor(SlurmSite(), str(tmp_path / "logs"))
    failing = slurm.run("sbatch", "--parsable", "--wrap", "exit 3").strip()
    sleeper = slurm.run("sbatch", "--parsable", "--wrap", "sleep 300").strip()
    wait_for(lambda: _state(slurm, sleeper) == "RUNNING", 60, "the sleeper to start")
    slurm.run("scancel", sleeper)
    for slurm_id in (failing, sleeper):
        wait_for(lambda i=slurm_id: executor.history(i), 60, f"job {slurm_id} in the log")
    failed = executor.history(failing)
    assert failed is not None and (failed.phase, failed.state, failed.exit_code) == (
        "ended", "FAILED", 3,
    )  # fmt: skip
    assert (failed.namespace, failed.job_id) == ("", 0)  # the completion log keeps no comment
    cancelled = executor.history(sleeper)
    assert cancelled is not None and (cancelled.state, cancelled.failure) == (
        "CANCELLED", "cancelled",
    )  # fmt: skip
    assert executor.history("987654") is None
    assert executor.job("987654") is None  # neither slurmctld nor its history knows it


def _state(cluster: SlurmCluster, slurm_id: str) -> str:
    return cluster.run("squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T").strip()


SLEEPER = """
import os, sys, time
open(sys.argv[1] + ".part", "w").write(str(os.getpid()))
os.replace(sys.argv[1] + ".part", sys.argv[1])
print("sleeping", flush=True)
time.sleep(600)
"""


def test_cancel_becomes_scancel_and_kills_the_job(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    job = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", SLEEPER, str(pid_file)]))
    dispatcher(procs, tmp_path)
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 60, "the job to start")
    pid = int(pid_file.read_text())
    assert store_jobs.cancel(store, job.id).outcome == "cancel_requested"
    done = ended(store, job.id, 60, "the cancelled job to end")
    assert (done.status, done.failure_class) == ("cancelled", "cancelled")
    [(_, state, _)] = slurm_jobs(slurm, store, job.id)
    assert state == "CANCELLED"
    wait_for(lambda: not alive(pid), 30, "the job's process to die")
    assert get_run(store, job.run_id).status == "killed"


@SLURM_CLOCK
def test_timeout_becomes_the_slurm_time_limit(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    """Stopped by the grace SIGTERM (Slurm: FAILED). A job that ignores the SIGTERM is stopped
    by the time limit itself (TIMEOUT): the behaviour table's timeout row
    (tests/runner/test_executor_behaviour.py), on both executors."""
    pid_file = tmp_path / "pid"
    argv = [sys.executable, "-c", SLEEPER, str(pid_file)]
    job = queue.enqueue(store, JobSpec(argv=argv, timeout_s=20))  # Slurm: 1 minute
    dispatcher(procs, tmp_path, "--grace-seconds", "10")
    wait_for(lambda: pid_file.exists(), 60, "the job to start")
    [(slurm_id, _, _)] = slurm_jobs(slurm, store, job.id)
    # 20 s, the 10 s grace, Slurm's 60 s signal slack: 90 s, rounded up to minutes
    assert "TimeLimit=00:02:00" in slurm.run("scontrol", "show", "job", "-o", slurm_id)
    done = ended(store, job.id, 240, "Slurm to stop the job at its time limit")
    assert (done.status, done.failure_class) == ("timed_out", "timeout")
    [(_, state, _)] = slurm_jobs(slurm, store, job.id)
    assert state == "FAILED"


TERM_CLOCK = """
import signal, sys, time
start = time.monotonic()
def term(signum, frame):
    open(sys.argv[1], "w").write(str(time.monotonic() - start))
signal.signal(signal.SIGTERM, term)
open(sys.argv[2], "w").write("started")
time.sleep(600)
"""


@SLURM_CLOCK
def test_job_gets_its_whole_timeout_before_the_grace_sigterm(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    term_file, started = tmp_path / "term", tmp_path / "started"
    argv = [sys.executable, "-c", TERM_CLOCK, str(term_file), str(started)]
    job = queue.enqueue(store, JobSpec(argv=argv, timeout_s=60))
    dispatcher(procs, tmp_path, "--grace-seconds", "10")
    wait_for(started.exists, 60, "the job to start")
    [(slurm_id, _, _)] = slurm_jobs(slurm, store, job.id)
    deadline = time.monotonic() + 62  # a limit of the timeout alone sent it within 50 s
    while time.monotonic() < deadline:
        assert not term_file.exists(), f"SIGTERM after {term_file.read_text()} s of a 60 s timeout"
        time.sleep(1)
    assert store_jobs.get_job(store, job.id).status == "running"
    # 60 s, the 10 s grace, Slurm's 60 s signal slack: 130 s, rounded up to minutes
    assert "TimeLimit=00:03:00" in slurm.run("scontrol", "show", "job", "-o", slurm_id)
    store_jobs.cancel(store, job.id)
    ended(store, job.id, 60, "the cancelled job to end")


def test_dispatcher_killed_and_restarted_submits_nothing_twice(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    release = tmp_path / "release"
    argv = script("jobscript.py", str(out), "--wait-for", str(release), "--lines", "3")
    job = queue.enqueue(store, JobSpec(argv=argv))
    first = dispatcher(procs, tmp_path)
    wait_for(lambda: "err 2" in job_text(store, job.id), 60, "the job's first output stored")
    first.signal(signal.SIGKILL)
    first.wait(10)
    [(slurm_id, state, _)] = slurm_jobs(slurm, store, job.id)
    assert state == "RUNNING"  # the job outlives its dispatcher
    second = dispatcher(procs, tmp_path)
    wait_for(
        lambda: store_jobs.get_job(store, job.id).lease_owner != first_owner(store, job.id),
        30,
        "the new dispatcher to adopt the job",
    )
    release.write_text("go")
    done = ended(store, job.id, 60, "the adopted job to end")
    assert (done.status, done.attempt) == ("succeeded", 1)
    assert [s for s, _, _ in slurm_jobs(slurm, store, job.id)] == [slurm_id]  # submitted once
    assert len(store_jobs.attempts(store, job.id)) == 1
    text = job_text(store, job.id)
    for line in ("out 0", "out 1", "out 2", "err 0", "err 1", "err 2", "done"):
        assert text.count(line + "\n") == 1, text  # nothing lost, nothing stored twice
    assert "adopted slurm job" in second.output()


def first_owner(store: Store, job_id: int) -> str:
    """The dispatcher that submitted the job (the first attempt's worker id)."""
    return store_jobs.attempts(store, job_id)[0].worker_id or ""


def test_requeue_marks_the_run_preempted_and_the_retry_resumes(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    job = queue.enqueue(store, JobSpec(argv=script("checkpointed.py", str(out)), max_retries=1))
    dispatcher(procs, tmp_path)
    saved = wait_for(lambda: (out / "saved-1").exists() and (out / "saved-1").read_text(), 120,
                     "attempt 1 to save a checkpoint")  # fmt: skip
    attempt1 = read_json(out / "attempt-1.json")
    [(slurm_id, _, _)] = slurm_jobs(slurm, store, job.id)
    slurm.run("scontrol", "requeue", slurm_id)
    done = ended(store, job.id, 180, "the retry to finish")
    assert (done.status, done.attempt) == ("succeeded", 2)
    tries = store_jobs.attempts(store, job.id)
    assert [(t.status, t.failure_class) for t in tries] == [
        ("crashed", "preempted"),
        ("succeeded", None),
    ]
    assert tries[1].resume_checkpoint == saved
    attempt2 = read_json(out / "attempt-2.json")
    assert attempt2["resume"] == saved and attempt2["start"] == 3
    assert not psutil.pid_exists(attempt1["pid"]) or not alive(attempt1["pid"])
    states = {s: st for s, st, _ in slurm_jobs(slurm, store, job.id)}
    assert len(states) == 2 and states[slurm_id] == "CANCELLED"  # the old copy never reruns


def test_node_failure_of_a_requeued_job_is_node_fail_and_never_cancelled_again(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    job = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", SLEEPER, str(pid_file)]))
    first = dispatcher(procs, tmp_path)
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 60, "the job to start")
    assert len(slurm_jobs(slurm, store, job.id)) == 1
    with slurm.node_down():  # the node fails
        done = ended(store, job.id, 90, "the node failure to end the attempt")
    assert done.failure_class == "node_fail", done.failure_hint
    assert "NODE_FAIL" in done.failure_hint
    [attempt] = store_jobs.attempts(store, job.id)
    assert attempt.failure_class == "node_fail"
    [(_, state, _)] = slurm_jobs(slurm, store, job.id)
    assert state == "CANCELLED"  # Slurm's requeued copy never reruns
    first.signal(signal.SIGKILL)
    first.wait(10)
    second = dispatcher(procs, tmp_path)  # sees the ended requeued job in squeue
    quick = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", "print('ok')"]))
    ended(store, quick.id, 60, "a job through the restarted dispatcher")  # it has polled
    assert "no longer holds the lease" not in second.output()  # no second scancel


TWO_STEPS = """
import sys, time
print("before", flush=True)
for name in sys.argv[1:]:
    while not __import__("os").path.exists(name):
        time.sleep(0.05)
    print("after " + name[-1], flush=True)
"""


def test_live_logs_keep_arriving_while_squeue_fails(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = slurm.conf.read_text()
    conf = tmp_path / "slurm.conf"  # the dispatcher's own: squeue fails while it is broken
    conf.write_text(good)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    a, b = tmp_path / "go-a", tmp_path / "go-b"
    job = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", TWO_STEPS, str(a), str(b)]))
    proc = dispatcher(procs, tmp_path)
    wait_for(lambda: "before" in job_text(store, job.id), 60, "the first line in the store")
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+$", "SlurmctldPort=1", good))
    wait_for(lambda: "listing the scheduler's jobs failed" in proc.output(), 60, "squeue to fail")
    a.write_text("go")
    wait_for(lambda: "after a" in job_text(store, job.id), 30, "a line stored while squeue fails")
    conf.write_text(good)
    b.write_text("go")
    done = ended(store, job.id, 60, "the job to end once squeue answers")
    assert done.status == "succeeded"
    assert job_text(store, job.id, "stdout") == "before\nafter a\nafter b\n"


def test_pending_reason_is_shown_while_slurm_holds_the_job(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    too_big = (os.cpu_count() or 1) + 64
    job = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", "pass"], cpus=too_big))
    proc = dispatcher(procs, tmp_path)
    waiting = wait_for(
        lambda: (j := store_jobs.get_job(store, job.id)).status == "running"
        and j.pending_reason and j, 60, "the Slurm pending reason on the claimed job",
    )  # fmt: skip
    assert waiting.pending_reason.startswith("slurm: ")
    [(_, state, reason)] = slurm_jobs(slurm, store, job.id)
    assert state == "PENDING" and waiting.pending_reason == f"slurm: {reason}"
    listed = procs.run("jobs", "ls", "--json")
    [row] = [j for j in json.loads(listed.stdout) if j["id"] == job.id]
    assert row["pending_reason"] == waiting.pending_reason
    # the dispatcher is listed among the workers, holding the job it has in Slurm
    [me] = json.loads(procs.run("workers", "ls", "--json").stdout)
    assert (me["executor"], me["status"], me["running_jobs"], me["gpus"]) == (
        "slurm", "running", [job.id], [],
    )  # fmt: skip
    assert "slurm" in procs.run("workers", "ls").stdout
    store_jobs.cancel(store, job.id)
    done = ended(store, job.id, 60, "the pending job to be cancelled")
    assert done.status == "cancelled" and done.pending_reason is None
    proc.signal(signal.SIGTERM)
    proc.wait(30)
    [me] = json.loads(procs.run("workers", "ls", "--all", "--json").stdout)
    assert (me["executor"], me["status"]) == ("slurm", "stopped")


def test_unreachable_controller_puts_the_job_back_until_it_answers(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    # sbatch runs with the job's environment: SLURM_CONF names a config whose controller
    # port answers nothing, a real "Unable to contact slurm controller" (squeue, run with the
    # dispatcher's own environment, still works); then the config is fixed.
    good = slurm.conf.read_text()
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+$", "SlurmctldPort=1", good))
    spec = JobSpec(argv=[sys.executable, "-c", "print('ran')"], env={"SLURM_CONF": str(conf)})
    job = queue.enqueue(store, spec)
    proc = dispatcher(procs, tmp_path)
    waiting = wait_for(
        lambda: (j := store_jobs.get_job(store, job.id)).pending_reason and j, 90,
        "the job back in the queue with the reason",
    )  # fmt: skip
    assert waiting.status == "queued" and waiting.attempt == 0, waiting
    assert "slurm could not be reached, trying again at" in waiting.pending_reason
    assert "Unable to contact slurm controller" in waiting.pending_reason
    assert store_jobs.attempts(store, job.id) == [] and slurm_jobs(slurm, store, job.id) == []
    conf.write_text(good)
    done = ended(store, job.id, 120, "the job to run once the controller answers")
    assert (done.status, done.attempt, done.pending_reason) == ("succeeded", 1, None)
    assert "ran\n" in job_text(store, job.id, "stdout")
    assert len(slurm_jobs(slurm, store, job.id)) == 1
    assert len(store_jobs.attempts(store, job.id)) == 1
    assert "could not be reached" in proc.output()


def test_bad_sbatch_option_is_refused_at_submit(procs: Procs, tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("print('hi')\n")
    refused = procs.run("submit", "--sbatch", "--output=/etc/passwd", "t.py")
    assert refused.returncode != 0 and "--output: not allowed" in refused.stderr


LAUNCHER = Path(__file__).resolve().parents[2] / "examples" / "slurm" / "multinode.sh"


def test_multinode_launcher_runs_srun_torchrun_with_gloo_on_one_node(
    slurm: SlurmCluster, store: Store, procs: Procs, tmp_path: Path
) -> None:
    # A port free now, not a fixed one: the other store's run of this test (or any process on
    # the host) may still hold a fixed port, and torchrun then fails to host its rendezvous.
    env = {"NPROC_PER_NODE": "2", "PYTHON": sys.executable, "RDZV_PORT": str(free_port())}
    spec = JobSpec(
        argv=["bash", str(LAUNCHER), *script("distributed.py")[1:]], project="dist", env=env,
        cpus=2, sbatch=("--nodes=1", "--ntasks-per-node=1"),
    )  # fmt: skip
    job = queue.enqueue(store, spec)
    dispatcher(procs, tmp_path)
    done = ended(store, job.id, 180, "the srun + torchrun job to end")
    text = job_text(store, job.id)
    assert done.status == "succeeded", (done.failure_hint, text)
    assert "rank 0 of 2 done" in text and "rank 1 of 2 done" in text
    run = get_run(store, job.run_id)
    assert [p.value for p in metric_history(store, run.id, "sum")] == [3.0, 3.0, 3.0]
    assert len(list_runs(store, project="dist")) == 1  # rank 1 created no run of its own
