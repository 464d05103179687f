"""The dashboard's application factory: ``create_app(config)`` builds a Flask app on a store.

Config keys (all optional):

``STORE_URI``        SQL store URL (default: ``TRACKER_URI``, else ``./.tracker/tracker.db``)
``TOKEN``            an access token with the ``admin`` scope (``--token``), besides the
                     tokens stored with ``tracker token create``; never stored
``NO_AUTH``          True turns authentication off (``--no-auth``); only with a loopback
                     ``BIND_HOST`` and no ``TOKEN``. Default False: every page and API
                     call but the health check and sign-in needs a token or a session
``BIND_HOST``        the address the server listens on (picks the default allowed hosts)
``ALLOWED_HOSTS``    Host header names accepted (``"*"`` accepts any); default: loopback
                     names, plus this machine's names and addresses for a non-loopback bind
``CHECKPOINT_ROOTS`` directories checkpoints are downloaded from, and the only ones a
                     checkpoint written over the API may name (default
                     ``./.tracker/checkpoints``, where the client saves them)
``LOG_ROOT``         directory served under ``/api/v1/files/logs/`` (default ``./.tracker/logs``)
                     No root may contain the SQLite store's file or directory
                     (``tracker.web.plumbing.files.check_roots``).
``SECRET_KEY``       signs the session cookie (default: the store's installation secret,
                     random and made once, so every gunicorn worker and restart agrees;
                     never derived from a token)
``SESSION_LIFETIME_S`` how long a sign-in lasts (default 7 days; signing out ends it)
``RUN_STALE_S``      mark a ``running`` run without heartbeats this long ``crashed`` (ended at
                     its last heartbeat), by the periodic loop of each server process
                     (:mod:`tracker.periodic`). Default ``None``: off for a bare
                     ``create_app``; ``tracker ui`` turns it on (``--run-stale-seconds``,
                     default 20 s)
``CRASH_SWEEP_S``    seconds between the crash watch's passes (default 5)
``LIVE_DOCTOR_S``    seconds between the live doctor's passes over running runs whose points
                     moved (diagnoses while a run logs, e.g. over HTTP). Default ``None``: off
                     for a bare ``create_app``; ``tracker ui`` runs it every 5 s, and with
                     it the summaries of newly stored profiles (``profile summaries``)
``SWEEPS_S``         seconds between the sweep controller's passes (sweeps that learn:
                     ``tracker.store.sweeps.control_once``). Default ``None``: off for a bare
                     ``create_app``; ``tracker ui`` runs it every 2 s
``SEAL_S``           seconds between passes that pack the points of runs that ended over a
                     minute ago into chunks (``tracker.periodic.seal_series_once``).
                     Default ``None``: off for a bare ``create_app``; ``tracker ui`` runs it
                     every 10 s
``MLFLOW_IDLE_S``    mark a ``running`` run created through the MLflow API (no heartbeats)
                     with no writes this long ``crashed`` (failure class ``idle``; a later
                     write sets it running again), by the periodic loop. Default ``None``:
                     off; ``tracker ui`` turns it on (``--mlflow-idle-timeout``, 30 min)
``ARTIFACT_ROOT``    where artifact bytes live: a directory or ``s3://bucket/prefix``
                     (``--artifact-root``; default ``TRACKER_ARTIFACT_ROOT``, else ``artifacts/``
                     beside the SQLite file; a PostgreSQL store needs one for artifacts). A
                     root holding the SQLite file is refused
``MAX_ARTIFACT_BYTES`` the largest artifact one PUT may upload (default 5 GiB; 413 beyond)
``MAX_RUN_ARTIFACT_BYTES`` the most artifact bytes one run may hold (default None: no quota;
                     an upload past what the run has left is a 413, nothing stored)
``MAX_TOKEN_ARTIFACT_BYTES`` the most artifact bytes the uploads of one stored token may hold
                     over every run (default None: no quota; the configured token is not
                     counted)
``MAX_CONTENT_LENGTH`` / ``MAX_INFLATED_BYTES``  request size limits (as sent / inflated;
                     8 MiB each; a larger body is a 413 envelope)

Nothing is module-global: each app owns its Store, its caches and its roots.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask

from tracker import periodic
from tracker.errors import InvalidInput
from tracker.rules.liveness import SWEEP_S
from tracker.store import Store, artifacts, tokens
from tracker.web.core.ingest import MetricIngest
from tracker.web.core.mlflow_idle import IdleRuns
from tracker.web.plumbing import assets, files, security
from tracker.web.plumbing.context import AppState
from tracker.web.plumbing.errors import TrackerJSONProvider, register_error_handlers
from tracker.web.plumbing.params import IdConverter

__all__ = ["DEFAULTS", "create_app"]

DEFAULTS: dict[str, Any] = {
    "STORE_URI": None,
    "TOKEN": None,
    "NO_AUTH": False,
    "BIND_HOST": "127.0.0.1",
    "ALLOWED_HOSTS": None,
    "CHECKPOINT_ROOTS": None,
    "LOG_ROOT": None,
    "SECRET_KEY": None,
    "ARTIFACT_ROOT": None,
    "MAX_ARTIFACT_BYTES": 5 * 1024**3,
    "MAX_RUN_ARTIFACT_BYTES": None,
    "MAX_TOKEN_ARTIFACT_BYTES": None,
    # A JSON body costs ~20x its size in Python objects while parsed; the HTTP sink sends
    # metric batches of at most 20,000 points (< 6 MiB even with 250-character keys).
    "MAX_CONTENT_LENGTH": 8 * 1024 * 1024,
    "MAX_INFLATED_BYTES": 8 * 1024 * 1024,
    "SESSION_COOKIE_NAME": "tracker_session",
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "SESSION_COOKIE_SECURE": False,  # True when served over HTTPS (--secure-cookie)
    "LOGIN_MAX_FAILURES": 10,  # wrong tokens per client address within LOGIN_WINDOW_S
    "LOGIN_WINDOW_S": 300.0,
    "SESSION_LIFETIME_S": 7 * 86_400.0,
    "RUN_STALE_S": None,  # the crash watch: off unless set (``tracker ui`` sets it)
    "CRASH_SWEEP_S": SWEEP_S,
    "LIVE_DOCTOR_S": None,  # the live doctor: off unless set (``tracker ui`` sets it)
    "SWEEPS_S": None,  # the sweep controller: off unless set (``tracker ui`` sets it)
    "SEAL_S": None,  # ended runs' points packed into chunks: off unless set (``tracker ui``)
    # Reverse proxies whose X-Forwarded-* headers are trusted (``tracker ui --proxy-hops``);
    # 0: ignored, so the client address (login limit) and scheme cannot be faked.
    "PROXY_HOPS": 0,
    "MLFLOW_IDLE_S": None,  # silent MLflow runs: off unless set (``tracker ui`` sets it)
}


def _paths(value: Any, default: Path) -> list[Path]:
    if value is None:
        return [default]
    if isinstance(value, str | os.PathLike):
        value = [value]
    return [Path(v).resolve() for v in value]


def file_roots(config: Mapping[str, Any]) -> dict[str, list[Path]]:
    """The directories files are served from, by kind, as ``create_app`` uses them."""
    home = Path.cwd() / ".tracker"
    return {
        "checkpoints": _paths(config.get("CHECKPOINT_ROOTS"), home / "checkpoints"),
        "logs": _paths(config.get("LOG_ROOT"), home / "logs"),
    }


def check_store_roots(config: Mapping[str, Any]) -> None:
    """Refuse a file root or artifact root that contains the SQLite store (``tracker ui``
    calls it before binding its port; ``create_app`` again).

    Raises:
        InvalidInput: naming the root and the database file.
    """
    store = Store(config.get("STORE_URI"), artifact_root=config.get("ARTIFACT_ROOT"))
    try:
        files.check_roots(file_roots(config), store.database_file())
        if store.database_file() is not None:
            artifacts.artifact_root(store)  # refuses a root that holds the database
    finally:
        store.close()


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the dashboard app.

    Raises:
        InvalidInput: ``STORE_URI`` is not a SQL URL.
        StoreUnderRoot: a file root contains the SQLite store.
        InvalidInput: the artifact root contains the SQLite store.
        InsecureBind: ``NO_AUTH`` with a ``TOKEN`` or a non-loopback ``BIND_HOST``.
        StoreUnavailable / SchemaError: the store cannot be opened or migrated.
    """
    app = Flask(__name__)
    app.config.update(DEFAULTS)
    app.config.update(config or {})
    cfg = app.config
    cfg["TOKEN"] = cfg["TOKEN"] or None
    cfg["NO_AUTH"] = bool(cfg["NO_AUTH"])
    if cfg["NO_AUTH"]:
        security.check_bind(cfg["BIND_HOST"], cfg["TOKEN"], no_auth=True)
    if cfg["ALLOWED_HOSTS"] is None:
        cfg["ALLOWED_HOSTS"] = security.default_allowed_hosts(cfg["BIND_HOST"])
    app.url_map.merge_slashes = False  # '//etc/passwd' must reach the file guard, not redirect
    app.url_map.converters["int"] = IdConverter  # ids past the store's range: 404, not 500
    app.json = TrackerJSONProvider(app)
    hops = int(cfg["PROXY_HOPS"] or 0)
    if hops:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops, x_prefix=hops
        )

    roots = file_roots(cfg)
    store = Store(cfg["STORE_URI"], artifact_root=cfg["ARTIFACT_ROOT"])
    try:
        files.check_roots(roots, store.database_file())
        if store.database_file() is not None:
            artifacts.artifact_root(store)  # refuses a root that holds the database
    except InvalidInput:
        store.close()
        raise
    if not cfg["SECRET_KEY"]:
        cfg["SECRET_KEY"] = tokens.installation_secret(store)
    app.extensions["tracker"] = AppState(
        store=store,
        ingest=MetricIngest(store),
        checkpoint_roots=roots["checkpoints"],
        file_roots=roots,
    )
    register_error_handlers(app)
    security.install(app)
    assets.install(app)  # hashed URLs, immutable cache, gzip for web/static
    idle = IdleRuns(store, idle_s=cfg["MLFLOW_IDLE_S"]) if cfg["MLFLOW_IDLE_S"] else None
    if idle is not None:
        app.extensions["tracker_mlflow_idle"] = idle
    _start_loop(app, store, "tracker_periodic", _periodic_tasks(store, cfg, idle))
    if cfg["SEAL_S"]:
        # its own thread: a seal batch waiting for SQLite's write lock never delays the
        # crash watch (a shared loop runs its tasks one after another)
        _start_loop(app, store, "tracker_sealing", [periodic.seal_series(store, cfg["SEAL_S"])])
    from tracker.web.views import annotations as annotation_views
    from tracker.web.views import artifacts as artifact_views
    from tracker.web.views import (
        mlflow,
        mlflow_artifacts,
        mlflow_lifecycle,
        mlflow_models,
        pages,
        profiles,
        queue,
        runs,
        runs_csv,
        snapshots,
        sweeps,
        workspace,
    )

    app.register_blueprint(runs.bp)
    app.register_blueprint(runs_csv.bp)
    app.register_blueprint(annotation_views.bp)
    app.register_blueprint(profiles.bp)
    app.register_blueprint(artifact_views.bp)
    app.register_blueprint(queue.bp)
    app.register_blueprint(snapshots.bp)
    app.register_blueprint(sweeps.bp)
    app.register_blueprint(workspace.bp)
    app.register_blueprint(mlflow.bp)
    app.register_blueprint(mlflow_lifecycle.bp)
    app.register_blueprint(mlflow_models.bp)
    app.register_blueprint(mlflow_artifacts.bp)
    app.register_blueprint(mlflow_artifacts.info_bp)
    app.register_blueprint(pages.bp)
    return app


