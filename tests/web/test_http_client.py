"""The one HTTP client (``tracker.client.http``) under its two users, the HTTP sink and the
CLI's ``HttpReader``: against the real dashboard and against a tiny real HTTP server that
answers 429 with ``Retry-After`` before 200, garbage, or a bare error, the same answer gives
the same exception class, code, field and message to both, and both wait as asked."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from flask import Flask

from tests.support.servers import ServerThread
from tests.support.web import TOKEN
from tracker.cli.remote import HttpReader
from tracker.client.http import NotReceived, error_from_answer, should_retry
from tracker.client.http_sink import HttpSink
from tracker.errors import (
    Conflict,
    InvalidInput,
    InvalidMetricKey,
    NotFound,
    StoreUnavailable,
    TrackerError,
)

Answer = tuple[int, dict[str, str], bytes]
ENVELOPE = b'{"error": {"code": "invalid_metric_key", "message": "bad key", "field": "key"}}'


class Scripted:
    """A real HTTP server on a free loopback port that gives the scripted answers in
    order (the last one again once they run out) and records when each request came."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[str, str, float]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                scripted.seen.append((self.command, self.path, time.monotonic()))
                status, headers, body = (
                    scripted.answers.pop(0) if len(scripted.answers) > 1 else scripted.answers[0]
                )
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        self.server.server_close()


@pytest.fixture
def scripted() -> Iterator[Callable[[list[Answer]], Scripted]]:
    servers: list[Scripted] = []

    def start(answers: list[Answer]) -> Scripted:
        servers.append(Scripted(answers))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _both(url: str, token: str | None = None, retry_for: float = 5.0) -> list[Callable[[], Any]]:
    """The same request (``GET /api/v1/runs/7/checkpoints``) made by the sink and by the
    reader."""
    sink = HttpSink(url, token=token or "", retry_for=retry_for)
    reader = HttpReader(url, token, retry_for=retry_for)
    return [lambda: sink.list_checkpoints(7), lambda: reader.checkpoints(7)]


def _raised(call: Callable[[], Any]) -> TrackerError:
    with pytest.raises(TrackerError) as caught:
        call()
    return caught.value


def _same(errors: list[TrackerError], *, field: bool = True) -> TrackerError:
    """The one error both raised (the field too, unless two routes name it differently)."""
    first, second = errors
    assert type(first) is type(second)
    assert (first.code, first.message, getattr(first, "http_status", None)) == (
        second.code,
        second.message,
        getattr(second, "http_status", None),
    )
    assert not field or first.field == second.field
    return first


# ---------------------------------------------------------------- the real dashboard


def test_the_dashboards_errors_read_the_same_from_sink_and_reader(
    make_app: Callable[..., Flask], serve: Callable[[Flask], ServerThread]
) -> None:
    server = serve(make_app(TOKEN=TOKEN))
    sink, reader = HttpSink(server.url, token=TOKEN), HttpReader(server.url, TOKEN)
    missing = _same(
        [_raised(lambda: sink.start_run(999, None)), _raised(lambda: reader.run(999))],
        field=False,  # the two routes name it run and runs
    )
    assert isinstance(missing, NotFound) and missing.code == "not_found"
    assert missing.http_status == 404 and "999" in missing.message

    denied = _same([_raised(call) for call in _both(server.url, "wrong-token-" + "x" * 30)])
    assert (denied.code, denied.http_status) == ("unauthorized", 401)
    assert "--token or TRACKER_TOKEN" in denied.message and "wrong" not in denied.message


# ------------------------------------------------------------ a tiny scripted server


def test_429_with_retry_after_then_200_is_waited_out_by_both(
    scripted: Callable[[list[Answer]], Scripted],
) -> None:
    for which in range(2):
        server = scripted(
            [(429, {"Retry-After": "1"}, b'{"error": {"code": "too_many_requests"}}'),
             (200, {}, b'{"checkpoints": []}')]
        )  # fmt: skip
        assert _both(server.url)[which]() == []
        (first, second) = server.seen
        assert first[1] == second[1] == "/api/v1/runs/7/checkpoints"
        assert second[2] - first[2] >= 0.9, "Retry-After: 1 was not honoured"


