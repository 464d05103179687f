"""Profile requests in a real store (tracker.store.profiles): one open per run, only for a
running run, the client's reports move the state, a closed profile ignores reports, an open
one of an ended run is closed when read, and the heartbeat's control names the request."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tracker.errors import Conflict, InvalidInput, NotFound
from tracker.rules.profiles import trace_path
from tracker.store import Store, profiles, runs
from tracker.store.artifacts import put_artifact


def _running(store: Store) -> int:
    info = runs.create_run(store, project="p", name=None, config={}, tags=[])
    runs.start_run(store, info.id)
    return info.id


def test_one_open_profile_per_running_run(store: Store) -> None:
    run_id = _running(store)
    assert profiles.control(store, run_id) is None
    first = profiles.request_profile(store, run_id, 20, by="ana")
    assert (first.state, first.steps, first.ranks, first.requested_by) == (
        "requested", 20, "0", "ana",
    )  # fmt: skip
    assert profiles.control(store, run_id) == {
        "profile": {"id": first.id, "steps": 20, "ranks": "0"}
    }
    with pytest.raises(Conflict, match=f"already has profile {first.id} requested"):
        profiles.request_profile(store, run_id, 5)
    profiles.report(store, run_id, first.id, {"event": "started", "first_step": 7})
    with pytest.raises(Conflict, match="running: one profile at a time"):
        profiles.request_profile(store, run_id, 5)
    profiles.report(
        store, run_id, first.id,
        {"event": "stored", "rank": 0, "first_step": 7, "last_step": 26, "bytes": 123},
    )  # fmt: skip
    done = profiles.get_profile(store, run_id, first.id)
    assert (done.state, done.first_step, done.last_step) == ("stored", 7, 26)
    assert done.traces == [{"rank": 0, "path": trace_path(first.id, 0), "bytes": 123}]
    assert profiles.control(store, run_id) is None
    again = profiles.report(store, run_id, first.id, {"event": "failed", "message": "late"})
    assert again.state == "stored" and again.message is None  # closed: unchanged
    assert profiles.request_profile(store, run_id, 5).id != first.id


def test_all_ranks_wait_for_every_trace_and_a_failure_is_kept(store: Store) -> None:
    run_id = _running(store)
    p = profiles.request_profile(store, run_id, 3, "all")
    for rank in (1, 0):
        profiles.report(store, run_id, p.id, {"event": "started", "rank": rank, "world_size": 3})
        profiles.report(store, run_id, p.id, {"event": "stored", "rank": rank, "bytes": 9})
    assert profiles.get_profile(store, run_id, p.id).state == "running"  # 2 of 3
    end = profiles.report(store, run_id, p.id, {"event": "failed", "rank": 2, "message": "oom"})
    assert (end.state, end.message) == ("stored", "rank 2: oom")  # what came is kept
    assert [t["rank"] for t in end.traces] == [0, 1]


@pytest.mark.parametrize(
    ("steps", "ranks", "field"),
    [(0, "0", "steps"), (501, "0", "steps"), (True, "0", "steps"), ("5", "0", "steps"),
     (5, "1", "ranks"), (5, None, "ranks")],
)  # fmt: skip
def test_a_bad_request_names_its_field(store: Store, steps: Any, ranks: Any, field: str) -> None:
    run_id = _running(store)
    with pytest.raises(InvalidInput) as err:
        profiles.request_profile(store, run_id, steps, ranks)
    assert err.value.field == field
    assert profiles.list_profiles(store, run_id) == []


def test_only_a_running_run_and_an_ended_run_closes_its_request(store: Store) -> None:
    with pytest.raises(NotFound):
        profiles.request_profile(store, 999, 5)
    run_id = _running(store)
    p = profiles.request_profile(store, run_id, 5)
    runs.finish_run(store, run_id, "finished")
    with pytest.raises(Conflict, match="is finished: only a running run"):
        profiles.request_profile(store, run_id, 5)
    [closed] = profiles.list_profiles(store, run_id)
    assert (closed.id, closed.state, closed.message) == (p.id, "failed", profiles.ENDED_FIRST)
    with pytest.raises(NotFound):
        profiles.report(store, run_id + 1000, p.id, {"event": "started"})


@pytest.mark.parametrize(
    "body",
    [[], {"event": "done"}, {"event": "stored", "rank": -1}, {"event": "stored", "bytes": 1.5},
     {"event": "failed", "message": 3}, {"event": "started", "rank": True}],
)  # fmt: skip
def test_a_malformed_report_is_refused(store: Store, body: Any) -> None:
    run_id = _running(store)
    p = profiles.request_profile(store, run_id, 5)
    with pytest.raises(InvalidInput):
        profiles.report(store, run_id, p.id, body)
    assert profiles.get_profile(store, run_id, p.id).state == "requested"


def test_the_summary_is_computed_once_from_the_stored_trace(
    store: Store, artifact_root: Path
) -> None:
    run_id = _running(store)
    p = profiles.request_profile(store, run_id, 2)
    trace = {"traceEvents": [{"name": "ProfilerStep#1", "ph": "X", "ts": 0, "dur": 5}]}
    put_artifact(store, run_id, trace_path(p.id, 0), gzip.compress(json.dumps(trace).encode()))
    profiles.report(store, run_id, p.id, {"event": "stored", "first_step": 3, "last_step": 4})
    calls: list[Any] = []

    def summarize(got: Any) -> dict[str, Any]:
        calls.append(got)
        return {"steps": len(got["traceEvents"])}

    assert profiles.summary(store, run_id, p.id, summarize) == {"steps": 1}
    assert profiles.summary(store, run_id, p.id, summarize) == {"steps": 1}
    assert calls == [trace]
    assert profiles.summaries_for_run(store, run_id, summarize) == [(3, 4, {"steps": 1})]
    assert profiles.get_profile(store, run_id, p.id).has_summary


def test_the_periodic_work_summarises_stored_profiles_before_anyone_reads_them(
    store: Store, artifact_root: Path
) -> None:
    """``tracker ui``'s periodic task summarises a stored profile (a real torch.profiler
    trace) ahead of its reader; a trace that cannot be read is given up once, quietly."""
    from tests.support.profiler import loop_trace, store_trace
    from tracker.periodic import ProfileSummaries

    run_id = _running(store)
    good = profiles.request_profile(store, run_id, 4)
    store_trace(store, run_id, good.id, loop_trace(item=True, steps=4), steps=4)
    other = _running(store)
    bad = profiles.request_profile(store, other, 2)
    store_trace(store, other, bad.id, b"not gzip", steps=2)
    assert profiles.unsummarised(store) == [(run_id, good.id), (other, bad.id)]
    task = ProfileSummaries(store)
    assert task.once() == [good.id]
    assert profiles.get_profile(store, run_id, good.id).has_summary
    assert task.given_up == {bad.id}
    assert task.once() == []  # the bad one is not tried again by this process
    assert profiles.unsummarised(store) == [(other, bad.id)]
