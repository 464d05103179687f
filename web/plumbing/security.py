"""The dashboard's guards: it can start processes, so every request is checked.

* bind: loopback by default; any other address needs a strong configured token
  (``check_bind``); ``--no-auth`` only on loopback.
* Host header: must be an allowed host on every request (DNS-rebinding defence) -> 403.
* who may do what: ``ENDPOINT_SCOPES`` below is the one table from route (Flask endpoint)
  to the scope it needs: ``public`` (health, sign-in), ``log`` (every read, and what a
  training host writes: runs, metrics, checkpoints, events, the MLflow-compatible API) or
  ``admin`` (launching: submit, code snapshots, clone, schedules, cancel; anything that
  deletes). An endpoint
  missing from the table needs ``admin`` for a state change and ``log`` to read (fail
  closed); a test checks that every route is in it. Not signed in -> 401 (a page GET
  redirects to ``/login``); signed in with too small a scope -> 403 ``forbidden_scope``
  naming the scope needed. Who is asking is :mod:`~tracker.web.plumbing.auth`'s business.
  A job's own token (``tokens.create_job_token``: ``log`` scope, one run, one attempt) is
  refused (403) on every request that does not name its run: in its path, or, on the MLflow
  routes whose view takes the run from a field (``MLFLOW_RUN_FIELD_ENDPOINTS``), in
  ``run_id`` / ``run_uuid`` of the query and JSON body (every one given must name it).
* state changes (POST/PUT/PATCH/DELETE): an Origin or Referer header, when sent, must be
  this dashboard's own origin -> 403; the body must be JSON (gzip allowed) -> 415, except
  for the sign-in form (which checks its own CSRF field) and the raw-body endpoints
  (``RAW_BODY_ENDPOINTS``: the artifact PUT/DELETE, a snapshot file's PUT and MLflow's
  artifact proxy, a file as the body or none; PUT and DELETE always need a preflight). A
  cross-site page cannot send a JSON body without a CORS preflight, which is never granted.
  Requests with neither Origin nor Referer come from programs (the HTTP sink, curl), not
  browsers, and are let through to the token check.
* responses: ``X-Content-Type-Options``, ``X-Frame-Options``, a Content-Security-Policy that
  allows scripts from this origin only.
* files: served only from inside configured roots that never hold the store
  (``tracker.web.plumbing.files``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlsplit

from flask import Flask, Response, current_app, redirect, request

from tracker.errors import InvalidInput
from tracker.rules.ids import parse_id
from tracker.web.plumbing import auth
from tracker.web.plumbing.errors import (
    Forbidden,
    ForbiddenScope,
    PayloadTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from tracker.web.plumbing.params import json_body

__all__ = [
    "ADMIN",
    "CONTENT_SECURITY_POLICY",
    "ENDPOINT_SCOPES",
    "LOG",
    "MLFLOW_RUN_FIELD_ENDPOINTS",
    "PUBLIC",
    "RAW_BODY_ENDPOINTS",
    "InsecureBind",
    "allowed_host",
    "check_bind",
    "default_allowed_hosts",
    "install",
    "is_loopback",
    "required_scope",
    "scope_allows",
    "weak_token_reason",
]

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
MIN_TOKEN_LENGTH = 32
MIN_TOKEN_DISTINCT = 10


class InsecureBind(InvalidInput):
    code = "insecure_bind"


# ------------------------------------------------------------------------ scopes

PUBLIC, LOG, ADMIN = "public", auth.LOG, auth.ADMIN
_RANK = {PUBLIC: 0, LOG: 1, ADMIN: 2}

# The one table: Flask endpoint -> the scope a request to it needs. One endpoint, one
# scope: a URL whose methods need different scopes gets one endpoint per method.
ENDPOINT_SCOPES: dict[str, str] = {
    # open: liveness and signing in
    "api.health": PUBLIC,
    "auth.login_page": PUBLIC,
    "auth.login": PUBLIC,
    "auth.login_css": PUBLIC,  # the sign-in page's stylesheet (the dashboard's app.css)
    "auth.login_theme": PUBLIC,  # and its colour-theme script (static/theme.js)
    # read (every token may read): pages, their assets, the JSON reads, downloads
    "static": LOG,
    "pages.runs": LOG,
    "pages.run": LOG,
    "pages.compare": LOG,
    "pages.jobs": LOG,
    "pages.job": LOG,
    "pages.sweeps": LOG,
    "pages.sweep": LOG,
    "auth.logout": LOG,
    "api.projects": LOG,
    "api.runs_search": LOG,
    "runs_csv.runs_csv": LOG,
    "api.run_columns": LOG,
    "api.run_detail": LOG,
    "api.run_metrics": LOG,
    "api.run_series": LOG,
    "api.run_points": LOG,
    "api.multi_run_series": LOG,
    "workspace.workspace_series": LOG,
    "workspace.views": LOG,
    "api.compare": LOG,
    "api.run_events": LOG,
    "api.run_diagnoses": LOG,
    "api.run_logs": LOG,
    "api.run_checkpoints": LOG,
    "api.checkpoint_download": LOG,
    "api.files": LOG,
    "api_queue.jobs": LOG,
    "api_queue.job": LOG,
    "api_queue.job_logs": LOG,
    "api_queue.schedules": LOG,
    "api_queue.workers": LOG,
    "artifacts.list_artifacts": LOG,
    "artifacts.download_artifact": LOG,
    "artifacts.media": LOG,
    "artifacts.media_files": LOG,
    "artifacts.histogram": LOG,
    "snapshots.snapshot": LOG,
    # log: what a training host writes about its own runs
    "api.create_run": LOG,
    "api.start_run": LOG,
    "api.heartbeat": LOG,
    "api.report_profile": LOG,  # the run's own client; asking for a profile is admin
    "api.run_control": LOG,  # a follower rank asks what the store asks of the run
    "api.write_metrics": LOG,
    "api.add_checkpoint": LOG,
    "api.set_checkpoint_state": LOG,
    "api.add_event": LOG,
    "api.append_run_logs": LOG,
    "api.finish_run": LOG,
    "api.rerun_diagnoses": LOG,
    "artifacts.put_artifact": LOG,
    # admin: whatever makes a worker run something, stops it, or deletes
    "api.clone_run": ADMIN,
    "api_queue.clone": ADMIN,
    "api_queue.cancel": ADMIN,
    # submitting: a command line of the caller's (tracker submit --uri http://...) and the
    # code snapshot it runs; a trusted submitter, as one holding the database URL
    "api_queue.submit": ADMIN,
    "snapshots.missing": ADMIN,
    "snapshots.put_blob": ADMIN,
    "snapshots.create": ADMIN,
    "api_queue.add_schedule": ADMIN,
    "api_queue.pause_schedule": ADMIN,
    "api_queue.delete_schedule": ADMIN,
    "api.delete_run": ADMIN,
    # named workspace views are shared by everyone who opens the dashboard
    "workspace.save_view": ADMIN,
    "workspace.delete_view": ADMIN,
    "api.restore_run": ADMIN,
    # a person's annotations on a run (views/annotations.py): name, tags, notes, star
    "annotations.rename": ADMIN,
    "annotations.tag": ADMIN,
    "annotations.notes": ADMIN,
    "annotations.star": ADMIN,
    # profiles of a running run (views/profiles.py): asking for one makes the training
    # process profile itself; reading them is a read
    "profiles.request_profile": ADMIN,
    "profiles.list_profiles": LOG,
    "profiles.profile_detail": LOG,
    "profiles.profile_diff": LOG,
    "profiles.profile_trace": LOG,
    # sweeps that learn (views/sweeps.py): making, stopping or resuming one queues or
    # cancels jobs; reading them is a read
    "sweeps.list_sweeps": LOG,
    "sweeps.sweep": LOG,
    "sweeps.create_sweep": ADMIN,
    "sweeps.stop_sweep": ADMIN,
    "sweeps.resume_sweep": ADMIN,
    # the MLflow lifecycle routes (views/mlflow_lifecycle.py): deletes and restores are
    # admin as everywhere; renames and experiment tags are what training code does
    "mlflow_lifecycle.delete_run": ADMIN,
    "mlflow_lifecycle.restore_run": ADMIN,
    "mlflow_lifecycle.delete_experiment": ADMIN,
    "mlflow_lifecycle.restore_experiment": ADMIN,
    "mlflow_lifecycle.update_experiment": LOG,
    "mlflow_lifecycle.set_experiment_tag": LOG,
    "mlflow_lifecycle.delete_experiment_tag": LOG,
    "artifacts.delete_artifact": ADMIN,
    # the MLflow routes' deletes of stored data: admin as on /api/v1 (a log token must not
    # delete another run's files or models); deleting a tag is what training code does
    "mlflow_artifacts.delete": ADMIN,
    "mlflow_models.delete_model": ADMIN,
    "mlflow.delete_tag": LOG,
    "mlflow_models.delete_tag": LOG,
}
# Whole blueprints under one rule: the MLflow-compatible API (/api/2.0/mlflow/...) is what
# training code logs through; it reads and writes runs, never launches. The rule covers
# reads and writes only: a DELETE, or an endpoint named for deleting, that the table does
# not name needs admin (see required_scope).
BLUEPRINT_SCOPES: dict[str, str] = {
    "mlflow": LOG,
    "mlflow_models": LOG,
    "mlflow_artifacts": LOG,
    "mlflow_info": LOG,
}
# State-changing endpoints that take an HTML form body instead of JSON.
FORM_BODY_ENDPOINTS = frozenset({"auth.login"})
# State-changing endpoints whose body is raw bytes (a file) or absent. Only PUT and DELETE:
# a cross-site page cannot send either without a CORS preflight, which is never granted, so
# the JSON-body rule's protection holds for them without it.
RAW_BODY_ENDPOINTS = frozenset(
    {
        "artifacts.put_artifact",
        "artifacts.delete_artifact",
        "snapshots.put_blob",  # a file of a code snapshot (web/views/snapshots.py)
        "mlflow_artifacts.upload",  # MLflow's artifact proxy (web/views/mlflow_artifacts.py)
        "mlflow_artifacts.mpu_part",
        "mlflow_artifacts.delete",
        "mlflow_models.delete_tag",  # the client sends this DELETE without a body
    }
)

# The MLflow routes whose view takes its one run from the ``run_id`` (or older ``run_uuid``)
# field -- of the query for a GET, of the JSON body otherwise (``mlflow_compat.run_id_of``)
# -- and touches no other run: a job's own token may call them for its run
# (``mlflow.start_run()`` with ``MLFLOW_RUN_ID``, then log_param, log_metric, set_tag,
# end_run). Named one by one, not by blueprint: a route that takes its target from another
# field (an experiment id, a model id, an artifact path) must not be opened by a ``run_id``
# added to its query.
MLFLOW_RUN_FIELD_ENDPOINTS = frozenset(
    {
        "mlflow.get_run",  # GET runs/get?run_id=
        "mlflow.get_metric_history",  # GET metrics/get-history?run_id=
        "mlflow.update_run",  # POST runs/update: start_run (RUNNING), end_run (FINISHED)
        "mlflow.log_metric",
        "mlflow.log_parameter",
        "mlflow.set_tag",
        "mlflow.log_batch",
        "mlflow.delete_tag",
        "mlflow_models.log_inputs",  # mlflow.log_input: datasets of the run
        "mlflow_models.log_outputs",
        "mlflow_models.log_model",
    }
)


def required_scope(endpoint: str | None, method: str) -> str:
    """The scope a request needs: the table's entry, its blueprint's rule (never for a
    delete), else ``admin`` for a state change and ``log`` for a read (no route is left open
    by forgetting it).
    No endpoint (no such URL or method): ``log``, then 404/405."""
    if endpoint is None:
        return LOG
    if endpoint in ENDPOINT_SCOPES:
        return ENDPOINT_SCOPES[endpoint]
    blueprint, dot, name = endpoint.partition(".")
    deletes = method == "DELETE" or "delete" in name
    if dot and blueprint in BLUEPRINT_SCOPES and not deletes:
        return BLUEPRINT_SCOPES[blueprint]
    return ADMIN if method in MUTATING else LOG


def scope_allows(have: str | None, needed: str) -> bool:
    """Whether a request with scope ``have`` (None: not signed in) may do what ``needed``
    allows: ``admin`` includes ``log``, every scope includes ``public``."""
    return _RANK.get(have or PUBLIC, 0) >= _RANK[needed]


# ---------------------------------------------------------------------- binding


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def weak_token_reason(token: str) -> str | None:
    """Why ``token`` is too weak to guard a non-loopback bind, or None when it is not.

    The rule: at least 32 characters, at least 10 of them different (a rough floor on
    entropy that every random token meets and ``aaaa...`` or ``passwordpassword...`` do
    not). The wrong-token limit slows guessing online; a long random token makes it hopeless.
    """
    if len(token) < MIN_TOKEN_LENGTH:
        return f"it has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}"
    if len(set(token)) < MIN_TOKEN_DISTINCT:
        return f"it has only {len(set(token))} different characters, fewer than " + str(
            MIN_TOKEN_DISTINCT
        )
    return None


def check_bind(host: str, token: str | None, *, no_auth: bool = False) -> None:
    """Refuse a setup that would let anyone reach more than they should.

    Raises:
        InsecureBind: ``no_auth`` with a token, or on a non-loopback ``host``; a
            non-loopback ``host`` without a token, or with a weak one
            (:func:`weak_token_reason`).
    """
    if no_auth:
        if token:
            raise InsecureBind(
                "--no-auth and an access token (--token / TRACKER_TOKEN) exclude each other",
                field="no_auth",
            )
        if not is_loopback(host):
            raise InsecureBind(
                f"refusing --no-auth on {host}: turning authentication off is only allowed "
                "on a loopback address (--host 127.0.0.1)",
                field="no_auth",
            )
        return
    if is_loopback(host):
        return
    if not token:
        raise InsecureBind(
            f"refusing to listen on {host} without an access token: anyone who can reach this "
            "port could read every run and start processes on this machine. Set TRACKER_TOKEN "
            "(or pass --token), or keep the default --host 127.0.0.1.",
            field="host",
        )
    reason = weak_token_reason(token)
    if reason is not None:
        raise InsecureBind(
            f"refusing to listen on {host} with a weak access token ({reason}): a token for "
            f"a non-loopback bind needs at least {MIN_TOKEN_LENGTH} characters, at least "
            f"{MIN_TOKEN_DISTINCT} of them different. Make one with: python -c "
            "'import secrets; print(secrets.token_urlsafe(32))'",
            field="token",
        )


def default_allowed_hosts(bind_host: str) -> list[str]:
    """Loopback names; for a non-loopback bind also this machine's names and addresses."""
    hosts = list(_LOOPBACK_NAMES)
    if is_loopback(bind_host):
        return hosts
    if bind_host not in ("0.0.0.0", "::", ""):
        hosts.append(bind_host)
    hosts += [socket.gethostname(), socket.getfqdn()]
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            hosts += [a.address.split("%")[0] for a in addrs if a.family in _INET]
    except (ImportError, OSError):
        pass  # names above still work; more can be given with --allowed-host
    return sorted({h.lower() for h in hosts if h})


