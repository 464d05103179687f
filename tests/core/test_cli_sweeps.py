"""``tracker sweep --method ...`` and ``tracker sweeps ls|show|stop|resume`` against a real
SQLite file and PostgreSQL: the sweep is stored, its first trials queued at once, jobs are
driven through the real queue, and bad input gets an error that names the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tracker.cli import main
from tracker.store import Store, queue, runs, sweeps
from tracker.store.jobs import get_job
from tracker.store.metrics import log_metrics

pytest.importorskip("optuna")


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"TRACKER_URI": None, "TRACKER_TOKEN": None})


def _script(tmp_path: Path) -> str:
    script = tmp_path / "train.py"
    script.write_text("import tracker\ntracker.init()\n")
    return str(script)


def test_create_follow_stop_resume(store: Store, store_url: str, tmp_path: Path) -> None:
    made = cli("sweep", "--uri", store_url, _script(tmp_path), "-c", "lr=loguniform(1e-5,1e-1)",
               "-c", "width=64,128", "-c", "epochs=2", "--method", "tpe", "--metric",
               "val/loss", "--trials", "5", "--parallel", "2", "--prune", "asha", "--seed", "4",
               "--env", "SECRET_TOKEN=hunter2", "--no-snapshot")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "sweep 1 created (tpe, minimize val/loss, 5 trials, 2 at once, prune asha, seed 4)" in (
        made.output
    )
    assert made.output.count("queued as job") == 2
    (sweep,) = sweeps.list_sweeps(store)
    found = sweeps.trials(store, sweep.id)
    job = get_job(store, found[0].job_id)
    assert job.config["epochs"] == 2
    assert "sweep-1" in runs.get_run(store, job.run_id).tags

    claim = queue.claim(store, "w", lease_s=60)
    assert claim is not None
    log_metrics(store, claim[0].run_id, 0, {"val/loss": 0.25})
    queue.finish(store, claim[0], exit_code=0, failure=None)
    sweeps.control_once(store)

    listed = cli("sweeps", "ls", "--uri", store_url)
    assert listed.exit_code == 0, listed.output
    row = listed.output.splitlines()[2].split()
    assert row[0] == "1" and "running" in row and "1/5" in row and "0.25" in row, listed.output
    shown = cli("sweeps", "show", "1", "--uri", store_url)
    assert shown.exit_code == 0, shown.output
    assert "objective  minimize val/loss (last value)" in shown.output
    assert "-c lr=loguniform(1e-5,1e-1)" in shown.output and "best  trial 0: 0.25" in shown.output
    as_json = json.loads(cli("sweeps", "show", "1", "--uri", store_url, "--json").output)
    assert [t["number"] for t in as_json["trials"]] == [0, 1, 2]
    assert as_json["sweep"]["spec"]["env_keys"] == ["SECRET_TOKEN"]
    assert "hunter2" not in json.dumps(as_json)

    stopped = cli("sweeps", "stop", "1", "--uri", store_url)
    assert stopped.exit_code == 0 and "sweep 1: stopped" in stopped.output, stopped.output
    assert cli("sweeps", "resume", "1", "--uri", store_url, "--trials", "2").exit_code != 0
    resumed = cli("sweeps", "resume", "1", "--uri", store_url, "--trials", "6")
    assert resumed.exit_code == 0 and "sweep 1: running, 6 trials" in resumed.output
    again = cli("sweeps", "resume", "1", "--uri", store_url)
    assert again.exit_code != 0 and "is running" in again.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--method", "tpe"], "--method needs --metric"),
        (["--metric", "m", "--random", "3"], "--random N and --method"),
        (["--metric", "m", "--trials", "0"], "--trials"),
        (["--metric", "m", "--parallel", "-1"], "--parallel"),
        (["--metric", "m", "--method", "grid"], "-c lr=uniform(0,1): --method grid"),
        (["--metric", "m", "--method", "anneal"], "'anneal' is not one of"),
    ],
)
def test_bad_options_are_named(store_url: str, tmp_path: Path, args: list[str],
                               named: str) -> None:  # fmt: skip
    got = cli("sweep", "--uri", store_url, _script(tmp_path), "-c", "lr=uniform(0,1)",
              "--no-snapshot", *args)  # fmt: skip
    assert got.exit_code != 0
    assert named in got.output, got.output


def test_unknown_sweep(store_url: str) -> None:
    got = cli("sweeps", "show", "42", "--uri", store_url)
    assert got.exit_code != 0 and "no sweep 42" in got.output
