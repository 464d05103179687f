"""JSON API ``/api/v1/runs/<id>/profiles``: ask a running run to profile its next N steps,
then read where the time went. Documented in ``web/API.md`` (Profiles).

* ``POST .../profiles`` ``{"steps": 20, "ranks": "0" | "all"}``: 201 and the profile, state
  ``requested``; the run's client takes it on its next heartbeat. Admin scope (the default
  for a state change: ``tracker.web.plumbing.security``), naming who asked (:func:`who`).
* ``GET .../profiles``: the run's profiles, newest first.
* ``GET .../profiles/<pid>``: the profile, its summary and the cause of slow steps with what
  to try (:mod:`tracker.store.profile_views`); a trace that cannot be summarised answers
  ``summary_error``, never a 500.
* ``GET .../profiles/<pid>/trace?rank=N``: one rank's gzip'd Chrome trace as a download
  (default the lowest rank), for Perfetto or ``chrome://tracing``.
* ``GET .../profiles/<a>/diff/<b>``: the two summaries compared.

The report the run's client sends (``POST .../profiles/<pid>/report``, scope ``log``) is in
``web/views/runs.py`` beside the heartbeat that carries the request.

Errors: 400 naming the field (bad steps or ranks), 404 (no run, profile or trace), 409 (the
run is not running, it already has an open profile, a diff of a profile without a summary),
403 for a ``log`` token asking for a profile, 503 when the store cannot be reached.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, request
from werkzeug.wsgi import wrap_file

from tracker.store import artifacts, profile_views, profiles
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import json_body, optional_int_arg
from tracker.web.views.annotations import who
from tracker.web.views.artifacts import CHUNK, DOWNLOAD_CSP

bp = Blueprint("profiles", __name__, url_prefix="/api/v1")


@bp.post("/runs/<int:run_id>/profiles")
def request_profile(run_id: int) -> Any:
    """``{"steps": 1..MAX_STEPS (default 20), "ranks": "0" | "all" (default "0")}``."""
    body = json_body()
    found = profiles.request_profile(
        state().store, run_id, body.get("steps", 20), body.get("ranks", "0"), by=who()
    )
    return {"profile": found.json()}, 201


@bp.get("/runs/<int:run_id>/profiles")
def list_profiles(run_id: int) -> Any:
    found = profiles.list_profiles(state().store, run_id)
    return {"run_id": run_id, "max_steps": profiles.MAX_STEPS,
            "profiles": [p.json() for p in found]}  # fmt: skip


@bp.get("/runs/<int:run_id>/profiles/<int:profile_id>")
def profile_detail(run_id: int, profile_id: int) -> Any:
    return profile_views.detail(state().store, run_id, profile_id)


@bp.get("/runs/<int:run_id>/profiles/<int:a>/diff/<int:b>")
def profile_diff(run_id: int, a: int, b: int) -> Any:
    return profile_views.compare(state().store, run_id, a, b)


@bp.get("/runs/<int:run_id>/profiles/<int:profile_id>/trace")
def profile_trace(run_id: int, profile_id: int) -> Response:
    """The trace's bytes as stored (gzip'd JSON), streamed, always an attachment."""
    store = state().store
    trace = profile_views.trace_of(store, run_id, profile_id, optional_int_arg("rank"))
    info = artifacts.get_artifact(store, run_id, trace["path"])
    blob = artifacts.open_artifact(store, run_id, trace["path"])
    body = wrap_file(request.environ, blob, CHUNK)
    response = Response(body, content_type="application/gzip", direct_passthrough=True)
    response.content_length = info.size
    response.set_etag(info.sha256)
    name = f"run{run_id}-profile{profile_id}-rank{trace['rank']}.pt.trace.json.gz"
    disposition = f"attachment; filename=\"{name}\"; filename*=UTF-8''{quote(name)}"
    response.headers["Content-Disposition"] = disposition
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = DOWNLOAD_CSP
    response.headers["Cache-Control"] = "private, no-cache"
    return response
