"""Sweeps that learn, end to end (issue 31): ``tracker sweep --method ... --prune median``
over a plain training script (tests/runner/scripts/sweep_trial.py: ``tracker.init`` and
``tracker.log``, no Optuna), run by a real ``tracker worker --max-jobs 2`` and by a real
``tracker dispatcher`` on the single-node Slurm cluster; followed with ``tracker sweeps show
--json`` until it says finished.

Both executors give the same verdict: the budget is spent exactly (trials 0..N-1, one job
each), the trials whose params are bad are pruned while they run, their jobs end ``pruned``
with class ``pruned``, and no process of theirs is left (under Slurm: the Slurm job is
cancelled too). The seed is fixed, so which trials are bad is known before the sweep starts:
``bad=1`` trials are slow and ten times worse, the pruner has no choice to make.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.polling import wait_for
from tests.support.runner import REAP, SCRIPTS, Procs, alive
from tests.support.slurm_cluster import SlurmCluster, slurm_jobs
from tests.support.web import free_port
from tracker.rules.sweep import parse_overrides
from tracker.rules.sweep_search import SweepSettings, TrialRecord, next_params
from tracker.store import Store
from tracker.store.runs import get_run

pytestmark = pytest.mark.slow

SPACE = ["lr=loguniform(1e-4,1e-1)", "bad=0,1"]
# With this seed trials 0-4 draw bad=0 and 5-7 bad=1 (checked by planned_bad): the median
# pruner (5 startup trials) has five good trials finished before any bad one is judged.
SEED = 10
STARTUP = 5  # the median pruner's n_startup_trials (tracker.rules.sweep_search)


def planned_bad(method: str, trials: int) -> list[int]:
    """The ``bad`` param each trial will get, from the same pure rule the controller uses."""
    settings = SweepSettings(method=method, metric="val/loss", trials=trials, parallel=2,
                             prune="median", seed=SEED)  # fmt: skip
    parsed = parse_overrides(SPACE)
    history: list[TrialRecord] = []
    for number in range(trials):
        params, _ = next_params(replace(settings), parsed, history, number, "plan")
        history.append(TrialRecord(number, params, "complete", 1.0 + 10 * params["bad"]))
    return [int(t.params["bad"]) for t in history]


def start_sweep(procs: Procs, out: Path, method: str, trials: int) -> int:
    """``tracker sweep train.py ...`` in the test's directory; the sweep's id."""
    expected = planned_bad(method, trials)
    assert expected[:STARTUP] == [0] * STARTUP and 1 in expected[STARTUP:], (
        f"seed {SEED} no longer plans good trials first and a bad one after: {expected}"
    )
    shutil.copy(SCRIPTS / "sweep_trial.py", procs.tmp / "train.py")
    created = procs.run(
        "sweep", "train.py", *[a for text in SPACE for a in ("-c", text)], "--method", method,
        "--metric", "val/loss", "--trials", str(trials), "--parallel", "2", "--prune", "median",
        "--seed", str(SEED), "--no-snapshot", "--uri", procs.uri, "--json", "--", str(out),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return int(json.loads(created.stdout)["id"])


def show(procs: Procs, sweep_id: int) -> dict[str, Any]:
    shown = procs.run("sweeps", "show", str(sweep_id), "--uri", procs.uri, "--json")
    assert shown.returncode == 0, shown.stderr
    answer: dict[str, Any] = json.loads(shown.stdout)
    return answer


def finished(procs: Procs, sweep_id: int, timeout: float) -> dict[str, Any]:
    """``tracker sweeps show --json`` once it says finished."""
    answer: dict[str, Any] = wait_for(
        lambda: (s := show(procs, sweep_id))["sweep"]["status"] == "finished" and s,
        timeout,
        f"sweep {sweep_id} to finish",
        interval=0.5,
    )
    return answer


def job_json(procs: Procs, job_id: int) -> dict[str, Any]:
    shown = procs.run("jobs", "show", str(job_id), "--uri", procs.uri, "--json")
    assert shown.returncode == 0, shown.stderr
    job: dict[str, Any] = json.loads(shown.stdout)["job"]
    return job


def pids(out: Path, job_ids: list[int]) -> dict[int, int]:
    """Job id -> the pid its trial's process wrote (every trial started)."""
    return {j: int((out / f"{j}.pid").read_text()) for j in job_ids}


