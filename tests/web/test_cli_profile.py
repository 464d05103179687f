"""``tracker profile RUN`` against the database (``--uri`` a SQLite or PostgreSQL URL) and
against a dashboard over real HTTP: ask a real running run (a tiny CPU loop starved by its
DataLoader, :func:`tests.support.profiler.training_run`), --wait while its own client
profiles the next steps and stores the trace, and read the summary; --list, --show,
--json, and the errors that name their rule."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from tests.support.profiler import training_run
from tracker.cli import main
from tracker.rules.profile_summary import DATALOADER_SHARE
from tracker.store import Store, profiles, runs
from tracker.store.tokens import create_token

# PostgreSQL stores keep the trace under an artifact root (the served dashboard's too)
pytestmark = pytest.mark.usefixtures("artifact_root")


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"TRACKER_URI": None, "TRACKER_TOKEN": None})


def _running(store: Store) -> int:
    run = runs.create_run(store, "p", "r")
    runs.start_run(store, run.id)
    return run.id


def test_ask_wait_list_show(where: tuple[Store, list[str]], store_url: str) -> None:
    store, options = where
    with training_run(store_url, kind="dataloader") as run:
        waited = cli("profile", str(run.id), "--steps", "5", "--wait", "--timeout", "60",
                     *options)  # fmt: skip
        assert waited.exit_code == 0, waited.output
        assert runs.get_run(store, run.id).status == "running"  # training went on
    run_id = run.id
    first = profiles.list_profiles(store, run_id)[0]
    assert first.first_step is not None and first.last_step is not None, first
    pid, steps = first.id, f"{first.first_step}..{first.last_step}"
    assert first.state == "stored" and first.last_step - first.first_step == 4, first
    progress = waited.stderr.splitlines()
    assert "requested; waiting for the run's heartbeat (up to ~10 s)" in progress
    assert progress[-1].startswith(f"stored: steps {steps}")
    out = waited.stdout.splitlines()
    assert out[0] == f"profile {pid} of run {run_id}: stored, steps {steps}"
    assert out[1].startswith("cause: ") and "of the step is waiting for the DataLoader" in out[1]
    assert "num_workers" in out[1]
    assert out[2].startswith("step time: median ")
    assert out[3].startswith("time split: compute ") and "dataloader wait 0 %" not in out[3]
    assert out[4].startswith("host syncs: 0 per step")
    assert "GPU: no GPU kernels" in waited.stdout
    assert "top ops by self time:" in out

    listed = cli("profile", str(run_id), "--list", *options)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[0].split() == ["ID", "STATE", "STEPS", "REQUESTED", "BY",
                                                     "TRACES"]  # fmt: skip
    assert "stored" in listed.stdout and steps in listed.stdout
    assert ("cli" if options[1].startswith(("sqlite", "postgres")) else "dashboard token") \
        in listed.stdout  # fmt: skip
    shown = cli("profile", str(run_id), "--show", str(pid), "--json", *options)
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    assert doc["cause"]["code"] == "dataloader" and doc["profile"]["id"] == pid
    assert doc["summary"]["steps"]["count"] == 5
    assert doc["summary"]["time_split"]["dataloader"]["median_share"] >= DATALOADER_SHARE


def test_ask_without_wait_then_errors(where: tuple[Store, list[str]]) -> None:
    store, options = where
    run_id = _running(store)
    asked = cli("profile", str(run_id), "--steps", "5", "--ranks", "all", *options)
    assert asked.exit_code == 0, asked.output
    pid = profiles.list_profiles(store, run_id)[0].id
    assert asked.stdout.startswith(f"requested profile {pid} of run {run_id}: the next 5 steps")
    assert f"tracker profile {run_id} --show {pid}" in asked.stdout
    shown = cli("profile", str(run_id), "--show", str(pid), *options)
    assert shown.stdout.splitlines() == [
        f"profile {pid} of run {run_id}: requested, steps next 5",
        "no summary yet: no trace is stored",
    ]
    again = cli("profile", str(run_id), *options)
    assert again.exit_code == 2 and "one profile at a time per run" in again.output
    for args, fragment in [
        (("--steps", "0"), "steps must be an integer from 1 to 500"),
        (("--steps", "501"), "steps must be an integer from 1 to 500"),
    ]:
        result = cli("profile", str(run_id), *args, *options)
        assert result.exit_code == 2 and fragment in result.output, result.output
    assert cli("profile", str(run_id), "--ranks", "3", *options).exit_code == 2  # click's choice
    ended = _running(store)
    runs.finish_run(store, ended, "finished")
    result = cli("profile", str(ended), *options)
    assert result.exit_code == 2
    assert f"run {ended} is finished: only a running run can be profiled" in result.output
    missing = cli("profile", str(run_id), "--show", str(pid + 99), *options)
    assert missing.exit_code == 2 and f"has no profile {pid + 99}" in missing.output
    none = cli("profile", str(ended), "--list", *options)
    assert none.stdout.startswith(f"run {ended} has no profiles")
    assert len(profiles.list_profiles(store, run_id)) == 1  # nothing else was asked


def test_wait_gives_up_after_its_timeout(where: tuple[Store, list[str]]) -> None:
    store, options = where
    run_id = _running(store)
    result = cli("profile", str(run_id), "--wait", "--timeout", "1.5", *options)
    assert result.exit_code == 1
    assert "is still requested after 1.5 s (--timeout)" in result.output


def test_over_http_a_log_token_reads_but_may_not_ask(served: tuple[Store, str]) -> None:
    store, url = served
    run_id = _running(store)
    log = create_token(store, "log", "trainer")[1]
    refused = cli("profile", str(run_id), "--uri", url, "--token", log)
    assert refused.exit_code == 2 and "'admin' scope" in refused.output
    assert profiles.list_profiles(store, run_id) == []
    listed = cli("profile", str(run_id), "--list", "--uri", url, "--token", log)
    assert listed.exit_code == 0 and "has no profiles" in listed.stdout
