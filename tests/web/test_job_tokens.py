"""A job's own token (issue 28, item 3): a real worker started with ``--job-uri http://...``
and an admin ``TRACKER_TOKEN`` of its own gives each job a token bound to the job's run and
attempt instead. From inside the job, against a real ``tracker ui``: the token logs the run
(``tracker.init`` over HTTP), reads the run, and is refused everything else -- another run,
its artifacts, the run list, cancelling a job, signing in; once the attempt has ended the
token is refused outright. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.polling import wait_for
from tests.support.web import TOKEN
from tests.web.test_remote_submit import (  # noqa: F401 - the fixture
    Dashboard,
    WorkerProcs,
    api,
    dashboard,
)
from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store.metrics import metric_history
from tracker.store.runs import create_run
from tracker.store.tokens import list_tokens

PROBE = """\
import json, os, sys, urllib.request, urllib.error
base, other_run, other_job, report = sys.argv[1:5]
token = os.environ.get("TRACKER_TOKEN", "")
run = os.environ["TRACKER_RUN_ID"]

def status(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code

seen = {
    "same_as_worker": token == os.environ.get("WORKER_TOKEN_FOR_TEST"),
    "own_run": status("GET", f"/api/v1/runs/{run}"),
    "other_run": status("GET", f"/api/v1/runs/{other_run}"),
    "other_artifacts": status("GET", f"/api/v1/runs/{other_run}/artifacts"),
    "run_list": status("GET", "/api/v1/runs"),
    "cancel_other": status("POST", f"/api/v1/jobs/{other_job}/cancel", {}),
    "sign_in": status("POST", "/login", {"token": token}),
}
import tracker
r = tracker.init(project="jobs")
r.log({"loss": 0.5}, step=1)
r.finish()
with open(report, "w") as f:
    json.dump({"seen": seen, "token": token}, f)
"""


def test_a_job_gets_a_token_for_its_own_run_and_attempt_only(
    store_url: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    del store_url  # parametrizes the dashboard's store: SQLite and PostgreSQL
    dash: Dashboard = request.getfixturevalue("dashboard")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    report = tmp_path / "report.json"
    store = Store(dash.store_url)
    other = create_run(store, "private", "someone-else")
    other_job = queue.enqueue(store, JobSpec(argv=["python", "-c", "pass"], not_before=4e9))
    job = queue.enqueue(
        store,
        JobSpec(argv=[sys.executable, str(probe), dash.url, str(other.id),
                      str(other_job.id), str(report)]),
    )  # fmt: skip

    procs = WorkerProcs(dash, tmp_path / "worker")
    (tmp_path / "worker").mkdir()
    env = procs.env
    procs.env = lambda: {**env(), "TRACKER_TOKEN": TOKEN, "WORKER_TOKEN_FOR_TEST": TOKEN}  # type: ignore[method-assign]
    try:
        procs.worker("--gpus", "none", "--job-uri", dash.url, "--exit-when-idle")
        done = wait_for(
            lambda: (j := store_jobs.get_job(store, job.id)).is_final and j, 120, "the job"
        )
    finally:
        procs.close()
    assert done.status == "succeeded", (done.failure_hint, [p.output() for p in procs.started])
    got = json.loads(report.read_text())
    seen, token = got["seen"], got["token"]
    assert token.startswith("trk_") and not seen["same_as_worker"]
    assert seen == {
        "same_as_worker": False,
        "own_run": 200,
        "other_run": 403,
        "other_artifacts": 403,
        "run_list": 403,
        "cancel_other": 403,
        "sign_in": 403,
    }
    # it logged its run over HTTP with that token
    assert [p.value for p in metric_history(store, done.run_id or 0, "loss")] == [0.5]
    # the attempt has ended: the token is refused everywhere, and listed as revoked (in
    # the write that recorded the end: the worker is closed as soon as the job is final)
    status, answer = api(dash, "GET", f"/runs/{done.run_id}", token)
    assert status == 401, answer
    [own] = [t for t in list_tokens(store) if t.job_id == job.id]
    assert (own.run_id, own.attempt, own.scope) == (done.run_id, 1, "log")
    assert own.revoked_at is not None
    assert store_jobs.get_job(store, other_job.id).status == "queued"
    store.close()