def _start_loop(app: Flask, store: Store, name: str, tasks: list[periodic.Task]) -> None:
    """A thread running ``tasks`` (none: no thread), as ``app.extensions[name]``; started
    again after a fork (gunicorn --preload), stopped with the store (no pass on it closed)."""
    if not tasks:
        return
    loop = periodic.PeriodicLoop(tasks, name=name.replace("_", "-"))
    loop.ensure_running()
    app.before_request(loop.ensure_running)
    app.extensions[name] = loop
    store.on_close(lambda: loop.stop(wait=False))


def _periodic_tasks(
    store: Store, cfg: Mapping[str, Any], idle: IdleRuns | None
) -> list[periodic.Task]:
    """The dashboard's periodic tasks (:mod:`tracker.periodic`), as its config asks."""
    every = cfg["CRASH_SWEEP_S"]
    for key in ("RUN_STALE_S", "CRASH_SWEEP_S", "LIVE_DOCTOR_S", "SWEEPS_S", "SEAL_S"):
        value = cfg[key]
        off = not value and key != "CRASH_SWEEP_S"
        if not off and (
            isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
        ):
            raise ValueError(f"{key} ({value!r}) must be seconds > 0")
    tasks = []
    if cfg["RUN_STALE_S"]:
        tasks.append(periodic.crash_silent_runs(store, cfg["RUN_STALE_S"], every))
    if idle is not None:
        tasks.append(periodic.Task("mlflow idle", every, idle.sweep_once))
    if cfg["LIVE_DOCTOR_S"]:  # the doctor's family: profiles summarised ahead of readers too
        tasks.append(periodic.live_doctor(store, cfg["LIVE_DOCTOR_S"]))
        tasks.append(periodic.profile_summaries(store))  # none pending: one small read
    if cfg["SWEEPS_S"]:  # no sweep running: one small read
        tasks.append(periodic.sweep_controller(store, cfg["SWEEPS_S"]))
    return tasks
