"""Real ``tracker worker`` processes running real jobs (subprocesses with children)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_for
from tests.support.runner import Procs, alive, group_gone, read_json, script
from tracker.entities import JobSpec
from tracker.store import Store, logs, queue
from tracker.store import jobs as store_jobs
from tracker.store.runs import get_run

pytestmark = pytest.mark.slow


def enqueue(store: Store, argv: list[str], **kw: Any) -> Any:
    return queue.enqueue(store, JobSpec(argv=argv, **kw))


def status_is(store: Store, job_id: int, *statuses: str) -> Any:
    job = store_jobs.get_job(store, job_id)
    return job if job.status in statuses else None


def report(out: Path, job_id: int, attempt: int = 1) -> Any:
    return wait_for(
        lambda: read_json(out / f"{job_id}-{attempt}.json"),
        30,
        f"job {job_id} attempt {attempt} to start and write its report",
    )


def test_job_gets_ids_config_and_a_run_from_the_first_second(
    store: Store, procs: Procs, out: Path, tmp_path: Path
) -> None:
    (tmp_path / "tracked.py").write_text((Path(script("tracked.py")[1])).read_text())
    done = procs.run(
        "submit", "tracked.py", str(out), "-c", "lr=0.5", "-c", "model.width=16",
        "--project", "digits", "--env", "EXTRA_VAR=x", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert get_run(store, job["run_id"]).status == "queued"  # visible before any worker runs
    worker = procs.worker("--gpus", "none", "--once")
    assert worker.wait(60) == 0, worker.output()
    seen = read_json(out / "tracked.json")
    assert seen["run_id"] == job["run_id"]
    assert seen["config"] == {"lr": 0.5, "model": {"width": 16, "depth": 2}}  # deep-merged
    env = seen["env"]
    assert env["TRACKER_JOB_ID"] == str(job["id"]) and env["TRACKER_RUN_ID"] == str(job["run_id"])
    assert env["TRACKER_PROJECT"] == "digits" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert json.loads(env["TRACKER_CONFIG"]) == {"lr": 0.5, "model": {"width": 16}}
    assert "TRACKER_RESUME_CHECKPOINT" not in env
    ran_in = Path(seen["cwd"])
    if store.dialect == "sqlite":  # in its own copy of the code (a snapshot of this directory)
        assert ran_in.parts[-2:] == (f"job-{job['id']}", "attempt-1"), ran_in
        assert (ran_in / "tracked.py").read_text() == (tmp_path / "tracked.py").read_text()
    else:  # no artifact root: no snapshot, the job runs here (a worker on the same host)
        assert ran_in == tmp_path
    run = get_run(store, job["run_id"])
    assert (run.status, run.project, run.config["model"]) == (
        "finished", "digits", {"width": 16, "depth": 2},
    )  # fmt: skip
    assert run.last_metrics["loss"] == pytest.approx(1 / 3)
    assert store_jobs.get_job(store, job["id"]).status == "succeeded"


def test_shell_metacharacters_are_passed_literally(store: Store, procs: Procs, out: Path) -> None:
    sentinel = out / "sentinel"
    nasty = [f"; touch {sentinel}", f"$(touch {sentinel})", f"`touch {sentinel}`",
             f"| touch {sentinel}", f"&& touch {sentinel}", "*", "$HOME", "'\"", "\\n"]  # fmt: skip
    code = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"
    job = enqueue(store, [sys.executable, "-c", code, str(out / "args.json"), *nasty])
    via_cli = procs.run("submit", "--", sys.executable, "-c", code, str(out / "cli.json"), *nasty)
    assert via_cli.returncode == 0, via_cli.stderr
    worker = procs.worker("--gpus", "none", "--exit-when-idle")
    assert worker.wait(60) == 0, worker.output()
    assert status_is(store, job.id, "succeeded")
    assert read_json(out / "args.json") == nasty
    assert read_json(out / "cli.json") == nasty
    assert not sentinel.exists()


def test_priority_then_fifo_order(store: Store, procs: Procs, out: Path) -> None:
    code = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')"
    order = out / "order.txt"
    for name, priority in [("a", 0), ("b", 3), ("c", 0), ("d", 3), ("e", 9), ("f", -1)]:
        enqueue(store, [sys.executable, "-S", "-c", code, str(order), name], priority=priority)
    worker = procs.worker("--gpus", "none", "--exit-when-idle", "--max-jobs", "1")
    assert worker.wait(60) == 0, worker.output()
    assert order.read_text().split() == ["e", "b", "d", "a", "c", "f"]


@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_cancel_and_timeout_leave_no_process_of_the_group(
    store: Store, procs: Procs, out: Path, how: str
) -> None:
    args = ["--children", "2", "--children-ignore-term", "--sleep", "100"]
    timeout = {"timeout_s": 2.0} if how == "timeout" else {}
    job = enqueue(store, script("jobscript.py", str(out), *args), max_retries=0, **timeout)
    procs.worker("--gpus", "none", "--grace-seconds", "1")
    seen = report(out, job.id)
    pids = [seen["pid"], *seen["children"]]
    assert seen["pgid"] == seen["pid"]  # the job leads its own process group
    if how == "cancel":
        done = procs.run("jobs", "cancel", str(job.id))
        assert "cancel requested" in done.stdout, done.stdout + done.stderr
    expected = "cancelled" if how == "cancel" else "timed_out"
    final = wait_for(lambda: status_is(store, job.id, expected), 30, f"job to be {expected}")
    assert final.failure_class == ("cancelled" if how == "cancel" else "timeout")
    wait_for(lambda: not any(alive(p) for p in pids), 10, "every process of the job to die")
    wait_for(lambda: group_gone(seen["pgid"]), 30, "the process group to disappear")
    run = get_run(store, job.run_id)
    assert run.status == "killed" and run.failure_class == final.failure_class


def test_sigterm_drains_then_kills_after_the_grace_period(
    store: Store, procs: Procs, out: Path
) -> None:
    polite = enqueue(store, script("jobscript.py", str(out), "--graceful-term", "--sleep", "100"))
    stubborn = enqueue(
        store,
        script("jobscript.py", str(out), "--ignore-term", "--children", "1", "--sleep", "100"),
    )
    waiting = enqueue(store, script("jobscript.py", str(out)))
    worker = procs.worker("--gpus", "none", "--max-jobs", "2", "--grace-seconds", "2")
    reports = [report(out, polite.id), report(out, stubborn.id)]
    worker.signal(signal.SIGTERM)
    assert worker.wait(30, "the worker to drain and exit") == 0, worker.output()
    assert (out / f"{polite.id}-1.term").read_text() == "got SIGTERM"
    assert status_is(store, polite.id, "succeeded")  # it ended cleanly within the grace
    # taken back by its worker, as a scheduler preempts a job (the same on every executor)
    killed = status_is(store, stubborn.id, "crashed")
    assert killed and killed.failure_class == "preempted" and killed.exit_code == -signal.SIGKILL
    assert "shut down" in killed.failure_hint
    assert status_is(store, waiting.id, "queued")  # no claims after the signal
    pids = [p for r in reports for p in [r["pid"], *r["children"]]]
    wait_for(lambda: not any(alive(p) for p in pids), 10, "the jobs' processes to die")
    assert "stopping; SIGTERM sent to 2 job(s)" in worker.output()


def test_a_second_signal_kills_at_once(store: Store, procs: Procs, out: Path) -> None:
    job = enqueue(store, script("jobscript.py", str(out), "--ignore-term", "--sleep", "100"))
    worker = procs.worker("--gpus", "none", "--grace-seconds", "600")
    seen = report(out, job.id)
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "stopping" in worker.output(), 20, "the worker to start draining")
    worker.signal(signal.SIGINT)
    assert worker.wait(30, "the worker to exit long before its 600 s grace") == 0
    assert not alive(seen["pid"])
    assert status_is(store, job.id, "crashed").failure_class == "preempted"


FAILURES = [
    ("oom", "cuda_oom", "tried to allocate 2.00 GiB"),
    ("nccl", "nccl", "ALLREDUCE timed out after 600.023 s on rank 1"),
    ("exception", "python_exception", "ValueError: bad value 42 in batch 7"),
    ("exit137", "killed_by_signal", "SIGKILL"),
    ("sigkill", "killed_by_signal", "SIGKILL"),
]


def test_failures_of_real_scripts_are_classified(store: Store, procs: Procs) -> None:
    jobs = {mode: enqueue(store, script("fail.py", mode)) for mode, _, _ in FAILURES}
    worker = procs.worker("--gpus", "none", "--exit-when-idle", "--max-jobs", "3")
    assert worker.wait(90) == 0, worker.output()
    for mode, cls, hint in FAILURES:
        job = store_jobs.get_job(store, jobs[mode].id)
        assert (job.status, job.failure_class) == ("failed", cls), (mode, job.failure_hint)
        assert hint in job.failure_hint, (mode, job.failure_hint)
        run = get_run(store, job.run_id)
        assert (run.status, run.failure_class, run.failure_hint) == (
            "failed",
            cls,
            job.failure_hint,
        )
    assert store_jobs.get_job(store, jobs["exit137"].id).exit_code == 137
    assert store_jobs.get_job(store, jobs["sigkill"].id).exit_code == -signal.SIGKILL


def test_diverging_example_is_classified_as_nonfinite_loss(store: Store, procs: Procs) -> None:
    example = Path(__file__).parents[2] / "examples" / "train_diverge.py"
    job = enqueue(store, [sys.executable, str(example)], project="examples")
    worker = procs.worker("--gpus", "none", "--once")
    assert worker.wait(120) == 0, worker.output()
    job = store_jobs.get_job(store, job.id)
    assert (job.status, job.failure_class) == ("failed", "nonfinite_loss"), job.failure_hint
    assert "NonFiniteLossError: loss is" in job.failure_hint
    assert " at step " in job.failure_hint


def test_cpu_worker_leaves_gpu_jobs_queued_with_a_reason(
    store: Store, procs: Procs, out: Path
) -> None:
    gpu_job = enqueue(store, script("jobscript.py", str(out)), gpus=1)
    cpu_job = enqueue(store, script("jobscript.py", str(out)))
    procs.worker("--gpus", "none")
    wait_for(lambda: status_is(store, cpu_job.id, "succeeded"), 30, "the CPU job to run")
    waiting = wait_for(
        lambda: (j := store_jobs.get_job(store, gpu_job.id)).pending_reason and j, 30, "a reason"
    )
    assert waiting.status == "queued"
    shown = procs.run("jobs", "show", str(gpu_job.id))
    assert "waiting because: needs 1 GPU(s), but every live worker is CPU-only" in shown.stdout
    as_json = json.loads(procs.run("jobs", "show", str(gpu_job.id), "--json").stdout)
    assert "CPU-only" in as_json["pending_reason"]


def test_gpu_worker_assigns_devices_and_explains_what_does_not_fit(
    store: Store, procs: Procs, out: Path
) -> None:
    too_big = enqueue(store, script("jobscript.py", str(out)), gpus=3, priority=5)
    pair = enqueue(store, script("jobscript.py", str(out), "--sleep", "0.5"), gpus=2)
    single = enqueue(store, script("jobscript.py", str(out)), gpus=1)
    procs.worker("--gpus", "0,1", "--max-jobs", "2")
    assert report(out, pair.id)["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    wait_for(lambda: status_is(store, single.id, "succeeded"), 30, "the 1-GPU job to run")
    assert report(out, single.id)["env"]["CUDA_VISIBLE_DEVICES"] in ("0", "1")
    reason = wait_for(lambda: store_jobs.get_job(store, too_big.id).pending_reason, 30, "a reason")
    assert reason.startswith("needs 3 GPU(s); the largest live worker (")


def test_output_is_streamed_trimmed_and_followable(store: Store, procs: Procs, out: Path) -> None:
    argv = script("jobscript.py", str(out), "--lines", "5000", "--stdout-only", "--sleep", "1")
    job = enqueue(store, argv)
    procs.worker("--gpus", "none", "--log-limit", "20000")
    follow = procs.tracker("jobs", "logs", str(job.id), "--follow", "--interval", "0.1",
                           name="follow")  # fmt: skip
    assert follow.wait(60, "jobs logs --follow to end with the job") == 0
    # the output, then the final status (stderr) once the job ended
    assert follow.output().endswith(f"out 4999\ndone\njob {job.id} succeeded: exit code 0\n")
    chunks = logs.logs_after(store, job.id, limit=100_000)
    assert chunks[0].stream == "meta" and "older output were trimmed" in chunks[0].text
    assert sum(len(c.text) for c in chunks if c.stream != "meta") <= 20000
    text = "".join(c.text for c in chunks[1:])
    first = int(text.split("\n", 1)[0].removeprefix("out "))
    assert first > 0 and text == "".join(f"out {i}\n" for i in range(first, 5000)) + "done\n"


def test_stdout_and_stderr_are_kept_apart(store: Store, procs: Procs, out: Path) -> None:
    job = enqueue(store, script("jobscript.py", str(out), "--lines", "5"))
    worker = procs.worker("--gpus", "none", "--once")
    assert worker.wait(60) == 0, worker.output()
    chunks = logs.logs_after(store, job.id)
    by_stream = {s: "".join(c.text for c in chunks if c.stream == s) for s in ("stdout", "stderr")}
    assert by_stream == {
        "stdout": "".join(f"out {i}\n" for i in range(5)) + "done\n",
        "stderr": "".join(f"err {i}\n" for i in range(5)),
    }
    printed = procs.run("jobs", "logs", str(job.id), "--stream", "stderr")
    assert printed.stdout == by_stream["stderr"]
    both = procs.run("jobs", "logs", str(job.id)).stdout
    assert sorted(both.splitlines()) == sorted(
        (by_stream["stdout"] + by_stream["stderr"]).splitlines()
    )


def test_missing_script_or_directory_fails_the_job_clearly(
    store: Store, procs: Procs, tmp_path: Path
) -> None:
    missing = enqueue(store, [str(tmp_path / "no-such-program")])
    bad_dir = enqueue(store, [sys.executable, "-c", "pass"], cwd=str(tmp_path / "gone"))
    worker = procs.worker("--gpus", "none", "--exit-when-idle")
    assert worker.wait(60) == 0, worker.output()
    for job in (missing, bad_dir):
        job = store_jobs.get_job(store, job.id)
        assert (job.status, job.failure_class) == ("failed", "missing_file"), job.failure_hint
    assert "no-such-program" in store_jobs.get_job(store, missing.id).failure_hint
    assert "does not exist" in store_jobs.get_job(store, bad_dir.id).failure_hint


def test_worker_refuses_bad_gpus_option(procs: Procs) -> None:
    done = procs.run("worker", "--gpus", "zero")
    assert done.returncode == 2 and "--gpus" in done.stderr


def test_workers_ls_shows_live_workers(store: Store, procs: Procs, out: Path) -> None:
    job = enqueue(store, script("jobscript.py", str(out), "--sleep", "100"))
    procs.worker("--gpus", "0,1", "--name", "gpu-box-1")
    report(out, job.id)
    listed = json.loads(procs.run("workers", "ls", "--json").stdout)
    assert [(w["id"], w["running_jobs"], [g["index"] for g in w["gpus"]]) for w in listed] == [
        ("gpu-box-1", [job.id], [0, 1])
    ]
    table = procs.run("workers", "ls").stdout
    assert "gpu-box-1" in table and "0,1" in table
    assert os.environ.get("TRACKER_URI") is None  # the test process itself is untouched


def test_workers_check_is_a_health_check_for_this_hosts_worker(
    store: Store, procs: Procs, out: Path
) -> None:
    """`tracker workers check` (the compose health check) fails with no worker on this
    host, passes while one runs, names another host's absence, and fails once it stopped."""
    before = procs.run("workers", "check")
    assert before.returncode == 1 and "no live worker on host" in before.stderr
    job = enqueue(store, script("jobscript.py", str(out), "--sleep", "100"))
    worker = procs.worker("--name", "box-1")
    report(out, job.id)
    alive_now = procs.run("workers", "check")
    assert alive_now.returncode == 0 and "box-1" in alive_now.stdout
    elsewhere = procs.run("workers", "check", "--host", "another-host")
    assert elsewhere.returncode == 1 and "'another-host'" in elsewhere.stderr
    worker.signal(signal.SIGINT)
    worker.signal(signal.SIGINT)  # the second one kills the job at once
    worker.wait(60)
    after = procs.run("workers", "check")
    assert after.returncode == 1 and "box-1 (stopped)" in after.stderr
