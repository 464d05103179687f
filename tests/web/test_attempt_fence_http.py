"""The attempt fence over HTTP: a job's HttpSink sends ``X-Tracker-Attempt``; once another
attempt took the job over, the server refuses that process's writes (409
``attempt_superseded``) and the client raises AttemptSuperseded."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.web import TOKEN
from tracker.client.http_sink import HttpSink
from tracker.entities import AttemptFence, JobSpec
from tracker.errors import AttemptSuperseded
from tracker.store import queue
from tracker.store.metrics import metric_history
from tracker.store.runs import create_run, get_run


def test_a_superseded_attempt_is_refused_over_http(make_app: Any, serve: Any) -> None:
    app = make_app(TOKEN=TOKEN)
    store = app.extensions["tracker"].store
    server = serve(app)
    queue.enqueue(store, JobSpec(argv=["true"], max_retries=1), now=1000.0)
    got = queue.claim(store, "w1", lease_s=10.0, now=1000.0)
    assert got is not None
    job_id, run_id = got[0].job.id, got[0].run_id
    sink = HttpSink(server.url, token=TOKEN)
    sink.fence = AttemptFence(job_id, 1)
    sink.start_run(run_id, None)
    sink.write_metrics(run_id, [(0, 0, {"loss": 1.0})])
    sink.heartbeat(run_id)
    queue.reap_expired_leases(store, retry=lambda *a, **k: 0.0, now=1011.0)
    for write in (
        lambda: sink.write_metrics(run_id, [(1, 0, {"loss": 2.0})]),
        lambda: sink.heartbeat(run_id),
        lambda: sink.add_event(run_id, "note", "stale"),
        lambda: sink.finish_run(run_id, "finished"),
    ):
        with pytest.raises(AttemptSuperseded, match=f"attempt 1 of job {job_id} was superseded"):
            write()
    assert [p.step for p in metric_history(store, run_id, "loss")] == [0]
    assert get_run(store, run_id).status == "queued"


def test_a_malformed_attempt_header_is_a_400_naming_it(client: Any, store: Any) -> None:
    run = create_run(store, "p")
    answer = client.post(
        f"/api/v1/runs/{run.id}/heartbeat", json={}, headers={"X-Tracker-Attempt": "x:1"}
    )
    assert answer.status_code == 400
    assert answer.get_json()["error"]["field"] == "X-Tracker-Attempt"