def test_a_create_answered_429_is_sent_again(
    scripted: Callable[[list[Answer]], Scripted],
) -> None:
    """Not idempotent, but a 429 was not acted on: the sink sends it again."""
    run = {"id": 3, "project": "p", "name": "r", "status": "running", "config": {}, "tags": []}
    run["created_at"] = 1.0
    server = scripted([(429, {"Retry-After": "0"}, b""), (201, {}, json.dumps(run).encode())])
    assert HttpSink(server.url).create_run("p", "r", {}, []).id == 3
    assert [s[1] for s in server.seen] == ["/api/v1/runs", "/api/v1/runs"]


def test_429_for_longer_than_retry_for_is_store_unavailable_for_both(
    scripted: Callable[[list[Answer]], Scripted],
) -> None:
    server = scripted([(429, {"Retry-After": "30"}, b"")])
    error = _same([_raised(call) for call in _both(server.url, retry_for=1.0)])
    assert isinstance(error, StoreUnavailable)
    assert len(server.seen) == 2  # one each: a 30 s wait is past retry_for, none is sent again


@pytest.mark.parametrize(
    ("answer", "cls", "code", "field"),
    [
        ((200, {}, b"<html>hello</html>"), TrackerError, "tracker_error", None),
        ((400, {}, ENVELOPE), InvalidMetricKey, "invalid_metric_key", "key"),
        ((400, {}, b"<html>bad</html>"), InvalidInput, "http_400", None),
        ((404, {}, b"not json"), NotFound, "http_404", None),
        ((418, {}, b'{"error": "teapot"}'), TrackerError, "http_418", None),
    ],
)
def test_the_same_answer_is_the_same_error_for_both(
    scripted: Callable[[list[Answer]], Scripted],
    answer: Answer,
    cls: type[TrackerError],
    code: str,
    field: str | None,
) -> None:
    server = scripted([answer])
    error = _same([_raised(call) for call in _both(server.url)])
    assert type(error) is cls and (error.code, error.field) == (code, field)
    assert len(server.seen) == 2  # a 4xx answer (and garbage) is final: no retry
    if answer[0] == 200:
        assert "not the tracker's JSON" in error.message


def test_garbage_5xx_is_retried_then_store_unavailable_for_both(
    scripted: Callable[[list[Answer]], Scripted],
) -> None:
    server = scripted([(502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>")])
    error = _same([_raised(call) for call in _both(server.url, retry_for=0.5)])
    assert isinstance(error, StoreUnavailable) and "answered 502" in error.message
    assert len(server.seen) > 2  # each retried at least once


# ------------------------------------------------------------------ the pure policy


@pytest.mark.parametrize(
    ("status", "retry_after", "cls", "wait"),
    [
        (408, None, NotReceived, None),
        (429, "2", NotReceived, 2.0),
        (429, "Wed, 21 Oct 2015 07:28:05 GMT", NotReceived, 5.0),
        (500, "2", StoreUnavailable, None),
        (503, None, StoreUnavailable, None),
        (401, None, TrackerError, None),
        (404, None, NotFound, None),
        (409, None, Conflict, None),
    ],
)
def test_error_from_answer_and_should_retry(
    status: int, retry_after: str | None, cls: type[TrackerError], wait: float | None
) -> None:
    error = error_from_answer(
        status, b"", where="http://h", what="GET /x", retry_after=retry_after, now=1445412480.0
    )
    assert isinstance(error, cls) and getattr(error, "retry_after", None) == wait
    not_acted_on = isinstance(error, NotReceived)
    assert should_retry(error, idempotent=False) is not_acted_on
    assert should_retry(error, idempotent=True) is isinstance(error, StoreUnavailable)
