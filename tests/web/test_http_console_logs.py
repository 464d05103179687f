"""Console capture over the HTTP sink: ``POST /api/v1/runs/<id>/logs`` against a real app
served over real HTTP (SQLite and PostgreSQL).

A real training process with ``TRACKER_URI=http://...`` prints to stdout and stderr: its
output still reaches its own terminal unchanged and is readable through
``GET /api/v1/runs/<id>/logs``; trimming past ``console_max_chars`` works as with the SQL
sink (also across a server restart); malformed bodies are 400 in the envelope naming the
field; a ``log`` token may post, an anonymous client may not; a superseded attempt is 409.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.web import TOKEN, envelope, refusing_port
from tracker.client.http_sink import MAX_LOG_CHARS_PER_REQUEST, HttpSink, _log_parts
from tracker.entities import AttemptFence, JobSpec
from tracker.errors import AttemptSuperseded, NotFound, StoreUnavailable, TrackerError
from tracker.store import queue
from tracker.store.runs import create_run
from tracker.store.tokens import create_token
from tracker.web.core.log_ingest import MAX_CHARS_LIMIT, MAX_CHUNKS

SCRIPT = str(Path(__file__).parents[1] / "core" / "scripts" / "signals_script.py")


def _read_logs(url: str, run_id: int, token: str = TOKEN, query: str = "") -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/api/v1/runs/{run_id}/logs?limit=5000{query}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _script(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACKER_TOKEN": TOKEN, "TRACKER_URI": url}
    env.pop("TRACKER_JOB_ID", None)
    return subprocess.run(
        [sys.executable, SCRIPT, url, *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_a_direct_run_over_http_stores_its_console(
    make_app: Any, serve: Any, tmp_path: Path
) -> None:
    server = serve(make_app(TOKEN=TOKEN))
    done = _script(server.url, tmp_path, "raise")
    assert done.returncode == 1, done.stderr
    # The terminal still gets everything, unchanged and on its own stream.
    run_line, *rest = done.stdout.splitlines(keepends=True)
    assert rest == ["line one on stdout\n"]
    init_line, script_err = done.stderr.split("\n", 1)  # tracker.init's line, then the script's
    assert init_line.startswith("tracker: run ") and "logging to the dashboard" in init_line
    assert script_err.startswith("line two on stderr\n")
    assert "ValueError: bad batch shape (3, 4)" in done.stderr
    assert "console capture" not in done.stderr and "not stored" not in done.stderr
    run_id = int(run_line.split()[1])
    doc = _read_logs(server.url, run_id)
    assert doc["job_id"] is None
    by_stream = {
        s: "".join(c["text"] for c in doc["chunks"] if c["stream"] == s)
        for s in ("stdout", "stderr")
    }
    assert by_stream["stdout"] == done.stdout  # "RUN <id>" is printed after init() too
    assert by_stream["stderr"].startswith("line two on stderr\n")
    assert "ValueError: bad batch shape (3, 4)" in by_stream["stderr"]
    assert all(c["attempt"] == 0 for c in doc["chunks"])
    err = _read_logs(server.url, run_id, query="&stream=stderr")
    assert {c["stream"] for c in err["chunks"]} == {"stderr"}
    run = HttpSink(server.url, token=TOKEN)._call("GET", f"/runs/{run_id}", idempotent=True)
    assert (run["status"], run["failure_class"]) == ("failed", "python_exception")


@pytest.mark.slow
def test_a_noisy_run_over_http_keeps_its_newest_output(
    make_app: Any, serve: Any, tmp_path: Path
) -> None:
    server = serve(make_app(TOKEN=TOKEN))
    done = _script(server.url, tmp_path, "noisy", "600")  # ~60,000 characters, 10,000 kept
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines(keepends=True)
    assert len(printed) == 602 and printed[-2].startswith("line 000599 ")  # RUN ... DONE
    run_id = int(printed[0].split()[1])
    chunks = _read_logs(server.url, run_id)["chunks"]
    assert (
        chunks[0]["stream"] == "meta"
        and "characters of older output were trimmed" in (chunks[0]["text"])
    )
    kept = "".join(c["text"] for c in chunks[1:])
    assert len(kept) <= 10_000 and kept.endswith("x" * 90 + "\nDONE\n")
    assert kept.split("\n", 1)[1] in "".join(printed)  # the newest output, in order


def test_sink_round_trip_split_and_trimmed(make_app: Any, serve: Any) -> None:
    app = make_app(TOKEN=TOKEN)
    server = serve(app)
    sink = HttpSink(server.url, token=TOKEN)
    run = sink.create_run("p", None, {}, [])
    big = "é" * (MAX_LOG_CHARS_PER_REQUEST * 2 + 7)  # three requests
    lines = [("stdout", 1.5, "a\n"), ("stdout", 1.6, "b\n"), ("stderr", 1.7, "\x00!\n")]
    sink.append_logs(run.id, [*lines, ("stdout", 2.0, big)], 10 * MAX_LOG_CHARS_PER_REQUEST)
    chunks = _read_logs(server.url, run.id)["chunks"]
    assert "".join(c["text"] for c in chunks) == "a\nb\n\ufffd!\n" + big
    assert chunks[0]["text"] == "a\nb\n" and chunks[0]["at"] == 1.5
    assert chunks[1] == {**chunks[1], "stream": "stderr", "text": "\ufffd!\n"}
    # A small budget: the oldest output goes, a meta marker says so, the newest stays.
    other = sink.create_run("p", None, {}, [])
    for i in range(20):
        sink.append_logs(other.id, [("stdout", float(i), f"{i:03d}" + "y" * 96 + "\n")], 1000)
    stored = _read_logs(server.url, other.id)["chunks"]
    assert stored[0]["stream"] == "meta" and "a run keeps at most 1000" in stored[0]["text"]
    kept = "".join(c["text"] for c in stored[1:])
    assert len(kept) <= 1000 and kept.endswith("019" + "y" * 96 + "\n")
    assert len(kept) >= 700  # so 301 more characters pass the budget
    # A new server process starts from what the store holds, not from zero.
    server.stop()
    again = serve(make_app(TOKEN=TOKEN))
    sink = HttpSink(again.url, token=TOKEN)
    sink.append_logs(other.id, [("stdout", 30.0, "z" * 300 + "\n")], 1000)
    after = _read_logs(again.url, other.id)["chunks"]
    assert [c["stream"] for c in after].count("meta") == 1 and after[0]["stream"] == "meta"
    assert len("".join(c["text"] for c in after[1:])) <= 1000
    assert after[-1]["text"] == "z" * 300 + "\n"


def test_log_parts_merge_cut_and_bound() -> None:
    lines = [("stdout", 1.0, "ab"), ("stdout", 2.0, "cd"), ("stderr", 3.0, "efghij")]
    assert _log_parts(lines, 100, 100) == [[["stdout", 1.0, "abcd"], ["stderr", 3.0, "efghij"]]]
    parts = _log_parts(lines, 4, 100)
    assert parts == [[["stdout", 1.0, "abcd"]], [["stderr", 3.0, "efgh"]], [["stderr", 3.0, "ij"]]]
    assert [
        len(p) for p in _log_parts([("stdout", 0.0, "x"), ("stderr", 0.0, "y")] * 3, 99, 2)
    ] == [
        2,
        2,
        2,
    ]


def test_chunks_are_at_most_the_stores_chunk_size(client: Any, store: Any) -> None:
    (part,) = _log_parts([("stdout", 0.0, "x" * 10), ("stdout", 0.0, "y" * 20_000)], 10**6, 99)
    assert [len(c[2]) for c in part] == [8192, 8192, 3626]
    run = create_run(store, "p")
    answer = client.post(
        f"/api/v1/runs/{run.id}/logs", json={"chunks": [["stderr", 1, "z" * 20_000]]}
    )
    assert answer.status_code == 201
    chunks = client.get(f"/api/v1/runs/{run.id}/logs").get_json()["chunks"]
    assert [len(c["text"]) for c in chunks] == [8192, 8192, 3616]


def test_an_absent_server_is_unavailable_at_once() -> None:
    with refusing_port() as port:
        sink = HttpSink(f"http://127.0.0.1:{port}", retry_for=0.0)
        with pytest.raises(StoreUnavailable):
            sink.append_logs(1, [("stdout", 0.0, "x\n")], 100)


BAD_BODIES = [
    ({}, "chunks"),
    ({"chunks": "text"}, "chunks"),
    ({"chunks": [["stdout", 0.0]]}, "chunks[0]"),
    ({"chunks": [["stdout", 0.0, "ok\n"], "x"]}, "chunks[1]"),
    ({"chunks": [["stdin", 0.0, "x"]]}, "chunks[0]"),
    ({"chunks": [["stdout", -1, "x"]]}, "chunks[0]"),
    ({"chunks": [["stdout", "now", "x"]]}, "chunks[0]"),
    ({"chunks": [["stdout", 0.0, 5]]}, "chunks[0]"),
    ({"chunks": [], "max_chars": 0}, "max_chars"),
    ({"chunks": [], "max_chars": True}, "max_chars"),
    ({"chunks": [], "max_chars": 1.5}, "max_chars"),
    ({"chunks": [], "max_chars": MAX_CHARS_LIMIT + 1}, "max_chars"),
    ({"chunks": [["stdout", 0, ""]] * (MAX_CHUNKS + 1)}, "chunks"),
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
def test_malformed_bodies_are_400_naming_the_field(
    client: Any, store: Any, body: Any, field: str
) -> None:
    run = create_run(store, "p")
    answer = client.post(f"/api/v1/runs/{run.id}/logs", json=body)
    assert answer.status_code == 400
    error = envelope(answer)
    assert (error["code"], error["field"]) == ("invalid_input", field), error
    assert client.get(f"/api/v1/runs/{run.id}/logs").get_json()["chunks"] == []


def test_not_json_unknown_run_and_bad_fence(client: Any, store: Any) -> None:
    run = create_run(store, "p")
    url = f"/api/v1/runs/{run.id}/logs"
    answer = client.post(url, data="[1", content_type="application/json")
    assert answer.status_code == 400 and envelope(answer)["field"] == "body"
    answer = client.post("/api/v1/runs/987654/logs", json={"chunks": [["stdout", 0, "x"]]})
    assert answer.status_code == 404 and envelope(answer)["code"] == "not_found"
    answer = client.post(
        url, json={"chunks": [["stdout", 0, "x"]]}, headers={"X-Tracker-Attempt": "x:1"}
    )
    assert answer.status_code == 400 and envelope(answer)["field"] == "X-Tracker-Attempt"
    answer = client.post(url, json={"chunks": [["stdout", 0, "ok\n"]]})
    assert answer.status_code == 201 and answer.get_json() == {"run_id": run.id, "chars": 3}


def test_a_log_token_may_post_an_anonymous_client_may_not(make_app: Any, serve: Any) -> None:
    app = make_app(TOKEN=TOKEN)
    store = app.extensions["tracker"].store
    server = serve(app)
    log_secret = create_token(store, "log", "trainer")[1]
    run = HttpSink(server.url, token=log_secret).create_run("p", None, {}, [])
    with pytest.raises(TrackerError) as denied:
        HttpSink(server.url, token="").append_logs(run.id, [("stdout", 0.0, "anon\n")], 100)
    assert (denied.value.code, denied.value.http_status) == ("unauthorized", 401)
    HttpSink(server.url, token=log_secret).append_logs(run.id, [("stdout", 0.0, "ok\n")], 100)
    chunks = _read_logs(server.url, run.id, token=log_secret)["chunks"]
    assert [c["text"] for c in chunks] == ["ok\n"]
    with pytest.raises(NotFound):
        HttpSink(server.url, token=log_secret).append_logs(987654, [("stdout", 0, "x")], 100)
    # A cross-site page cannot post console text with the signed-in browser's cookie,
    # and a form post is no JSON.
    browser = app.test_client()
    assert browser.post("/login", json={"token": log_secret}).status_code == 200
    cross = browser.post(
        f"/api/v1/runs/{run.id}/logs",
        json={"chunks": [["stdout", 0, "evil\n"]]},
        headers={"Origin": "https://evil.example", "Referer": "https://evil.example/x"},
    )
    assert cross.status_code == 403 and envelope(cross)
    form = browser.post(f"/api/v1/runs/{run.id}/logs", data={"chunks": "x"})
    assert form.status_code == 415 and envelope(form)["code"] == "unsupported_media_type"
    assert [c["text"] for c in _read_logs(server.url, run.id)["chunks"]] == ["ok\n"]


def test_a_superseded_attempt_posts_no_console_text(make_app: Any, serve: Any) -> None:
    app = make_app(TOKEN=TOKEN)
    store = app.extensions["tracker"].store
    server = serve(app)
    queue.enqueue(store, JobSpec(argv=["true"], max_retries=1), now=1000.0)
    got = queue.claim(store, "w1", lease_s=10.0, now=1000.0)
    assert got is not None
    job_id, run_id = got[0].job.id, got[0].run_id
    sink = HttpSink(server.url, token=TOKEN)
    sink.fence = AttemptFence(job_id, 1)
    queue.reap_expired_leases(store, retry=lambda *a, **k: 0.0, now=1011.0)
    with pytest.raises(AttemptSuperseded, match=f"attempt 1 of job {job_id} was superseded"):
        sink.append_logs(run_id, [("stdout", 0.0, "stale\n")], 100)
    from tracker.store import models as m

    with store.engine.connect() as conn:
        assert conn.execute(m.RunLogChunkRow.__table__.select()).first() is None
