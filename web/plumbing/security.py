"""The dashboard's guards: it can start processes, so every request is checked.

* bind: loopback by default; any other address needs an access token (``check_bind``).
* Host header: must be an allowed host on every request (DNS-rebinding defence) -> 403.
* token: with a token configured every page and API call needs it, as
  ``Authorization: Bearer <token>`` or the session cookie set by the login form; compared
  in constant time (``hmac.compare_digest``); never logged or echoed -> 401. Wrong tokens
  are counted per client address (``login_limit``): too many -> 429 for a while.
* state changes (POST/PUT/PATCH/DELETE): an Origin or Referer header, when sent, must be
  this dashboard's own origin -> 403; the body must be JSON (gzip allowed) -> 415. A
  cross-site page cannot send a JSON body without a CORS preflight, which is never granted.
  Requests with neither Origin nor Referer come from programs (the HTTP sink, curl), not
  browsers, and are let through to the token check.
* responses: ``X-Content-Type-Options``, ``X-Frame-Options``, a Content-Security-Policy that
  allows scripts from this origin only.
* files: served only from inside configured roots that never hold the store
  (``tracker.web.plumbing.files``).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, current_app, redirect, request, session
from flask import render_template_string as render

from tracker.errors import InvalidInput
from tracker.web.plumbing.errors import (
    Forbidden,
    TooManyAttempts,
    Unauthorized,
    UnsupportedMediaType,
)
from tracker.web.plumbing.login_limit import FailureLimit

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "InsecureBind",
    "allowed_host",
    "check_bind",
    "default_allowed_hosts",
    "form_ok",
    "install",
    "is_loopback",
    "public",
    "token_matches",
]

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

F = TypeVar("F", bound=Callable[..., Any])


class InsecureBind(InvalidInput):
    code = "insecure_bind"


def public(view: F) -> F:
    """Mark a view as reachable without the token (login page, health check)."""
    view.tracker_public = True  # type: ignore[attr-defined]
    return view


def form_ok(view: F) -> F:
    """Mark a view that accepts an HTML form body (it checks its own CSRF token)."""
    view.tracker_form_ok = True  # type: ignore[attr-defined]
    return view


# ---------------------------------------------------------------------- binding


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without an access token.

    Raises:
        InsecureBind: ``host`` is not a loopback address and ``token`` is empty.
    """
    if is_loopback(host) or token:
        return
    raise InsecureBind(
        f"refusing to listen on {host} without an access token: anyone who can reach this "
        "port could read every run and start processes on this machine. Set TRACKER_TOKEN "
        "(or pass --token), or keep the default --host 127.0.0.1.",
        field="host",
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


# ------------------------------------------------------------------------ token


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison (the time does not depend on where the strings differ)."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _session_mark(token: str) -> str:
    # What the session cookie holds: proof of the token, not the token itself; changing
    # the token invalidates every session.
    key = str(current_app.config["SECRET_KEY"]).encode("utf-8")
    return hmac.new(key, b"tracker-session:" + token.encode("utf-8"), hashlib.sha256).hexdigest()


def _limit() -> FailureLimit:
    return current_app.extensions["tracker_login_limit"]  # type: ignore[no-any-return]


def _client() -> str:
    return request.remote_addr or "unknown"


def _refuse_if_limited(field: str) -> None:
    """Raise TooManyAttempts while this client must wait after too many wrong tokens."""
    limit = _limit()
    wait = limit.retry_after(_client(), limit.clock())
    if wait is not None:
        raise TooManyAttempts(
            f"too many wrong access tokens from this address; try again in {wait} s",
            retry_after=wait,
            field=field,
        )


def _check_token(given: str | None, token: str, field: str) -> bool:
    """Compare ``given`` with the token, counting a wrong one against this client."""
    _refuse_if_limited(field)
    if token_matches(given, token):
        return True
    _limit().failed(_client(), _limit().clock())
    return False


def _authenticated(token: str) -> bool:
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, value = header.partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else None
        return _check_token(given, token, "Authorization")
    mark = session.get("auth")
    return isinstance(mark, str) and hmac.compare_digest(mark, _session_mark(token))


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


def _guard() -> Response | None:
    cfg = current_app.config
    if not allowed_host(request.host, cfg["ALLOWED_HOSTS"]):
        raise Forbidden(
            f"Host {_hostname(request.host)[:100]!r} is not an allowed host of this dashboard; "
            "add it with --allowed-host (TRACKER_ALLOWED_HOSTS)",
            field="Host",
        )
    view = current_app.view_functions.get(request.endpoint or "")
    token = cfg.get("TOKEN")
    if token and not getattr(view, "tracker_public", False) and not _authenticated(token):
        if request.method == "GET" and not request.path.startswith("/api/"):
            return redirect("/login?next=" + _quote_next(request.full_path))  # type: ignore[return-value]
        raise Unauthorized(
            "this dashboard needs its access token: send 'Authorization: Bearer <token>' "
            "or sign in at /login",
            field="Authorization",
        )
    if request.method in MUTATING:
        _check_origin()
        if not getattr(view, "tracker_form_ok", False):
            _check_json_body()
    return None


def _quote_next(path: str) -> str:
    from urllib.parse import quote

    return quote(path.rstrip("?"), safe="/")


def _headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("Referrer-Policy", "same-origin")
    if request.path.startswith("/api/"):
        headers.setdefault("Cache-Control", "no-store")
    return response


def install(app: Flask) -> None:
    """Add the guard, the security headers and the login/logout views to ``app``."""
    cfg = app.config
    app.extensions["tracker_login_limit"] = FailureLimit(
        int(cfg.get("LOGIN_MAX_FAILURES", 10)), float(cfg.get("LOGIN_WINDOW_S", 300.0))
    )
    app.before_request(_guard)
    app.after_request(_headers)
    app.register_blueprint(auth)


# ------------------------------------------------------------------- login form

auth = Blueprint("auth", __name__)

_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - tracker</title></head>
<body style="font-family: sans-serif; max-width: 24rem; margin: 4rem auto">
<h1>tracker</h1>
{% if error %}<p role="alert" style="color: #b00020">{{ error }}</p>{% endif %}
<form method="post" action="/login">
  <input type="hidden" name="csrf" value="{{ csrf }}">
  <input type="hidden" name="next" value="{{ next }}">
  <label>Access token <input type="password" name="token" autocomplete="current-password"
    autofocus required></label>
  <button type="submit">Sign in</button>
</form></body></html>"""


def _safe_next(target: str | None) -> str:
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _login_form(error: str | None, status: int, **headers: str) -> tuple[str, int, dict[str, str]]:
    import secrets

    session.setdefault("csrf", secrets.token_urlsafe(32))
    target = _safe_next(request.values.get("next"))
    page = render(_LOGIN_PAGE, error=error, csrf=session["csrf"], next=target)
    return page, status, headers


@auth.get("/login")
@public
def login_page() -> Any:
    if not current_app.config.get("TOKEN"):
        return redirect("/")
    return _login_form(None, 200)


@auth.post("/login")
@public
@form_ok
def login() -> Any:
    """Sign in with the token: an HTML form (with its CSRF field) or ``{"token": ...}``."""
    token = str(current_app.config.get("TOKEN") or "")
    as_json = request.mimetype == "application/json"
    if as_json:
        given = (request.get_json(silent=True) or {}).get("token")
    else:
        csrf = session.get("csrf")
        if not csrf or not hmac.compare_digest(str(request.form.get("csrf", "")), csrf):
            raise Forbidden("the sign-in form expired; reload /login and try again", field="csrf")
        given = request.form.get("token")
    try:
        right = bool(token) and _check_token(given if isinstance(given, str) else None, token,
                                             "token")  # fmt: skip
    except TooManyAttempts as exc:
        if as_json:
            raise
        wait = str(exc.retry_after)
        message = f"Too many wrong tokens from this address; try again in {wait} s."
        return _login_form(message, 429, **{"Retry-After": wait})
    if not right:
        if as_json:
            raise Unauthorized("wrong access token", field="token")
        return _login_form("Wrong access token.", 401)
    session.clear()
    session["auth"] = _session_mark(token)
    if as_json:
        return {"ok": True}
    return redirect(_safe_next(request.form.get("next")))


@auth.post("/logout")
def logout() -> Any:
    session.clear()
    return {"ok": True}
