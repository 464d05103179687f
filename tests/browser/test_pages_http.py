"""The HTML pages over HTTP (no browser): every page renders, loads scripts only from this
origin (the Content-Security-Policy forbids inline scripts), and the vendored plotly.js is
served with a long cache lifetime and the version recorded for it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tracker.web.app import create_app
from tracker.web.views.pages import PLOTLY_JS, PLOTLY_JS_VERSION

PAGES = ["/", "/runs/1", "/compare?runs=1,2,3", "/jobs"]
SCRIPT_TAG = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.S)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    app = create_app(
        {"STORE_URI": f"sqlite:///{tmp_path / 'tracker.db'}", "TESTING": True, "NO_AUTH": True}
    )
    yield app
    app.extensions["tracker"].store.close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.mark.parametrize("path", PAGES)
def test_pages_load_only_local_scripts(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    html = response.get_data(as_text=True)
    scripts = SCRIPT_TAG.findall(html)
    assert scripts, "every page has its script"
    for attrs, body in scripts:
        assert body.strip() == "", f"inline script on {path}"
        (src,) = re.findall(r'src="([^"]+)"', attrs)
        assert src.startswith("/static/"), src
        asset = client.get(src)
        assert asset.status_code == 200, src
        assert asset.mimetype == "text/javascript", src
        asset.close()
    assert 'href="/"' in html and 'href="/jobs"' in html  # the nav


def test_vendored_plotly_is_the_recorded_version() -> None:
    header = PLOTLY_JS.read_bytes()[:200].decode("ascii")
    match = re.search(r"^\* plotly\.js v(\S+)$", header, re.M)
    assert match is not None, header
    assert match[1] == PLOTLY_JS_VERSION


def test_plotly_is_served_from_the_vendored_file_with_a_long_cache(client: FlaskClient) -> None:
    response = client.get("/static/vendor/plotly.min.js")
    assert response.status_code == 200
    assert response.get_data() == PLOTLY_JS.read_bytes()
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    page = client.get("/runs/1").get_data(as_text=True)
    assert f"/static/vendor/plotly.min.js?v={PLOTLY_JS_VERSION}" in page  # busts the cache


def test_compare_page_rejects_bad_run_ids(client: FlaskClient) -> None:
    response = client.get("/compare?runs=1,x")
    assert response.status_code == 400
    assert response.get_json()["error"]["field"] == "runs"
    too_many = ",".join(str(i) for i in range(1, 202))
    assert client.get(f"/compare?runs={too_many}").status_code == 400
