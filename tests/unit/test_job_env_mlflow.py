"""The MLflow part of a job's environment (``tracker.runner.job_env.mlflow_run_env``): a job
that logs to this dashboard through ``mlflow`` logs into its own run, and a job that logs to
another MLflow server is left alone; MLflow gets the job's own token unless the job gives it
credentials of its own. Table-driven, no I/O; then once through ``job_environment`` with a job
claimed from a real queue (what both executors start with)."""

from __future__ import annotations

import pytest

from tracker.entities import JobSpec
from tracker.runner.job_env import job_environment, mlflow_run_env, without_starter
from tracker.store import Store, queue

DASH = "http://dash.example:5000"
OURS = {"MLFLOW_TRACKING_URI": DASH, "MLFLOW_RUN_ID": "7"}


@pytest.mark.parametrize(
    ("job_uri", "env", "expected"),
    [
        # the job logs to the dashboard and names no MLflow server: it gets both
        (DASH, {}, OURS),
        ("https://dash.example", {}, {"MLFLOW_TRACKING_URI": "https://dash.example",
                                      "MLFLOW_RUN_ID": "7"}),
        (DASH, {"MLFLOW_TRACKING_URI": ""}, OURS),  # empty is unset, as MLflow reads it
        # its own tracking URI is this dashboard (a trailing slash is the same address)
        (DASH, {"MLFLOW_TRACKING_URI": DASH}, OURS),
        (DASH + "/", {"MLFLOW_TRACKING_URI": DASH}, OURS),
        (DASH, {"MLFLOW_TRACKING_URI": DASH + "/"},
         {"MLFLOW_TRACKING_URI": DASH + "/", "MLFLOW_RUN_ID": "7"}),
        # another MLflow server: never our run id
        (DASH, {"MLFLOW_TRACKING_URI": "http://mlflow.example:5000"}, {}),
        (DASH, {"MLFLOW_TRACKING_URI": "http://dash.example:5001"}, {}),
        (DASH, {"MLFLOW_TRACKING_URI": "databricks"}, {}),
        # the job writes to the database itself: MLflow is not this store's door
        ("sqlite:////data/t.db", {}, {}),
        ("postgresql+psycopg://db/t", {"MLFLOW_TRACKING_URI": DASH}, {}),
    ],
)  # fmt: skip
def test_mlflow_run_env(job_uri: str, env: dict[str, str], expected: dict[str, str]) -> None:
    assert mlflow_run_env(env, job_uri, 7) == expected


JOB_TOKEN = {"TRACKER_TOKEN": "trk_the-jobs-own"}
WITH_TOKEN = {**OURS, "MLFLOW_TRACKING_TOKEN": "trk_the-jobs-own"}


@pytest.mark.parametrize(
    ("job_uri", "env", "expected"),
    [
        # MLflow logs to the dashboard: with the job's own token (its run only)
        (DASH, JOB_TOKEN, WITH_TOKEN),
        (DASH, {**JOB_TOKEN, "MLFLOW_TRACKING_URI": DASH}, WITH_TOKEN),
        (DASH, {**JOB_TOKEN, "MLFLOW_TRACKING_TOKEN": ""}, WITH_TOKEN),  # empty is unset
        (DASH, {**JOB_TOKEN, "MLFLOW_TRACKING_USERNAME": ""}, WITH_TOKEN),
        # MLflow credentials of the job's own: kept, never replaced
        (DASH, {**JOB_TOKEN, "MLFLOW_TRACKING_TOKEN": "mine"}, OURS),
        (DASH, {**JOB_TOKEN, "MLFLOW_TRACKING_USERNAME": "me",
                "MLFLOW_TRACKING_PASSWORD": "pw"}, OURS),
        # no token of its own (or an empty one): none for MLflow either
        (DASH, {"TRACKER_TOKEN": ""}, OURS),
        # another MLflow server, or the database itself: the job's token goes nowhere
        (DASH, {**JOB_TOKEN, "MLFLOW_TRACKING_URI": "http://mlflow.example:5000"}, {}),
        ("sqlite:////data/t.db", JOB_TOKEN, {}),
    ],
)  # fmt: skip
def test_mlflow_gets_the_jobs_own_token(
    job_uri: str, env: dict[str, str], expected: dict[str, str]
) -> None:
    assert mlflow_run_env(env, job_uri, 7) == expected


def test_a_starters_own_mlflow_run_never_reaches_a_job() -> None:
    starter = {"MLFLOW_RUN_ID": "abc", "MLFLOW_TRACKING_URI": DASH, "HOME": "/home/u"}
    assert without_starter(starter) == {"MLFLOW_TRACKING_URI": DASH, "HOME": "/home/u"}


def test_the_environment_a_claimed_job_starts_with(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_RUN_ID", "the-starters-own")
    monkeypatch.setenv("TRACKER_TOKEN", "the-starters-own-token")
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME"):
        monkeypatch.delenv(name, raising=False)
    queue.enqueue(store, JobSpec(argv=["python", "train.py"]))
    elsewhere = {"MLFLOW_TRACKING_URI": "http://mlflow.example:5000"}
    queue.enqueue(store, JobSpec(argv=["python", "train.py"], env=elsewhere))
    claimed = [queue.claim(store, "w", lease_s=60) for _ in range(2)]
    here, other = [c[0] for c in claimed if c is not None]
    env = job_environment(here, DASH, None)
    assert (env["MLFLOW_TRACKING_URI"], env["MLFLOW_RUN_ID"]) == (DASH, str(here.run_id))
    assert env["TRACKER_RUN_ID"] == str(here.run_id)
    # the starter's own token reaches neither the job nor MLflow; the job's own reaches both
    assert "TRACKER_TOKEN" not in env and "MLFLOW_TRACKING_TOKEN" not in env
    env = job_environment(here, DASH, None, {"TRACKER_TOKEN": "trk_job"})
    assert (env["TRACKER_TOKEN"], env["MLFLOW_TRACKING_TOKEN"]) == ("trk_job", "trk_job")
    env = job_environment(other, DASH, None, {"TRACKER_TOKEN": "trk_job"})
    assert env["MLFLOW_TRACKING_URI"] == elsewhere["MLFLOW_TRACKING_URI"]
    assert "MLFLOW_RUN_ID" not in env and "MLFLOW_TRACKING_TOKEN" not in env
    assert "MLFLOW_RUN_ID" not in job_environment(here, store.absolute_uri(), None)
