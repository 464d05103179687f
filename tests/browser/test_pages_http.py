"""The HTML pages over HTTP (no browser): every page renders, loads scripts only from this
origin (the Content-Security-Policy forbids inline scripts), deferred but for the theme;
static files have content-hashed URLs, a year-long cache for those, gzip; the vendored
plotly.js bundles are the version recorded for them."""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tracker.web.app import create_app
from tracker.web.views.pages import PLOTLY_FULL_JS, PLOTLY_JS, PLOTLY_JS_VERSION

PAGES = ["/", "/runs/1", "/compare?runs=1,2,3", "/jobs"]
TEMPLATES = Path(__file__).resolve().parents[2] / "web" / "templates"
STATIC = TEMPLATES.parent / "static"
IMMUTABLE = "public, max-age=31536000, immutable"
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
        assert re.search(r"\?v=[0-9a-f]{12}$", src), f"{src}: no content hash"
        asset = client.get(src)
        assert asset.status_code == 200, src
        assert asset.mimetype == "text/javascript", src
        asset.close()
    assert 'href="/"' in html and 'href="/jobs"' in html  # the nav


@pytest.mark.parametrize("bundle", [PLOTLY_JS, PLOTLY_FULL_JS], ids=["partial", "full"])
def test_vendored_plotly_is_the_recorded_version(bundle: Path) -> None:
    header = bundle.read_bytes()[:300].decode("ascii")
    match = re.search(r"^\* plotly\.js v(\S+)$", header, re.M)
    assert match is not None, header
    assert match[1] == PLOTLY_JS_VERSION
    assert (STATIC / "vendor" / "LICENSE-plotly.txt").read_text().startswith("MIT License")


def test_the_partial_bundle_holds_the_trace_types_the_pages_draw() -> None:
    """The charts draw scatter and heatmap traces (charts.js, run_charts.js, compare.js,
    histograms.js); the partial bundle says in its header what it registered."""
    trace = re.compile(r'type: "(scatter\w*|heatmap|bar|histogram\w*|box|violin|pie|contour)"')
    drawn = set()
    for script in STATIC.glob("*.js"):
        drawn |= set(trace.findall(script.read_text()))
    assert drawn >= {"scatter", "heatmap"}, drawn
    header = PLOTLY_JS.read_bytes()[:300].decode("ascii")
    (listed,) = re.findall(r"^\* partial bundle: ([\w ]+) \(", header, re.M)
    assert drawn <= set(listed.split()), (drawn, listed)
    assert len(PLOTLY_JS.read_bytes()) < len(PLOTLY_FULL_JS.read_bytes()) / 3  # the point of it


def test_plotly_is_served_with_a_content_hash_and_a_long_cache(client: FlaskClient) -> None:
    page = client.get("/runs/1").get_data(as_text=True)
    digest = hashlib.sha256(PLOTLY_JS.read_bytes()).hexdigest()[:12]
    src = f"/static/vendor/plotly-charts.min.js?v={digest}"
    assert f'<script defer src="{src}">' in page  # the URL changes when the file does
    response = client.get(src, headers={"Accept-Encoding": "gzip, deflate"})
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == IMMUTABLE
    assert response.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response.headers["Vary"]
    wire = response.get_data()
    assert len(wire) < len(PLOTLY_JS.read_bytes()) / 2
    assert gzip.decompress(wire) == PLOTLY_JS.read_bytes()
    plain = client.get(src)  # a client that does not accept gzip
    assert "Content-Encoding" not in plain.headers
    assert plain.get_data() == PLOTLY_JS.read_bytes()
    full = re.search(r'data-plotly-full="([^"]+)"', page)
    assert full is not None and full[1].startswith("/static/vendor/plotly.min.js?v=")


def test_static_files_without_their_hash_are_revalidated(client: FlaskClient) -> None:
    fresh = client.get("/static/common.js")  # no ?v: an old page, or a hand-typed URL
    assert fresh.status_code == 200 and fresh.headers["Cache-Control"] == "no-cache"
    etag = fresh.headers["ETag"]
    assert client.get("/static/common.js", headers={"If-None-Match": etag}).status_code == 304
    stale = client.get("/static/common.js?v=000000000000")  # a hash of an older file
    assert stale.headers["Cache-Control"] == "no-cache"
    assert stale.get_data() == (STATIC / "common.js").read_bytes()


@pytest.mark.parametrize(
    "path", ["/static/../app.py", "/static/%2e%2e/app.py", "/static/vendor/", "/static/nope.js"]
)
def test_static_serves_only_files_inside_the_folder(client: FlaskClient, path: str) -> None:
    assert client.get(path).status_code == 404


def test_every_template_script_is_deferred_but_the_theme() -> None:
    """Scripts run in document order after parsing (common.js, plotly.js, the page's own),
    so nothing blocks the first paint; a script without defer would run before common.js.
    Only theme.js, a few lines in <head>, runs at once: the theme applies before paint (on
    the sign-in page too, served to everyone as ``auth.login_theme``)."""
    for template in sorted(TEMPLATES.glob("*.html")):
        for tag in re.findall(r"<script\b[^>]*>", template.read_text()):
            if "theme.js" in tag or "login_theme" in tag:
                assert template.name in ("base.html", "login.html") and "defer" not in tag
            else:
                assert re.search(r"\sdefer[\s>]", tag), f"{template.name}: {tag} is not deferred"


def test_compare_page_rejects_bad_run_ids(client: FlaskClient) -> None:
    response = client.get("/compare?runs=1,x")
    assert response.status_code == 400
    assert response.get_json()["error"]["field"] == "runs"
    too_many = ",".join(str(i) for i in range(1, 202))
    assert client.get(f"/compare?runs={too_many}").status_code == 400
