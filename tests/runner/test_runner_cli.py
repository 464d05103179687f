"""The queue's CLI: submit, sweep, jobs, workers and schedule commands (in-process click)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from tracker.cli import main
from tracker.store import Store
from tracker.store import jobs as store_jobs
from tracker.store import workers as store_workers
from tracker.store.runs import get_run


@pytest.fixture
def cli(store_url: str, tmp_path: Path) -> Any:
    (tmp_path / "train.py").write_text("print('hi')\n")

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), env={"TRACKER_URI": store_url})

    return invoke


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def test_submit_stores_every_option(cli: Any, store: Store, tmp_path: Path) -> None:
    done = ok(cli(
        "submit", "train.py", "-c", "lr=3e-4", "-c", "model.width=128", "--gpus", "1",
        "--gpu-memory", "20GiB", "--priority", "5", "--timeout", "2h", "--retries", "2",
        "--retry-on-failure", "--project", "digits", "--name", "first", "--tag", "baseline",
        "--env", "OMP_NUM_THREADS=4", "--json", "--", "--epochs", "3",
    ))  # fmt: skip
    job = json.loads(done.stdout)
    stored = store_jobs.get_job(store, job["id"])
    # recorded relative to the project root (here the submit directory): see job_command
    assert stored.argv == ["python", "train.py", "--epochs", "3"]
    assert stored.cwd == "."
    assert stored.config == {"lr": 3e-4, "model": {"width": 128}}
    assert (stored.gpus, stored.gpu_memory_bytes) == (1, 20 * 1024**3)
    assert (stored.priority, stored.timeout_s, stored.max_retries) == (5, 7200.0, 2)
    assert stored.retry_on_failure and stored.env == {"OMP_NUM_THREADS": "4"}
    run = get_run(store, stored.run_id)
    assert (run.name, run.project, run.tags, run.status) == (
        "first", "digits", ["baseline"], "queued",
    )  # fmt: skip


def test_submit_a_plain_command_after_double_dash(cli: Any, store: Store) -> None:
    ok(cli("submit", "--", "bash", "-c", "echo $HOME; exit 3"))
    assert store_jobs.list_jobs(store)[0].argv == ["bash", "-c", "echo $HOME; exit 3"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "script missing.py does not exist"),
        (["train.py", "-c", "lr=1e-4,3e-4"], "several values need `tracker sweep`"),
        (["train.py", "-c", "lr"], "expected key=value"),
        (["train.py", "--timeout", "soon"], "duration 'soon'"),
        (["train.py", "--gpu-memory", "20"], "give a size with a unit"),
        (["train.py", "--env", "CUDA_VISIBLE_DEVICES=1"], "is set by the worker"),
        (["train.py", "--env", "SURELY_NOT_SET_ANYWHERE"], "not set in this environment"),
    ],
)
def test_submit_refuses_bad_input_and_stores_nothing(
    cli: Any, store: Store, args: list[str], message: str
) -> None:
    done = cli("submit", *args)
    assert done.exit_code == 2 and message in done.output, done.output
    assert store_jobs.list_jobs(store) == []


def test_sweep_grid_and_random(cli: Any, store: Store) -> None:
    grid = json.loads(ok(cli(
        "sweep", "train.py", "-c", "lr=1e-4,3e-4,1e-3", "-c", "model.width=64,128", "--json",
    )).stdout)  # fmt: skip
    configs = [j["config"] for j in grid["jobs"]]
    assert len(configs) == 6 and {"lr": 1e-3, "model": {"width": 128}} in configs
    assert all(grid["tag"] in get_run(store, j["run_id"]).tags for j in grid["jobs"])
    first = json.loads(ok(cli(
        "sweep", "train.py", "--random", "5", "--seed", "7", "-c", "lr=loguniform(1e-5,1e-2)",
        "-c", "seed=0,1,2", "--json",
    )).stdout)  # fmt: skip
    again = json.loads(ok(cli(
        "sweep", "train.py", "--random", "5", "--seed", "7", "-c", "lr=loguniform(1e-5,1e-2)",
        "-c", "seed=0,1,2", "--dry-run", "--json",
    )).stdout)  # fmt: skip
    assert [j["config"] for j in first["jobs"]] == again  # the seed reproduces the samples
    assert all(1e-5 <= c["lr"] <= 1e-2 and c["seed"] in (0, 1, 2) for c in again)
    assert len(store_jobs.list_jobs(store)) == 11


def test_jobs_ls_show_cancel_requeue(cli: Any, store: Store) -> None:
    ok(cli("submit", "train.py", "--project", "a"))
    ok(cli("submit", "train.py", "--project", "b", "--gpus", "2"))
    ok(cli("submit", "train.py", "--project", "a", "--priority", "5"))
    listed = json.loads(ok(cli("jobs", "ls", "--json")).output)
    assert [j["id"] for j in listed] == [3, 2, 1]
    assert [j["position"] for j in listed] == [1, 3, 2]  # the order a worker claims them in
    assert "POS" in ok(cli("jobs", "ls")).output
    assert "queue position:  3" in ok(cli("jobs", "show", "2")).output
    ok(cli("jobs", "cancel", "3"))
    assert [j["id"] for j in json.loads(ok(cli("jobs", "ls", "--project", "a", "--json")).output)]
    table = ok(cli("jobs", "ls")).output
    assert "train.py" in table and "queued" in table
    shown = ok(cli("jobs", "show", "2")).output
    assert "waiting because: no live worker" in shown and "2 GPU(s)" in shown
    assert "cancelled" in ok(cli("jobs", "cancel", "1")).output
    assert "already cancelled" in ok(cli("jobs", "cancel", "1")).output
    cancelled = json.loads(ok(cli("jobs", "ls", "--status", "cancelled", "--json")).output)
    assert [j["id"] for j in cancelled] == [3, 1] and cancelled[0]["position"] is None
    assert "queued again" in ok(cli("jobs", "requeue", "1")).output
    missing = cli("jobs", "show", "99")
    assert missing.exit_code == 2 and "job 99 does not exist" in missing.output
    bad = cli("jobs", "ls", "--status", "done")
    assert bad.exit_code == 2 and "'done' is not one of 'queued', 'running'" in bad.output
    assert ok(cli("jobs", "logs", "2")).output == ""


def test_workers_ls_json(cli: Any, store: Store) -> None:
    assert json.loads(ok(cli("workers", "ls", "--json")).output) == []
    store_workers.register_worker(store, "w-1", host="h", pid=7, gpus=[], max_jobs=2)
    [worker] = json.loads(ok(cli("workers", "ls", "--json")).output)
    assert (worker["id"], worker["max_jobs"], worker["status"]) == ("w-1", 2, "running")


def test_reap_interval_and_its_old_name(cli: Any) -> None:
    """`--sweep-interval` is the hidden old name of `--reap-interval`; both are accepted."""
    from tracker.cli.worker import REAP_INTERVAL_S, housekeeping_options

    seen: list[float] = []

    @click.command()
    @housekeeping_options
    def probe(reap_interval: float, **_: Any) -> None:
        seen.append(reap_interval)

    for args, expected in [([], REAP_INTERVAL_S), (["--reap-interval", "2"], 2.0),
                           (["--sweep-interval", "3"], 3.0)]:  # fmt: skip
        assert CliRunner().invoke(probe, args).exit_code == 0
        assert seen.pop() == expected
    help_text = ok(cli("worker", "--help")).output
    assert "--reap-interval" in help_text and "--sweep-interval" not in help_text
    assert "--reap-interval" in ok(cli("scheduler", "--help")).output


def test_schedule_commands(cli: Any, store: Store) -> None:
    added = json.loads(ok(cli(
        "schedule", "add", "0 2 * * *", "train.py", "-c", "lr=3e-4", "--timezone", "UTC",
        "--json",
    )).stdout)  # fmt: skip
    assert added["spec"]["config"] == {"lr": 3e-4} and added["next_fire_at"] is not None
    listed = json.loads(ok(cli("schedule", "ls", "--json")).output)
    assert [s["cron"] for s in listed] == ["0 2 * * *"]
    assert "paused" in ok(cli("schedule", "pause", str(added["id"]))).output
    assert "active" in ok(cli("schedule", "resume", str(added["id"]))).output
    assert "0 2 * * *" in ok(cli("schedule", "ls")).output
    ok(cli("schedule", "delete", str(added["id"])))
    assert json.loads(ok(cli("schedule", "ls", "--json")).output) == []
    bad = cli("schedule", "add", "0 25 * * *", "train.py")
    assert bad.exit_code == 2 and "cron '0 25 * * *'" in bad.output
