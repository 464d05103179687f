"""What a job starts with, whoever starts it (the local worker or a cluster dispatcher): its
environment and, for a retry, the checkpoint to resume from."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from tracker.entities import ClaimedJob
from tracker.store import Store
from tracker.store.jobs import RESERVED_ENV

# Variables of the starter's own environment that must not leak into a job: the tracker's
# own, a rendezvous of the starter's, its credentials (a job logging over HTTP gets a
# token of its own: tracker.runner.job_loop.JobLoop.job_token) and an MLflow run of its own
# (every job would log into that one run).
STRIP_ENV = RESERVED_ENV | {
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TRACKER_TOKEN",
    "MLFLOW_RUN_ID",
}


def without_starter(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (a starter's own environment) less ``STRIP_ENV``: the base every job starts
    from, whichever executor starts it (a ``MASTER_PORT`` set for the dispatcher or worker
    itself must never reach a job)."""
    return {k: v for k, v in env.items() if k not in STRIP_ENV}


def job_environment(
    claim: ClaimedJob,
    tracker_uri: str,
    resume: str | None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The starter's environment without ``STRIP_ENV``, then the job's own variables, then
    the tracker's (run, job, attempt, config, project, store), then ``extra``, then MLflow's
    (:func:`mlflow_run_env`)."""
    job = claim.job
    env = without_starter(os.environ)
    env.update(job.env)
    env.update(
        TRACKER_RUN_ID=str(claim.run_id),
        TRACKER_JOB_ID=str(job.id),
        TRACKER_ATTEMPT=str(claim.attempt),
        TRACKER_CONFIG=json.dumps(job.config),
        TRACKER_PROJECT=job.project,
        TRACKER_URI=tracker_uri,
        **(extra or {}),
    )
    env.setdefault("PYTHONUNBUFFERED", "1")  # so output streams line by line
    if resume:
        env["TRACKER_RESUME_CHECKPOINT"] = resume
    if job.snapshot_id is not None:  # its run has the snapshot's commit already
        env["TRACKER_SNAPSHOT_ID"] = str(job.snapshot_id)
    env.update(mlflow_run_env(env, tracker_uri, claim.run_id))
    return env


def mlflow_run_env(env: Mapping[str, str], tracker_uri: str, run_id: int) -> dict[str, str]:
    """What an MLflow-logged script needs to log into its job's run: a job whose store is
    this dashboard (``tracker_uri`` http(s)) and whose ``env`` names no MLflow server of
    its own gets ``MLFLOW_TRACKING_URI`` = the dashboard; when that (or its own) tracking
    URI is this dashboard, ``MLFLOW_RUN_ID`` = the job's run, so ``mlflow.start_run()``
    resumes that run instead of creating one of its own, and ``MLFLOW_TRACKING_TOKEN`` =
    the job's own ``TRACKER_TOKEN`` (its run only: the MLflow client sends it as
    ``Authorization: Bearer``) unless ``env`` gives MLflow credentials of its own (a token
    or a user name). A job that logs to another MLflow server, or writes to the database
    itself, gets nothing."""
    dashboard = tracker_uri.rstrip("/")
    if not dashboard.lower().startswith(("http://", "https://")):
        return {}
    own = env.get("MLFLOW_TRACKING_URI") or None  # empty: unset, as MLflow reads it
    if own is not None and own.rstrip("/") != dashboard:
        return {}
    out = {"MLFLOW_TRACKING_URI": own or tracker_uri, "MLFLOW_RUN_ID": str(run_id)}
    token = env.get("TRACKER_TOKEN")
    if token and not (env.get("MLFLOW_TRACKING_TOKEN") or env.get("MLFLOW_TRACKING_USERNAME")):
        out["MLFLOW_TRACKING_TOKEN"] = token
    return out


def resume_checkpoint(store: Store, claim: ClaimedJob) -> str | None:
    """For a retry (attempt > 1): the run's newest checkpoint whose file still matches its
    sha256, else None."""
    if claim.attempt <= 1:
        return None
    from tracker.client.run import latest_verified_checkpoint
    from tracker.client.sinks import SqlSink

    found = latest_verified_checkpoint(SqlSink(store), claim.run_id)
    return found.path if found is not None else None