_INET = (socket.AF_INET, socket.AF_INET6)


def _hostname(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def allowed_host(host_header: str, allowed: Iterable[str]) -> bool:
    name = _hostname(host_header)
    return any(a == "*" or a.lower() == name for a in allowed)


# ---------------------------------------------------------------- request guard


def _same_origin(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == request.host.lower()


def _check_origin() -> None:
    origin = request.headers.get("Origin")
    if origin is not None:
        if not _same_origin(origin):
            raise Forbidden(
                f"cross-origin {request.method} refused: Origin {origin[:200]!r} is not this "
                "dashboard's origin",
                field="Origin",
            )
        return
    referer = request.headers.get("Referer")
    if referer and not _same_origin(referer):
        raise Forbidden(
            f"cross-origin {request.method} refused: the Referer is not this dashboard",
            field="Referer",
        )


def _check_json_body() -> None:
    mimetype = request.mimetype
    if mimetype != "application/json" and not mimetype.endswith("+json"):
        raise UnsupportedMediaType(
            f"{request.method} {request.path} needs a JSON body (Content-Type: "
            f"application/json), not {mimetype or 'no Content-Type'}",
            field="Content-Type",
        )
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported; send gzip or no encoding",
            field="Content-Encoding",
        )


def _check_scope() -> Response | None:
    needed = required_scope(request.endpoint, request.method)
    if needed == PUBLIC:
        return None
    have = auth.identity()
    if have is None:
        if request.method == "GET" and not request.path.startswith("/api/"):
            return redirect("/login?next=" + _quote_next(request.full_path))  # type: ignore[return-value]
        raise Unauthorized(
            "this dashboard needs an access token: send 'Authorization: Bearer <token>' "
            "or sign in at /login",
            field="Authorization",
        )
    if not scope_allows(have, needed):
        raise ForbiddenScope(
            f"{request.method} {request.path[:200]} needs a token with the '{needed}' scope; "
            f"this one has '{have}' (create one with: tracker token create --scope {needed})",
            field="Authorization",
        )
    bound = auth.bound_run()
    if bound is not None and _target_run() != bound:
        raise ForbiddenScope(
            f"{request.method} {request.path[:200]}: this is job run {bound}'s own token, "
            f"which reads and writes run {bound} only",
            field="Authorization",
        )
    return None


def _target_run() -> int | None:
    """The run a request names (``/runs/<run_id>/...``, the run of
    ``/checkpoints/<checkpoint_id>``, or the MLflow run field: :func:`_mlflow_run`), or
    None: it names no single run."""
    if request.endpoint in MLFLOW_RUN_FIELD_ENDPOINTS:
        return _mlflow_run()
    args = request.view_args or {}
    if isinstance(args.get("run_id"), int):
        return int(args["run_id"])
    if isinstance(args.get("checkpoint_id"), int):
        from tracker.errors import NotFound
        from tracker.store.run_reads import get_checkpoint
        from tracker.web.plumbing.context import state

        try:
            return get_checkpoint(state().store, int(args["checkpoint_id"])).run_id
        except NotFound:
            return None
    return None


def _mlflow_run() -> int | None:
    """The one run that every ``run_id`` / ``run_uuid`` of the query string and, for a state
    change, of the JSON body (gzip too: ``params.json_body``) names, or None: none named,
    two different ones, one that is not our id (``str(run.id)``), or a body that is not a
    JSON object. Read as the views read them (an empty field is a missing one), so the run
    let through is the run the view writes."""
    sources: list[list[Any]] = [request.args.getlist("run_id") + request.args.getlist("run_uuid")]
    if request.method in MUTATING:
        try:
            body = json_body()
        except (InvalidInput, PayloadTooLarge):
            return None
        sources.append([body.get("run_id"), body.get("run_uuid")])
    named = {parse_id(str(raw).strip()) for given in sources for raw in given if raw}
    return named.pop() if len(named) == 1 else None


def _guard() -> Response | None:
    if not allowed_host(request.host, current_app.config["ALLOWED_HOSTS"]):
        raise Forbidden(
            f"Host {_hostname(request.host)[:100]!r} is not an allowed host of this dashboard; "
            "add it with --allowed-host (TRACKER_ALLOWED_HOSTS)",
            field="Host",
        )
    redirect_to_login = _check_scope()
    if redirect_to_login is not None:
        return redirect_to_login
    if request.method in MUTATING:
        _check_origin()
        raw = request.endpoint in RAW_BODY_ENDPOINTS and request.method in ("PUT", "DELETE")
        if request.endpoint not in FORM_BODY_ENDPOINTS and not raw:
            _check_json_body()
    return None


def _quote_next(path: str) -> str:
    return quote(path.rstrip("?"), safe="/")


def _headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("Referrer-Policy", "same-origin")
    if request.path.startswith("/api/") or request.path == "/login":
        headers.setdefault("Cache-Control", "no-store")
    return response


def install(app: Flask) -> None:
    """Add the guard, the security headers and the login/logout views to ``app``."""
    auth.install(app)
    app.before_request(_guard)
    app.after_request(_headers)
