"""``tracker ui`` (the dashboard) and ``tracker up`` (dashboard + one worker, optional demo).

The dashboard binds 127.0.0.1 by default, and loopback is no boundary on a shared machine,
so it always asks for a token, like Jupyter: with none configured, it creates an ``admin``
token in the store for this server, prints a sign-in link that carries it, and revokes it
when the server stops. ``--no-auth`` turns authentication off (loopback only, with a
warning). Any other address needs a strong configured token (``--token`` /
``TRACKER_TOKEN``: at least 32 characters, 10 different): without one it refuses to start;
a weak one is accepted on loopback with a warning. A configured token is never printed.
It is served by gunicorn (``--workers N``, threads per worker); Flask's development server
only with ``--dev``.

Start-up order (``ui`` and ``up``): the port is checked first (:func:`check_port`: a port in
use fails at once with "port N is in use: use --port", before anything is stored, queued or
started); the banner and sign-in link are printed only once the server listens (gunicorn's
``when_ready``, or after the development server has bound). ``up`` starts its worker at that
moment too. ``up --demo`` queues the demo sweep once per store: when the store already has
the demo's runs (project ``digits``, tag ``demo``) it says so and queues nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.common import Duration, say_store, uri_option
from tracker.errors import InvalidInput
from tracker.rules.liveness import LIVE_DOCTOR_S, RUN_STALE_S, SEAL_S, SWEEPS_S
from tracker.rules.units import parse_size

if TYPE_CHECKING:
    from tracker.store import Store

DEMO_GRID = {"lr": [3e-3, 1e-3], "model.width": [16, 32]}
DEMO_CONFIG = {"epochs": 8}
DEMO_PROJECT = "digits"
DEMO_TAG = "demo"
DEMO_RETRIES = 1  # a demo job stopped by Ctrl-C of `up` is requeued, not failed


def _split_hosts(values: Sequence[str]) -> list[str]:
    return [h.strip() for v in values for h in v.split(",") if h.strip()]


def server_options(f: Any) -> Any:
    decorators = [
        uri_option,
        click.option("--host", default="127.0.0.1", show_default=True,
                     help="Address to listen on. Anything but loopback needs a token."),
        click.option("--port", type=click.IntRange(0, 65535), default=5000, show_default=True,
                     help="Port to listen on."),
        click.option("--token", envvar="TRACKER_TOKEN", default=None, show_envvar=True,
                     help="An admin access token (default: TRACKER_TOKEN; never printed). "
                     "Without one, an admin token is made for this server and a sign-in "
                     "link printed. A non-loopback --host needs one of 32+ characters."),
        click.option("--no-auth", is_flag=True,
                     help="Turn authentication off: anyone who can reach the port may do "
                     "anything, launch included. Loopback only; a single-user machine only."),
        click.option("--workers", type=click.IntRange(0, 64), default=1, show_default=True,
                     help="gunicorn worker processes (0: Flask's development server, "
                     "only with --dev)."),
        click.option("--threads", type=click.IntRange(1, 256), default=8, show_default=True,
                     help="Threads per gunicorn worker."),
        click.option("--dev", is_flag=True,
                     help="Use Flask's development server (one process; not for production)."),
        click.option("--allowed-host", "allowed_hosts", multiple=True,
                     envvar="TRACKER_ALLOWED_HOSTS",
                     help="Host header value to accept (repeat or comma-separate; '*' for any). "
                     "Default: loopback names, plus this machine's names for a public bind."),
        click.option("--checkpoint-root", "checkpoint_roots", multiple=True,
                     type=click.Path(file_okay=False),
                     help="Directory checkpoints may be downloaded from, and the only one "
                     "a checkpoint logged over HTTP may name (repeatable; default "
                     "./.tracker/checkpoints). Must not contain the store."),
        click.option("--log-root", type=click.Path(file_okay=False), default=None,
                     help="Directory served as log files (default ./.tracker/logs)."),
        click.option("--artifact-root", envvar="TRACKER_ARTIFACT_ROOT", default=None,
                     help="Where artifact bytes live: a directory or s3://bucket/prefix "
                     "(default: TRACKER_ARTIFACT_ROOT, else artifacts/ beside the SQLite file; "
                     "PostgreSQL needs one). Must not contain the store."),
        click.option("--max-artifact-bytes", default="5GiB", show_default=True,
                     help="The largest artifact one upload may send (413 beyond)."),
        click.option("--max-run-artifact-bytes", default=None,
                     help="A quota: the most artifact bytes one run may hold, e.g. 20GiB "
                     "(default: none); an upload past what the run has left is refused (413)."),
        click.option("--max-token-artifact-bytes", default=None,
                     help="A quota: the most artifact bytes the uploads of one stored token "
                     "(tracker token create) may hold over every run, e.g. 100GiB (default: "
                     "none); an upload past what the token has left is refused (413)."),
        click.option("--secure-cookie", is_flag=True, envvar="TRACKER_SECURE_COOKIE",
                     show_envvar=True,
                     help="Mark the sign-in cookie Secure (HTTPS only): set it when users "
                     "reach the dashboard over HTTPS, e.g. behind a TLS proxy."),
        click.option("--run-stale-seconds", type=click.FloatRange(1, 10**6),
                     default=RUN_STALE_S, show_default=True,
                     help="Mark a running run without heartbeats this long crashed, ended at "
                     "its last heartbeat (checked every 5 s by each server process; clients "
                     "send a heartbeat every 5 s)."),
        click.option("--proxy-hops", type=click.IntRange(0, 5), default=0, show_default=True,
                     envvar="TRACKER_PROXY_HOPS", show_envvar=True,
                     help="Reverse proxies in front of the dashboard whose X-Forwarded-For, "
                     "-Proto, -Host, -Port and -Prefix headers are trusted (each proxy must "
                     "overwrite, not pass on, what the client sent). 0: those headers are "
                     "ignored, so a client cannot fake its address."),
        click.option("--mlflow-idle-timeout", "mlflow_idle_s", type=Duration(allow_zero=True),
                     default="30m", show_default=True,
                     help="Mark a running run created through the MLflow API (which sends no "
                     "heartbeats) with no writes this long crashed, failure class 'idle' (its "
                     "next write sets it running again); 0 turns this off."),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def app_config(
    uri: str | None,
    host: str,
    token: str | None,
    allowed_hosts: Sequence[str],
    checkpoint_roots: Sequence[str],
    log_root: str | None,
    secure_cookie: bool = False,
    no_auth: bool = False,
    run_stale_s: float | None = RUN_STALE_S,
    artifact_root: str | None = None,
    max_artifact_bytes: str = "5GiB",
    max_run_artifact_bytes: str | None = None,
    max_token_artifact_bytes: str | None = None,
    proxy_hops: int = 0,
    mlflow_idle_s: float | None = None,
) -> dict[str, Any]:
    """The ``create_app`` config for these options (refuses an unsafe bind).

    Raises:
        InsecureBind: a non-loopback host without a strong token; ``--no-auth`` with a
            token or on a non-loopback host.
    """
    from tracker.web.plumbing.security import check_bind

    check_bind(host, token, no_auth=no_auth)
    return {
        "STORE_URI": uri,
        "TOKEN": token or None,
        "NO_AUTH": no_auth,
        "BIND_HOST": host,
        "ALLOWED_HOSTS": _split_hosts(allowed_hosts) or None,
        "CHECKPOINT_ROOTS": list(checkpoint_roots) or None,
        "LOG_ROOT": log_root,
        "SESSION_COOKIE_SECURE": secure_cookie,
        "RUN_STALE_S": run_stale_s,
        "LIVE_DOCTOR_S": LIVE_DOCTOR_S,
        "SWEEPS_S": SWEEPS_S,
        "SEAL_S": SEAL_S,
        "ARTIFACT_ROOT": artifact_root,
        "MAX_ARTIFACT_BYTES": parse_size(max_artifact_bytes, field="max_artifact_bytes"),
        "MAX_RUN_ARTIFACT_BYTES": (
            parse_size(max_run_artifact_bytes, field="max_run_artifact_bytes")
            if max_run_artifact_bytes
            else None
        ),
        "MAX_TOKEN_ARTIFACT_BYTES": (
            parse_size(max_token_artifact_bytes, field="max_token_artifact_bytes")
            if max_token_artifact_bytes
            else None
        ),
        "PROXY_HOPS": proxy_hops,
        "MLFLOW_IDLE_S": mlflow_idle_s or None,
    }


def check_artifact_root(config: dict[str, Any]) -> None:
    """Refuse, before the port is bound or a link printed, a checkpoint, log or artifact
    root that contains the SQLite database (``create_app`` refuses it too, but inside
    gunicorn's workers that is a crash loop after the sign-in link was shown).

    Raises:
        InvalidInput: naming the root and the database file.
    """
    from tracker.web.app import check_store_roots

    check_store_roots(config)


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


NO_AUTH_WARNING = """\
WARNING: --no-auth: authentication is OFF. Every user and every process on this machine
that can reach {url} can read every run, launch any command as you, cancel and delete.
Use it only on a single-user machine.
"""


def check_workers(workers: int, dev: bool) -> None:
    """Raises click.UsageError for ``--workers 0`` without ``--dev``."""
    if not dev and workers < 1:
        raise click.UsageError(
            "--workers 0 means Flask's development server: add --dev to confirm "
            "(use --workers N for gunicorn in production)"
        )


def check_port(host: str, port: int) -> None:
    """Fail fast unless ``host:port`` can be listened on (as the server will: SO_REUSEADDR).

    Port 0 (any free port) is not checked.

    Raises:
        click.ClickException: "port N is in use: use --port" (with a free port to try), or
            the reason the address cannot be bound (no such address, permission).
    """
    if port == 0:
        return
    problem = _bind_problem(host, port)
    if problem is None:
        return
    if problem.errno == errno.EADDRINUSE:
        free = next((p for p in range(port + 1, min(port + 50, 65536))
                     if _bind_problem(host, p) is None), None)  # fmt: skip
        hint = f" (e.g. --port {free})" if free is not None else ""
        raise click.ClickException(f"port {port} is in use on {host}: use --port{hint}")
    raise click.ClickException(f"cannot listen on {host}:{port}: {problem.strerror or problem}")


def _bind_problem(host: str, port: int) -> OSError | None:
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)  # fmt: skip
    except socket.gaierror as exc:
        return OSError(errno.EADDRNOTAVAIL, f"unknown address {host!r} ({exc.strerror})")
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


@contextlib.contextmanager
def access(
    config: dict[str, Any], host: str, port: int, banner: str
) -> Iterator[Callable[[], None]]:
    """Yield ``announce()``, which prints where the dashboard is and how to sign in; call it
    once the server listens.

    With no token configured (and auth on), an ``admin`` token named ``ui-<time>`` is
    created in the store for this server; the printed sign-in link carries it, and it is
    revoked when the block ends (a server killed with SIGKILL leaves it: ``tracker token
    revoke``).

    Raises:
        StoreUnavailable: the store cannot be reached to create the token.
    """
    from tracker.web.plumbing.security import weak_token_reason

    url = _url(host, port)
    lines: list[str] = []
    if config["NO_AUTH"]:
        lines += [NO_AUTH_WARNING.format(url=url), f"{banner}: {url} (no authentication)"]
        yield lambda: _echo_lines(lines)
        return
    if config["TOKEN"]:
        reason = weak_token_reason(config["TOKEN"])
        if reason is not None:
            click.echo(f"warning: the access token is weak ({reason}); it would be refused "
                       "on a non-loopback --host", err=True)  # fmt: skip
        lines.append(f"{banner}: {url} (sign in with the access token)")
        yield lambda: _echo_lines(lines)
        return
    from tracker.store import Store
    from tracker.store.tokens import create_token, revoke_token

    store = Store(config["STORE_URI"])
    info, secret = create_token(store, "admin", f"ui-{dt.datetime.now():%Y-%m-%dT%H:%M:%S}")
    lines += [
        f"{banner}: {url}",
        f"sign in with this link (admin token {info.id}, revoked when this server stops):",
        f"{url}login?token={secret}",
    ]
    try:
        yield lambda: _echo_lines(lines)
    finally:
        _revoke_at_exit(store, info.id, revoke_token)


@contextlib.contextmanager
def listed(uri: str, host: str, port: int) -> Iterator[Callable[[], None]]:
    """Yield ``register()``; call it once the server listens. It records this server as the
    dashboard of store ``uri`` (:mod:`tracker.servers`: ``server.json`` next to a SQLite
    store and this user's registry), so ``tracker.init`` prints a run's page and store
    discovery finds the store; the records go when the block ends (in this process only,
    not in a forked gunicorn worker). With ``--port 0`` nothing is recorded (the port is not
    known here). A record that cannot be written is a warning: the server still starts.
    """
    from tracker import servers

    undo: list[Callable[[], None]] = []

    def register() -> None:
        if port == 0:
            return
        try:
            undo.append(servers.register(uri, _url(host, port)))
        except OSError as exc:
            click.echo(f"warning: could not record this dashboard for tracker.init: {exc}",
                       err=True)  # fmt: skip

    try:
        yield register
    finally:
        for remove in undo:
            remove()


def _echo_lines(lines: Sequence[str]) -> None:
    for line in lines:
        click.echo(line, err=True)


def _revoke_at_exit(store: Store, token_id: int, revoke: Any) -> None:
    from tracker.errors import StoreUnavailable

    try:
        revoke(store, token_id)
    except StoreUnavailable as exc:
        click.echo(f"warning: could not revoke token {token_id} ({exc.message}); revoke it "
                   f"with: tracker token revoke {token_id}", err=True)  # fmt: skip
    finally:
        store.close()


def serve(config: dict[str, Any], host: str, port: int, workers: int, threads: int,
          dev: bool, on_ready: Callable[[], None] = lambda: None) -> None:  # fmt: skip
    """Run the dashboard in the foreground until interrupted; ``on_ready()`` runs once the
    server listens (before it handles a request).

    Raises:
        click.UsageError: ``--workers 0`` without ``--dev``.
    """
    from tracker.store import Store

    check_workers(workers, dev)
    Store(config["STORE_URI"]).close()  # migrate once, here, before any worker starts
    if dev:
        from werkzeug.serving import make_server

        from tracker.web.app import create_app

        server = make_server(host, port, create_app(config), threaded=True)
        _stop_on_signals(server)
        try:
            on_ready()
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how it stops (as under gunicorn): no "Aborted!", exit status 0
        finally:
            server.server_close()
        return
    _gunicorn(config, host, port, workers, threads, on_ready)


def _stop_on_signals(server: Any) -> None:
    """Ctrl-C and SIGTERM end ``serve_forever`` through its own stop flag, read every poll:
    no KeyboardInterrupt, which could land inside a lock's ``with`` (threading's own, the
    server's) and leave it taken for the shutdown that follows to wait on for ever. Setting
    an attribute takes no lock."""
    if threading.current_thread() is not threading.main_thread():
        return
    if not hasattr(server, "_BaseServer__shutdown_request"):  # another server: Ctrl-C as is
        return

    def stop(signum: int, frame: Any) -> None:
        server._BaseServer__shutdown_request = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)


KEEPALIVE_S = 75


def _gunicorn(config: dict[str, Any], host: str, port: int, workers: int, threads: int,
              on_ready: Callable[[], None]) -> None:  # fmt: skip
    from gunicorn.app.base import BaseApplication

    from tracker.cli.dashboard_worker import DashboardWorker

    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    class Dashboard(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            settings = {
                "bind": bind,
                "workers": workers,
                "worker_class": DashboardWorker,  # gthread whose Ctrl-C is never a SIGKILL
                "threads": threads,
                "timeout": 120,
                "graceful_timeout": 10,
                # An idle keep-alive connection is closed after this long. gunicorn's 2 s
                # reset a client that sent its next request just as the server closed (one
                # in ~50 requests of a client pausing ~2 s; an MLflow script's call failed
                # so); past the 60 s idle timeout of common load balancers.
                "keepalive": KEEPALIVE_S,
                "errorlog": "-",
                "loglevel": "warning",
                "proc_name": "tracker-ui",
                "when_ready": lambda _arbiter: on_ready(),  # after bind, before workers
            }
            for key, value in settings.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            from tracker.web.app import create_app

            return create_app(config)

    Dashboard().run()


@click.command()
@server_options
def ui(uri: str | None, host: str, port: int, token: str | None, no_auth: bool, workers: int,
       threads: int, dev: bool, allowed_hosts: tuple[str, ...],
       checkpoint_roots: tuple[str, ...], log_root: str | None,
       secure_cookie: bool, run_stale_seconds: float, mlflow_idle_s: float,
       proxy_hops: int, artifact_root: str | None, max_artifact_bytes: str,
       max_run_artifact_bytes: str | None,
       max_token_artifact_bytes: str | None) -> None:  # fmt: skip
    """Serve the dashboard and its JSON API (http://127.0.0.1:5000 by default).

    A port in use is an error at once (pick another with --port).
    """
    from tracker.discovery import locate

    resolved = locate(uri, live_servers=False).uri  # a server never adopts another's store
    config = app_config(resolved, host, token, allowed_hosts, checkpoint_roots, log_root,
                        secure_cookie, no_auth, run_stale_seconds,
                        proxy_hops=proxy_hops, mlflow_idle_s=mlflow_idle_s,
                        artifact_root=artifact_root,
                        max_artifact_bytes=max_artifact_bytes,
                        max_run_artifact_bytes=max_run_artifact_bytes,
                        max_token_artifact_bytes=max_token_artifact_bytes)  # fmt: skip
    check_workers(workers, dev)
    check_port(host, port)
    check_artifact_root(config)  # opens the store: after the port check
    say_store(resolved)
    with (
        access(config, host, port, "tracker dashboard") as announce,
        listed(resolved, host, port) as register,
    ):

        def ready() -> None:
            register()
            announce()

        serve(config, host, port, workers, threads, dev, on_ready=ready)


# ----------------------------------------------------------------------- up


def demo_script() -> Path:
    """The demo's training script: ``tracker/demo/train_digits.py`` of the installed package.

    In a source checkout that file links to ``examples/train_digits.py`` and the link is
    resolved, so the queued jobs show the example's path; a wheel ships a copy.
    Raises InvalidInput when the file is missing (a damaged install).
    """
    script = Path(__file__).resolve().parents[1] / "demo" / "train_digits.py"
    if not script.is_file():
        raise InvalidInput(
            f"the demo needs {script}, which is missing: reinstall tracker", field="demo"
        )
    return script.resolve()


def enqueue_demo(store: Store, script: Path) -> list[int]:
    """Queue a small sweep of the example, the same way the dashboard's clone does.

    Each job may be retried once (``--retries 1``): a demo job stopped by Ctrl-C of ``up``
    (killed_by_signal) is queued again and resumes at the next ``up``, instead of failing.
    """
    from tracker.entities import JobSpec
    from tracker.store.clone import clone_specs
    from tracker.store.queue import enqueue_many

    template = JobSpec(
        argv=[sys.executable, str(script)], project=DEMO_PROJECT, cwd=str(Path.cwd()),
        config=dict(DEMO_CONFIG), tags=(DEMO_TAG,), max_retries=DEMO_RETRIES,
    )  # fmt: skip
    return [job.id for job in enqueue_many(store, clone_specs(template, grid=DEMO_GRID))]


def demo_runs(store: Store) -> int:
    """How many runs of the demo (project ``digits``, tag ``demo``) the store has."""
    from tracker.store.run_search import RunSearch, search_runs

    spec = RunSearch(project=DEMO_PROJECT, tags=(DEMO_TAG,), limit=1)
    return search_runs(store, spec).total


def ensure_demo(store: Store, script: Path) -> list[int]:
    """Queue the demo sweep unless this store already has it; the new job ids (empty when
    it was there already: ``up --demo`` twice queues it once)."""
    if demo_runs(store):
        return []
    return enqueue_demo(store, script)


def _start_worker(uri: str, artifact_root: str | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TRACKER_URI=uri)
    if artifact_root:  # the jobs' artifacts go where the dashboard reads them
        env["TRACKER_ARTIFACT_ROOT"] = artifact_root
    argv = [sys.executable, "-c", "from tracker.cli import main; main()", "worker",
            "--max-jobs", "2"]  # fmt: skip
    # Started with SIGINT ignored (which it keeps): a Ctrl-C reaches the whole process group,
    # and the worker must hear it once, from _stop, not also from the terminal; that would
    # be its second signal, which kills its jobs at once. It stays in this process group,
    # so whoever kills the group kills it too. (An ignored signal stays ignored across exec;
    # no preexec_fn, which would run gunicorn's fork hooks. This process ignores SIGINT for
    # the few milliseconds of the spawn.)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.Popen(argv, env=env)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the embedded worker as ``tracker worker`` documents: one SIGTERM, and it stops
    claiming, sends SIGTERM to its jobs and records how they end (retried by their policy;
    it SIGKILLs a job still running after its grace period). A Ctrl-C while waiting is
    passed on as its second signal, which kills its jobs at once. Killed after 30 s."""
    if proc.poll() is not None:
        return
    signal.signal(signal.SIGINT, lambda *_: proc.send_signal(signal.SIGTERM))
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@click.command()
@server_options
@click.option("--demo", is_flag=True,
              help="Queue a small sweep of examples/train_digits.py (once per store).")  # fmt: skip
def up(uri: str | None, host: str, port: int, token: str | None, no_auth: bool, workers: int,
       threads: int, dev: bool, allowed_hosts: tuple[str, ...],
       checkpoint_roots: tuple[str, ...], log_root: str | None, secure_cookie: bool,
       run_stale_seconds: float, mlflow_idle_s: float, proxy_hops: int,
       artifact_root: str | None, max_artifact_bytes: str, max_run_artifact_bytes: str | None,
       max_token_artifact_bytes: str | None, demo: bool) -> None:  # fmt: skip
    """Start the dashboard and one worker on the store (default: ./.tracker/tracker.db).

    With --demo, queue a small sweep of the example training script first (once per
    store: run again, it is not queued twice), so live runs appear within seconds; open the
    printed sign-in link. A port in use stops it before anything is queued or started (pick
    another with --port). Ctrl-C stops both.
    """
    from tracker.discovery import locate
    from tracker.store import Store

    resolved = locate(uri, live_servers=False).uri  # a server never adopts another's store
    config = app_config(resolved, host, token, allowed_hosts, checkpoint_roots, log_root,
                        secure_cookie, no_auth, run_stale_seconds,
                        proxy_hops=proxy_hops, mlflow_idle_s=mlflow_idle_s,
                        artifact_root=artifact_root,
                        max_artifact_bytes=max_artifact_bytes,
                        max_run_artifact_bytes=max_run_artifact_bytes,
                        max_token_artifact_bytes=max_token_artifact_bytes)  # fmt: skip
    check_workers(workers, dev)
    check_port(host, port)  # before anything is stored, queued or started
    check_artifact_root(config)
    script = demo_script() if demo else None
    say_store(resolved)
    store = Store(resolved)
    try:
        if script is not None:
            ids = ensure_demo(store, script)
            if ids:
                click.echo(f"queued {len(ids)} demo jobs (project '{DEMO_PROJECT}')", err=True)
            else:
                click.echo(f"the demo is already in this store (project '{DEMO_PROJECT}', tag "
                           f"'{DEMO_TAG}'): not queued again", err=True)  # fmt: skip
    finally:
        store.close()
    started: list[subprocess.Popen[bytes]] = []
    try:
        with (
            access(config, host, port, "tracker is up (Ctrl-C stops it)") as announce,
            listed(resolved, host, port) as register,
        ):

            def ready() -> None:
                started.append(_start_worker(resolved, artifact_root))
                register()
                announce()

            serve(config, host, port, workers, threads, dev, on_ready=ready)
    finally:
        for worker in started:
            _stop(worker)
