"""The sign-in page looks like the dashboard (its stylesheet, open before signing in) and says
why an old sign-in link stops working; every page has a sign-out button whose request obeys
the rules of every state change (JSON body, same origin) and ends the session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support.web import TOKEN


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sign-in.db'}"  # nothing here depends on the dialect


def signed_in(make_app: Callable[..., Flask]) -> FlaskClient:
    client = make_app(TOKEN=TOKEN).test_client()
    assert client.get(f"/login?token={TOKEN}").status_code == 302
    return client


def test_the_sign_in_page_uses_the_dashboards_stylesheet_and_explains_the_link(
    make_app: Callable[..., Flask],
) -> None:
    client = make_app(TOKEN=TOKEN).test_client()
    page = client.get("/login").get_data(as_text=True)
    assert 'href="/login/app.css"' in page and 'class="topbar"' in page
    css = client.get("/login/app.css")  # not signed in: the page must still be styled
    assert css.status_code == 200 and css.mimetype == "text/css"
    assert css.data == (Path(client.application.static_folder or "") / "app.css").read_bytes()
    assert "Each start of <code>tracker ui</code> / <code>tracker up</code> prints a" in page
    assert "<code>--token</code>" in page and "TRACKER_TOKEN" in page
    assert client.get("/static/app.css").status_code == 302  # the rest still needs a sign-in
    wrong = client.get("/login?token=stale-link-token")
    assert wrong.status_code == 401 and "Wrong access token." in wrong.get_data(as_text=True)


@pytest.mark.parametrize("path", ["/", "/jobs", "/runs/1", "/compare?runs=1"])
def test_every_page_has_a_sign_out_button(make_app: Callable[..., Flask], path: str) -> None:
    page = signed_in(make_app).get(path).get_data(as_text=True)
    assert 'id="sign-out"' in page
    no_auth = make_app().test_client().get(path).get_data(as_text=True)
    assert 'id="sign-out"' not in no_auth  # --no-auth: nobody signed in, nothing to end


def test_sign_out_ends_the_session_and_obeys_the_state_change_rules(
    make_app: Callable[..., Flask],
) -> None:
    client = signed_in(make_app)
    foreign = client.post("/logout", json={}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert client.post("/logout", data={"x": "1"}).status_code == 415  # a cross-site form
    assert client.get("/api/v1/runs").status_code == 200  # still signed in
    done = client.post("/logout", json={}, headers={"Origin": "http://localhost"})
    assert done.status_code == 200
    assert client.get("/api/v1/runs").status_code == 401
    assert client.get("/").headers["Location"].startswith("/login")
    after = client.get("/login?signed_out=1").get_data(as_text=True)
    assert "Signed out." in after
