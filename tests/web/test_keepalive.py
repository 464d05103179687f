"""Keep-alive connections of a real ``tracker ui`` (gunicorn):

- an idle one stays open past a client's pause between two calls: with gunicorn's default
  2 s, a client that paused about that long had its next request reset as the server closed
  the connection (about 1 request in 50 of a client pausing ~2 s);
- a request sent right after the answer to a refused POST is answered: gunicorn drained the
  refused body after answering and read the next request with it, which then waited for the
  idle timeout (an MLflow script's call failed so in CI: "Remote end closed connection
  without response")."""

from __future__ import annotations

import http.client
import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.web.test_remote_submit import Dashboard, dashboard  # noqa: F401 - the fixture
from tracker.cli.ui import KEEPALIVE_S


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_an_idle_connection_outlives_a_clients_pause(dashboard: Dashboard) -> None:  # noqa: F811
    address = urlsplit(dashboard.url)
    conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
    try:
        conn.request("GET", "/api/v1/health")
        first = conn.getresponse()
        first.read()
        assert first.status == 200 and not first.will_close
        sock = conn.sock
        time.sleep(3)  # past gunicorn's default keep-alive, far below ours
        conn.request("GET", "/api/v1/health")  # on the same socket: a reset raises here
        second = conn.getresponse()
        second.read()
        assert second.status == 200 and conn.sock is sock
    finally:
        conn.close()
    assert KEEPALIVE_S > 60  # behind a load balancer's 60 s idle timeout


def _answer(sock: socket.socket) -> bytes:
    """The status line of one whole response read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    length = next(int(h.split(b":")[1]) for h in lines if h.lower().startswith(b"content-length"))
    while len(rest) < length:
        rest += sock.recv(4096)
    return lines[0]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_request_right_after_a_refused_post_is_answered(dashboard: Dashboard) -> None:  # noqa: F811
    address = urlsplit(dashboard.url)
    body = b'{"experiment_id": "0"}'
    host = address.netloc.encode()
    with socket.create_connection((address.hostname or "", address.port or 80), 5) as sock:
        # a POST refused on its headers (no valid token): the view never reads the body
        sock.sendall(
            b"POST /api/2.0/mlflow/runs/create HTTP/1.1\r\nHost: %s\r\n"
            b"Authorization: Bearer trk_not_a_token\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (host, len(body))
        )
        assert _answer(sock) == b"HTTP/1.1 401 UNAUTHORIZED"
        # its body, and the next request behind it in the same packet, as a client that
        # sends its body late and its next call at once
        sock.sendall(body + b"GET /api/v1/health HTTP/1.1\r\nHost: %s\r\n\r\n" % host)
        assert _answer(sock) == b"HTTP/1.1 200 OK"  # a socket timeout (5 s) before the fix
