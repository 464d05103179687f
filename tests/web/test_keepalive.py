"""A real ``tracker ui`` (gunicorn) keeps an idle keep-alive connection open past the
pause of a client between two calls: with gunicorn's default 2 s, a client that paused
about that long had its next request reset as the server closed the connection (an MLflow
script's call failed so in CI; about 1 request in 50 of a client pausing ~2 s)."""

from __future__ import annotations

import http.client
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
