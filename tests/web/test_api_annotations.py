"""``PATCH /api/v1/runs/<id>/{name,tags,notes,star}`` (web/views/annotations.py): admin only,
guarded against cross-site requests, each change an ``annotation`` event naming who asked;
MLflow clients see the notes as ``mlflow.note.content`` and write them the same way.
Real app on a real SQLite file and a real PostgreSQL database; the real mlflow client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlflow
from flask import Flask
from flask.testing import FlaskClient
from mlflow import MlflowClient

from tests.support.web import TOKEN, envelope
from tests.web.test_mlflow_compat import mlflow_server, store_of
from tracker.store.annotations import EVENT_KIND
from tracker.store.events import list_events
from tracker.store.runs import create_run, get_run
from tracker.store.tokens import create_token

__all__ = ["mlflow_server"]  # the fixture, shared with test_mlflow_compat

ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def _audit(app: Flask, run_id: int) -> list[tuple[str, dict[str, Any]]]:
    return [(e.message, e.data) for e in list_events(store_of(app), run_id)
            if e.kind == EVENT_KIND]  # fmt: skip


def test_an_admin_edits_name_tags_notes_and_star(make_app: Callable[..., Flask]) -> None:
    app = make_app(TOKEN=TOKEN)
    run = create_run(store_of(app), "p", "r", tags=["base"]).id
    client = app.test_client()
    renamed = client.patch(f"/api/v1/runs/{run}/name", json={"name": "lr=3e-4"}, headers=ADMIN)
    assert renamed.status_code == 200 and renamed.json["name"] == "lr=3e-4"
    tagged = client.patch(f"/api/v1/runs/{run}/tags", json={"add": ["owner=ana", "x"]},
                          headers=ADMIN)  # fmt: skip
    assert tagged.json["tags"] == ["base", "owner=ana", "x"]
    untagged = client.patch(f"/api/v1/runs/{run}/tags", json={"remove": "x"}, headers=ADMIN)
    assert untagged.json["tags"] == ["base", "owner=ana"]
    noted = client.patch(f"/api/v1/runs/{run}/notes", json={"notes": "why: warmup"},
                         headers=ADMIN)  # fmt: skip
    assert noted.json["notes"] == "why: warmup"
    starred = client.patch(f"/api/v1/runs/{run}/star", json={"starred": True}, headers=ADMIN)
    assert starred.json["starred"] is True and starred.json["id"] == run
    detail = client.get(f"/api/v1/runs/{run}", headers=ADMIN).json
    assert (detail["name"], detail["tags"], detail["notes"], detail["starred"]) == (
        "lr=3e-4",
        ["base", "owner=ana"],
        "why: warmup",
        True,
    )
    hits = client.get("/api/v1/runs", query_string={"q": 'starred and notes ~ "WARM"'},
                      headers=ADMIN).json["runs"]  # fmt: skip
    assert [(h["id"], h["starred"], h["notes_preview"]) for h in hits] == [
        (run, True, "why: warmup")
    ]
    audit = _audit(app, run)
    assert [m for m, _ in audit] == [
        "renamed to 'lr=3e-4'", "tags +owner=ana +x", "tags -x",
        "notes edited (11 characters)", "starred",
    ]  # fmt: skip
    assert {d["by"] for _, d in audit} == {"dashboard token"}  # the configured token


def test_a_stored_admin_token_is_named_in_the_audit_event(make_app: Callable[..., Flask]) -> None:
    app = make_app(TOKEN=TOKEN)
    info, secret = create_token(store_of(app), "admin", "ana's laptop")
    run = create_run(store_of(app), "p", "r").id
    answer = app.test_client().patch(
        f"/api/v1/runs/{run}/star", json={"starred": True},
        headers={"Authorization": f"Bearer {secret}"},
    )  # fmt: skip
    assert answer.status_code == 200
    assert _audit(app, run) == [("starred", {"field": "starred", "to": True,
                                             "by": f"token {info.id}"})]  # fmt: skip


def test_a_log_token_is_refused_and_nothing_changes(make_app: Callable[..., Flask]) -> None:
    app = make_app(TOKEN=TOKEN)
    _, log = create_token(store_of(app), "log", "trainer")
    run = create_run(store_of(app), "p", "r").id
    client = app.test_client()
    for what, body in [("name", {"name": "x"}), ("tags", {"add": ["x"]}),
                       ("notes", {"notes": "x"}), ("star", {"starred": True})]:  # fmt: skip
        refused = client.patch(f"/api/v1/runs/{run}/{what}", json=body,
                               headers={"Authorization": f"Bearer {log}"})  # fmt: skip
        assert refused.status_code == 403, what
        error = envelope(refused)
        assert error["code"] == "forbidden_scope" and "'admin' scope" in error["message"]
        assert client.patch(f"/api/v1/runs/{run}/{what}", json=body).status_code == 401
    after = get_run(store_of(app), run)
    assert (after.name, after.tags, after.notes, after.starred) == ("r", [], None, False)
    assert _audit(app, run) == []


def _signed_in(app: Flask) -> FlaskClient:
    client = app.test_client()
    assert client.post("/login", json={"token": TOKEN}).status_code == 200
    return client


def test_a_browser_session_needs_its_own_origin_and_a_json_body(
    make_app: Callable[..., Flask],
) -> None:
    """CSRF: a signed-in browser's cookie rides along on a request another site's page
    sends; that page cannot send a JSON body without a preflight, nor our Origin."""
    app = make_app(TOKEN=TOKEN)
    run = create_run(store_of(app), "p", "r").id
    client = _signed_in(app)
    url = f"/api/v1/runs/{run}/notes"
    cross = client.patch(url, json={"notes": "pwned"}, headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403
    form = client.patch(url, data={"notes": "pwned"}, headers={"Origin": "http://localhost"})
    assert form.status_code == 415
    assert get_run(store_of(app), run).notes is None and _audit(app, run) == []
    same = client.patch(url, json={"notes": "mine"}, headers={"Origin": "http://localhost"})
    assert same.status_code == 200 and same.json["notes"] == "mine"


def test_bad_bodies_name_the_field(client: FlaskClient, store: Any) -> None:
    run = create_run(store, "p", "r").id
    cases = [
        ("name", {}, "name", "name is required"),
        ("name", {"name": ""}, "name", "name is empty"),
        ("name", {"name": "x" * 251}, "name", "at most 250"),
        ("tags", {}, "add", "give tags to add and/or remove"),
        ("tags", {"add": {"k": "v"}}, "add", "must be a list of tags"),
        ("tags", {"add": ["mlflow.note.content=x"]}, "add", "MLflow's own tags"),
        ("tags", {"remove": [""]}, "remove", "non-empty"),
        ("notes", {"notes": 5}, "notes", "must be a string"),
        ("notes", {"notes": "x" * 65_537}, "notes", "at most 65,536"),
        ("star", {"starred": "yes"}, "starred", "true or false"),
        ("star", {}, "starred", "starred is required"),
    ]
    for what, body, field, fragment in cases:
        answer = client.patch(f"/api/v1/runs/{run}/{what}", json=body)
        assert answer.status_code == 400, (what, body)
        error = envelope(answer)
        assert error["field"] == field and fragment in error["message"], (what, error)
    missing = client.patch("/api/v1/runs/999999/star", json={"starred": True})
    assert (
        missing.status_code == 404 and "run 999999 does not exist" in envelope(missing)["message"]
    )
    after = get_run(store, run)
    assert (after.name, after.tags, after.notes, after.starred) == ("r", [], None, False)


def test_mlflow_clients_share_the_notes(mlflow_server: Callable[..., Flask]) -> None:
    """MlflowClient().set_tag(run, "mlflow.note.content", ...) is the run's notes; notes
    written here are that tag for MLflow; search_runs filters on it."""
    app = mlflow_server()
    client = MlflowClient()
    experiment = client.create_experiment("notes")
    run_id = client.create_run(experiment).info.run_id
    client.set_tag(run_id, "mlflow.note.content", "written by MLflow")
    assert get_run(store_of(app), int(run_id)).notes == "written by MLflow"
    http = app.test_client()
    http.patch(f"/api/v1/runs/{run_id}/notes", json={"notes": "edited on the dashboard"})
    assert client.get_run(run_id).data.tags["mlflow.note.content"] == "edited on the dashboard"
    found = client.search_runs([experiment], "tags.`mlflow.note.content` LIKE '%dashboard%'")
    assert [r.info.run_id for r in found] == [run_id]
    client.delete_tag(run_id, "mlflow.note.content")
    assert get_run(store_of(app), int(run_id)).notes is None
    assert "mlflow.note.content" not in client.get_run(run_id).data.tags
    with mlflow.start_run(experiment_id=experiment, description="set at the start") as active:
        pass
    assert get_run(store_of(app), int(active.info.run_id)).notes == "set at the start"
