"""JSON API ``/api/v1/runs/<id>/{name,tags,notes,star}``: what a person writes on a run.

Admin scope (``tracker.web.plumbing.security``: a state change from a browser also needs
the dashboard's own origin and a JSON body). Each view parses the body, makes one call to
:mod:`tracker.store.annotations` (which records the change as a run event of kind
``annotation``, naming who asked: :func:`who`) and answers with the run as
``GET /api/v1/runs/<id>`` has it. Documented in ``web/API.md``.

Errors: 400 ``invalid_input`` naming the field and the rule (nothing changed), 404 for an
unknown run, 403 for a ``log`` token, 503 when the store cannot be reached.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app

from tracker.errors import InvalidInput
from tracker.store.annotations import rename_run, set_notes, set_starred, tag_run
from tracker.web.plumbing import auth
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body
from tracker.web.views.runs import run_json

bp = Blueprint("annotations", __name__, url_prefix="/api/v1")


def who() -> str:
    """Who is asking, for the audit event: a stored token by its id, else the dashboard's
    configured token (or ``--no-auth``)."""
    token = auth.token_id()
    if token is not None:
        return f"token {token}"
    return "no-auth" if current_app.config["NO_AUTH"] else "dashboard token"


def _field(body: dict[str, Any], name: str) -> Any:
    if name not in body:
        raise InvalidInput(f"{name} is required in the JSON body", field=name)
    return body[name]


def _list(body: dict[str, Any], name: str) -> list[Any]:
    value = body.get(name, [])
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise InvalidInput(f"{name} must be a list of tags", field=name)
    return value


@bp.patch("/runs/<int:run_id>/name")
def rename(run_id: int) -> Any:
    """``{"name": "..."}``: 1-250 characters on one line."""
    name = _field(json_body(), "name")
    return run_json(rename_run(state().store, run_id, name, by=who()))


@bp.patch("/runs/<int:run_id>/tags")
def tag(run_id: int) -> Any:
    """``{"add": ["k=v", "baseline"], "remove": ["k"]}``: removes first, then adds."""
    body = json_body()
    add, remove = _list(body, "add"), _list(body, "remove")
    if not add and not remove:
        raise InvalidInput(
            "give tags to add and/or remove (add: [...], remove: [...])", field="add"
        )
    return run_json(tag_run(state().store, run_id, add, remove, by=who()))


@bp.patch("/runs/<int:run_id>/notes")
def notes(run_id: int) -> Any:
    """``{"notes": "..."}``; null or blank text clears them."""
    text = _field(json_body(), "notes")
    return run_json(set_notes(state().store, run_id, text, by=who()))


@bp.patch("/runs/<int:run_id>/star")
def star(run_id: int) -> Any:
    """``{"starred": true}`` or ``false``."""
    starred = _field(json_body(), "starred")
    if not isinstance(starred, bool):
        raise InvalidInput(f"starred must be true or false, not {starred!r:.40}", field="starred")
    return run_json(set_starred(state().store, run_id, starred, by=who()))