def script_processes(out: Path) -> list[int]:
    """Pids of live processes whose command line names ``out`` (this test's trials)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if str(out) in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p.pid)
    return found


def check_verdict(procs: Procs, store: Store, answer: dict[str, Any], method: str,
                  trials: int, out: Path) -> list[dict[str, Any]]:  # fmt: skip
    """What both executors must show; the pruned trials."""
    sweep, found = answer["sweep"], answer["trials"]
    assert sweep["trials"] == trials and len(found) == trials
    assert [t["number"] for t in found] == list(range(trials))
    jobs = [t["job_id"] for t in found]
    assert None not in jobs and len(set(jobs)) == trials  # one job per trial
    listed = json.loads(procs.run("jobs", "ls", "--uri", procs.uri, "--json").stdout)
    assert sorted(j["id"] for j in listed) == sorted(jobs)  # and no other job was queued
    for t in found:
        assert job_json(procs, t["job_id"])["config"] == t["params"]
        assert f"sweep-{sweep['id']}" in get_run(store, t["run_id"]).tags
    bad = planned_bad(method, trials)
    assert [t["params"]["bad"] for t in found] == bad
    pruned = [t for t in found if t["state"] == "pruned"]
    assert [t["number"] for t in pruned] == [n for n, b in enumerate(bad) if b], found
    assert all(t["state"] == "complete" for t in found if not bad[t["number"]])
    assert sweep["best"]["params"]["bad"] == 0 and sweep["note"].startswith("best: trial ")
    for t in pruned:
        job = job_json(procs, t["job_id"])
        assert (job["status"], job["failure_class"]) == ("pruned", "pruned"), job
        assert job["failure_hint"].startswith(f"Pruned by sweep {sweep['id']} (median)")
        run = get_run(store, t["run_id"])
        assert (run.status, run.failure_class) == ("killed", "pruned")
        assert t["pruned_step"] is not None and t["pruned_step"] < 9  # stopped mid-run
    started = pids(out, jobs)
    gone = [started[t["job_id"]] for t in pruned]
    wait_for(lambda: not [p for p in gone if alive(p)], 15,
             f"the pruned trials' processes {gone} to be gone")  # fmt: skip
    wait_for(lambda: not script_processes(out), 15,
             "no process of the sweep's script to be left")  # fmt: skip
    return pruned


@pytest.mark.parametrize("method", ["tpe", "random"])
def test_local_worker_runs_a_pruned_sweep_to_its_budget(
    store: Store, procs: Procs, out: Path, method: str
) -> None:
    sweep_id = start_sweep(procs, out, method, trials=8)
    procs.worker("--gpus", "none", "--max-jobs", "2", "--grace-seconds", "2")
    answer = finished(procs, sweep_id, 150)
    check_verdict(procs, store, answer, method, 8, out)


def test_slurm_dispatcher_runs_a_pruned_sweep_and_cancels_the_pruned_slurm_job(
    slurm: SlurmCluster, store: Store, procs: Procs, out: Path
) -> None:
    trials = 6
    sweep_id = start_sweep(procs, out, "random", trials)
    procs.tracker(
        "dispatcher", "--poll-interval", "0.3", "--lease-seconds", "6", "--log-dir",
        str(procs.tmp / "slurm-logs"), "--grace-seconds", "2", *REAP, name="dispatcher",
    )  # fmt: skip
    answer = finished(procs, sweep_id, 180)
    pruned = check_verdict(procs, store, answer, "random", trials, out)
    for t in pruned:
        [(slurm_id, state, _)] = slurm_jobs(slurm, store, t["job_id"])
        assert state == "CANCELLED", (slurm_id, state)
    for t in answer["trials"]:
        if t["state"] == "complete":
            [(_, state, _)] = slurm_jobs(slurm, store, t["job_id"])
            assert state == "COMPLETED"


# ----------------------------------------------------------------------------- MLflow


def dashboard(procs: Procs) -> str:
    """A real ``tracker ui`` (no auth) on the test's store; its URL once it answers."""
    port = free_port()
    procs.tracker("ui", "--no-auth", "--port", str(port), "--uri", procs.uri, name="ui")
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2) as answer:
                return int(answer.status) == 200
        except OSError:
            return False

    wait_for(up, 60, "the dashboard to answer", interval=0.2)
    return url


def test_a_sweep_over_an_mlflow_logged_script_reads_what_mlflow_logged(
    store: Store, procs: Procs, out: Path
) -> None:
    """The script calls ``mlflow.start_run()`` and ``log_metric("val_loss", ...)`` only;
    the worker's jobs log to the dashboard (``--job-uri``), so each logs into its job's run
    (MLFLOW_RUN_ID, :func:`tracker.runner.job_env.mlflow_run_env`) and the sweep reads its
    objective from there."""
    url = dashboard(procs)
    shutil.copy(SCRIPTS / "sweep_mlflow.py", procs.tmp / "train.py")
    trials = 4
    created = procs.run(
        "sweep", "train.py", "-c", "lr=loguniform(1e-4,1e-1)", "-c", "width=64,128",
        "--method", "random", "--metric", "val_loss", "--trials", str(trials), "--parallel",
        "2", "--seed", "3", "--no-snapshot", "--uri", procs.uri, "--json", "--", str(out),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    sweep_id = int(json.loads(created.stdout)["id"])
    base = procs.env
    quiet = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_DISABLE_TELEMETRY": "true"}
    procs.env = lambda: {  # type: ignore[method-assign]
        **{k: v for k, v in base().items() if not k.startswith("MLFLOW_")},
        **quiet,
    }
    procs.worker("--gpus", "none", "--max-jobs", "2", "--job-uri", url)
    answer = finished(procs, sweep_id, 180)
    found = answer["trials"]
    assert [t["number"] for t in found] == list(range(trials))
    assert [t["state"] for t in found] == ["complete"] * trials, found
    for t in found:
        report = json.loads((out / f"{t['job_id']}.json").read_text())
        assert report["run_id"] == str(t["run_id"])  # MLflow logged into the job's run
        assert t["value"] == pytest.approx(report["last"], rel=1e-12)
        run = get_run(store, t["run_id"])
        assert run.config["lr"] == pytest.approx(t["params"]["lr"])
        assert int(run.config["width"]) == t["params"]["width"]
        assert job_json(procs, t["job_id"])["status"] == "succeeded"
    # no run of MLflow's own beside the jobs' runs
    runs = json.loads(procs.run("runs", "ls", "--uri", procs.uri, "--json").stdout)
    assert sorted(r["id"] for r in runs) == sorted(t["run_id"] for t in found)
    best = min(found, key=lambda t: t["value"])
    assert answer["sweep"]["best"]["number"] == best["number"]
