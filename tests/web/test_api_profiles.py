"""``/api/v1/runs/<id>/profiles`` (web/views/profiles.py): an admin asks a running run for a
profile (a ``log`` token may not), one open at a time, bad input named by field; the run's
client stores a real ``torch.profiler`` trace of a tiny CPU loop and reports it; the detail
says where the time went and why, the trace downloads for Perfetto, two profiles diff, and
a trace that cannot be read answers its reason, never a 500. Real app on a real SQLite file
and a real PostgreSQL database."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.profiler import loop_trace, store_trace
from tests.support.web import TOKEN, envelope
from tracker.rules.profiles import trace_path
from tracker.store import Store, profiles, runs
from tracker.store.artifacts import put_artifact
from tracker.store.tokens import create_token

ADMIN = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def traces() -> dict[str, bytes]:
    """Real traces: a loop with ``loss.item()`` each step, and one without."""
    return {"item": loop_trace(item=True), "healthy": loop_trace(item=False)}


@pytest.fixture
def app(make_app: Callable[..., Flask], artifact_root: Path) -> Flask:
    return make_app(TOKEN=TOKEN)


def _store(app: Flask) -> Store:
    store: Store = app.extensions["tracker"].store
    return store


def _running(store: Store) -> int:
    run = runs.create_run(store, "p", "r")
    runs.start_run(store, run.id)
    return run.id


def _ask(app: Flask, run_id: int, body: Any, headers: dict[str, str] = ADMIN) -> Any:
    return app.test_client().post(f"/api/v1/runs/{run_id}/profiles", json=body, headers=headers)


def test_an_admin_asks_and_reads_where_the_time_went(app: Flask,
                                                     traces: dict[str, bytes]) -> None:  # fmt: skip
    store, client = _store(app), app.test_client()
    run_id = _running(store)
    info, secret = create_token(store, "admin", "ana's laptop")
    asked = _ask(app, run_id, {"steps": 8, "ranks": "0"},
                 headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
    assert asked.status_code == 201, asked.json
    p = asked.json["profile"]
    assert (p["state"], p["steps"], p["ranks"], p["requested_by"]) == (
        "requested", 8, "0", f"token {info.id}",
    )  # fmt: skip
    # the run's heartbeat now carries the request to its client
    beat = client.post(f"/api/v1/runs/{run_id}/heartbeat", json={}, headers=ADMIN).json
    assert beat["control"] == {"profile": {"id": p["id"], "steps": 8, "ranks": "0"}}
    again = _ask(app, run_id, {"steps": 5})
    assert again.status_code == 409 and envelope(again)["code"] == "conflict"
    assert "one profile at a time" in envelope(again)["message"]

    waiting = client.get(f"/api/v1/runs/{run_id}/profiles/{p['id']}", headers=ADMIN).json
    assert waiting["summary"] is None and waiting["summary_error"] is None

    store_trace(store, run_id, p["id"], traces["item"], first_step=120, steps=8)
    listed = client.get(f"/api/v1/runs/{run_id}/profiles", headers=ADMIN).json
    assert [(q["id"], q["state"], q["first_step"], q["last_step"]) for q in listed["profiles"]] \
        == [(p["id"], "stored", 120, 127)]  # fmt: skip
    detail = client.get(f"/api/v1/runs/{run_id}/profiles/{p['id']}", headers=ADMIN).json
    assert detail["profile"]["has_summary"] is False  # computed by this read, then kept
    assert detail["cause"]["code"] == "host_sync" and "aten::item" in detail["cause"]["hint"]
    summary = detail["summary"]
    assert 8 <= summary["steps"]["count"] <= 9 and summary["gpu"] is None
    assert summary["host_syncs"]["per_step"] >= 1
    assert summary["top_ops"][0]["self_ms"] > 0
    shares = [summary["time_split"][c]["share"] for c in summary["time_split"]]
    assert 0.99 <= sum(shares) <= 1.01, shares
    kept = client.get(f"/api/v1/runs/{run_id}/profiles/{p['id']}", headers=ADMIN).json
    assert kept["profile"]["has_summary"] is True and kept["summary"] == summary


def test_the_trace_downloads_for_perfetto(app: Flask, traces: dict[str, bytes]) -> None:
    store, client = _store(app), app.test_client()
    run_id = _running(store)
    pid = profiles.request_profile(store, run_id, 8).id
    store_trace(store, run_id, pid, traces["item"])
    got = client.get(f"/api/v1/runs/{run_id}/profiles/{pid}/trace?rank=0", headers=ADMIN)
    assert got.status_code == 200 and got.data == traces["item"]
    assert got.mimetype == "application/gzip"
    name = f"run{run_id}-profile{pid}-rank0.pt.trace.json.gz"
    assert got.headers["Content-Disposition"].startswith(f'attachment; filename="{name}"')
    assert b"traceEvents" in gzip.decompress(got.data)
    default = client.get(f"/api/v1/runs/{run_id}/profiles/{pid}/trace", headers=ADMIN)
    assert default.data == traces["item"]  # the lowest rank
    missing = client.get(f"/api/v1/runs/{run_id}/profiles/{pid}/trace?rank=3", headers=ADMIN)
    assert missing.status_code == 404 and envelope(missing)["field"] == "rank"
    assert "ranks stored: 0" in envelope(missing)["message"]
    bad = client.get(f"/api/v1/runs/{run_id}/profiles/{pid}/trace?rank=x", headers=ADMIN)
    assert bad.status_code == 400 and envelope(bad)["field"] == "rank"


def test_two_profiles_diff(app: Flask, traces: dict[str, bytes]) -> None:
    store, client = _store(app), app.test_client()
    run_id = _running(store)
    a = profiles.request_profile(store, run_id, 8).id
    store_trace(store, run_id, a, traces["healthy"], first_step=10)
    b = profiles.request_profile(store, run_id, 8).id
    store_trace(store, run_id, b, traces["item"], first_step=200)
    got = client.get(f"/api/v1/runs/{run_id}/profiles/{a}/diff/{b}", headers=ADMIN)
    assert got.status_code == 200, got.json
    d = got.json["diff"]
    assert d["host_syncs_per_step"]["b"] >= 1 > d["host_syncs_per_step"]["a"]
    assert d["host_syncs_per_step"]["delta"] > 0 and d["step_time_ratio"] > 0
    assert d["ops"] and {"aten::addmm", "aten::mse_loss"} <= {o["name"] for o in d["ops"]}
    assert got.json["a"]["cause"] is None and got.json["b"]["cause"]["code"] == "host_sync"
    c = profiles.request_profile(store, run_id, 8).id  # open: no trace yet
    open_one = client.get(f"/api/v1/runs/{run_id}/profiles/{a}/diff/{c}", headers=ADMIN)
    assert open_one.status_code == 409 and envelope(open_one)["field"] == "b"
    assert "requested and has no trace yet" in envelope(open_one)["message"]
    none = client.get(f"/api/v1/runs/{run_id}/profiles/{a}/diff/{c + 50}", headers=ADMIN)
    assert none.status_code == 404


def test_an_unreadable_trace_says_why_and_still_downloads(app: Flask) -> None:
    store, client = _store(app), app.test_client()
    run_id = _running(store)
    pid = profiles.request_profile(store, run_id, 8).id
    profiles.report(store, run_id, pid, {"event": "started"})
    put_artifact(store, run_id, trace_path(pid, 0), b"not gzip at all")
    profiles.report(store, run_id, pid, {"event": "stored", "bytes": 15})
    got = client.get(f"/api/v1/runs/{run_id}/profiles/{pid}", headers=ADMIN)
    assert got.status_code == 200 and got.json["summary"] is None
    assert "is not gzip'd" in got.json["summary_error"] and "Perfetto" in got.json["summary_error"]
    assert client.get(f"/api/v1/runs/{run_id}/profiles/{pid}/trace",
                      headers=ADMIN).data == b"not gzip at all"  # fmt: skip


def test_a_log_token_reads_but_may_not_ask(app: Flask) -> None:
    store, client = _store(app), app.test_client()
    run_id = _running(store)
    log = {"Authorization": f"Bearer {create_token(store, 'log', 'trainer')[1]}"}
    refused = _ask(app, run_id, {"steps": 20}, headers=log)
    assert refused.status_code == 403 and envelope(refused)["code"] == "forbidden_scope"
    assert profiles.list_profiles(store, run_id) == []
    assert _ask(app, run_id, {"steps": 20}, headers={}).status_code == 401
    asked = _ask(app, run_id, {})  # defaults: 20 steps of rank 0
    assert asked.status_code == 201 and asked.json["profile"]["steps"] == 20
    assert asked.json["profile"]["requested_by"] == "dashboard token"
    listed = client.get(f"/api/v1/runs/{run_id}/profiles", headers=log)
    assert listed.status_code == 200 and len(listed.json["profiles"]) == 1
    assert listed.json["max_steps"] == profiles.MAX_STEPS


def test_only_a_running_run_is_profiled(app: Flask) -> None:
    store = _store(app)
    run_id = _running(store)
    runs.finish_run(store, run_id, "finished")
    ended = _ask(app, run_id, {"steps": 20})
    assert ended.status_code == 409
    assert "only a running run can be profiled" in envelope(ended)["message"]
    assert _ask(app, run_id + 1000, {"steps": 20}).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [({"steps": 0}, "steps"), ({"steps": 501}, "steps"), ({"steps": "20"}, "steps"),
     ({"steps": True}, "steps"), ({"steps": 2.5}, "steps"), ({"steps": 5, "ranks": "1"}, "ranks"),
     ({"steps": 5, "ranks": 0}, "ranks")],
)  # fmt: skip
def test_bad_input_names_the_field(app: Flask, body: dict[str, Any], field: str) -> None:
    run_id = _running(_store(app))
    got = _ask(app, run_id, body)
    assert got.status_code == 400 and envelope(got)["field"] == field
    assert "500" in envelope(got)["message"] or field == "ranks"  # the rule: 1 to 500
    assert profiles.list_profiles(_store(app), run_id) == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6,
)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=JSON, ranks=JSON)
def test_any_body_is_a_profile_or_a_named_error(app: Flask, steps: Any, ranks: Any) -> None:
    run_id = _running(_store(app))
    got = _ask(app, run_id, {"steps": steps, "ranks": ranks})
    assert got.status_code in (201, 400), got.data[:300]
    if got.status_code == 400:
        assert envelope(got)["field"] in ("steps", "ranks")
    else:
        assert got.json["profile"]["steps"] == steps and got.json["profile"]["ranks"] == ranks
