"""Who is asking: access tokens, sign-in sessions, and the login and logout views.

A request is authenticated by one of:

* ``Authorization: Bearer <token>``: the token configured at start (``--token`` /
  ``TRACKER_TOKEN``, compared in constant time; it has the ``admin`` scope) or a token
  stored with ``tracker token create`` (its own scope). A header that is present but
  wrong is a wrong token: the cookie is then not looked at.
* the session cookie set by ``/login``: it carries only a random session id (256 bits)
  and a random CSRF value, signed with the installation secret of the store (random,
  never derived from a token). The session row on the server says which token signed in
  and until when; ``/logout`` revokes it, and so does revoking the token. A cookie from
  ``/login`` therefore tells nothing about the token: there is nothing to guess offline.

Wrong tokens (header, form, JSON or the ``?token=`` of a login link) are counted per
client address (:mod:`~tracker.web.plumbing.login_limit`): too many -> 429. With
``NO_AUTH`` (``--no-auth``, loopback only) every request has the ``admin`` scope.

``identity()`` answers the request's scope (``"log"``, ``"admin"``) or None; the guard in
:mod:`~tracker.web.plumbing.security` compares it with the route's scope. The token is
never logged, echoed or put in a page.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any
from urllib.parse import quote, urlsplit

from flask import (
    Blueprint,
    Flask,
    current_app,
    g,
    redirect,
    render_template,
    request,
    send_from_directory,
    session,
)

from tracker.store import tokens
from tracker.web.plumbing.context import state
from tracker.web.plumbing.errors import Forbidden, TooManyAttempts, Unauthorized
from tracker.web.plumbing.login_limit import FailureLimit

__all__ = ["ADMIN", "LOG", "bp", "identity", "install", "safe_next", "token_matches"]

LOG, ADMIN = "log", "admin"


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison (the time does not depend on where the strings differ)."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _configured_mark(secret_key: str, token: str) -> str:
    # Ties a session made with the configured token to that token: a new token, a new
    # mark, and the old sessions stop working. Keyed with the installation secret.
    return hmac.new(
        secret_key.encode("utf-8"), b"tracker-configured-token:" + token.encode("utf-8"),
        hashlib.sha256,
    ).hexdigest()  # fmt: skip


# ------------------------------------------------------------------ who is asking


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


def check_token(given: str | None, field: str) -> tuple[str, int | None] | None:
    """(scope, stored token id or None for the configured token) of ``given``, or None
    for a wrong token (counted against this client).

    A valid token is never refused for the wrong tokens others sent from the same address
    (a local account could otherwise lock out every training host's heartbeats and
    ingest): stored tokens (random) and a strong configured token always pass; while the
    client is limited, only wrong tokens -- and a weak configured one, which could be
    guessed -- get 429.

    Raises:
        TooManyAttempts (429): this client sent too many wrong tokens lately.
        StoreUnavailable (503): the store cannot be reached.
    """
    limit = _limit()
    wait = limit.retry_after(_client(), limit.clock())
    if given:
        configured = current_app.config.get("TOKEN")
        if configured and token_matches(given, configured):
            # A token a person chose may be guessable: while this client is limited, even
            # the right one waits (else the limit would not slow guessing it down).
            if wait is None or not _guessable(configured):
                return ADMIN, None
        else:
            stored = tokens.verify_token(state().store, given)
            if stored is not None:
                g.tracker_bound_run = stored.run_id  # a job's own token: its run only
                return stored.scope, stored.id  # random 256 bits: never blocked
    if wait is not None:
        _refuse_if_limited(field)
    limit.failed(_client(), limit.clock())
    return None


def _guessable(token: str) -> bool:
    from tracker.web.plumbing.security import weak_token_reason

    return weak_token_reason(token) is not None


def identity() -> str | None:
    """The scope of the current request (``"log"`` or ``"admin"``), or None when it is not
    authenticated. Worked out once per request.

    Raises:
        TooManyAttempts (429), StoreUnavailable (503): see :func:`check_token`.
    """
    if "tracker_scope" not in g:
        g.tracker_scope, g.tracker_token_id = _identify()
    return g.tracker_scope  # type: ignore[no-any-return]


def bound_run() -> int | None:
    """The run a job's own token is bound to (it may touch that run only), or None for a
    request made with any other token, a session, or none."""
    identity()
    return g.get("tracker_bound_run")  # type: ignore[no-any-return]


def token_id() -> int | None:
    """The stored token (``tokens.id``) the current request is authenticated with -- by
    bearer header or through a session signed in with it -- or None: no authentication, the
    configured token, or no authentication needed (``--no-auth``)."""
    identity()
    return g.tracker_token_id  # type: ignore[no-any-return]


def _identify() -> tuple[str | None, int | None]:
    if current_app.config["NO_AUTH"]:
        return ADMIN, None
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, value = header.partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else None
        found = check_token(given, "Authorization")
        return found if found else (None, None)
    sid = session.get("sid")
    if not isinstance(sid, str) or not sid:
        return None, None
    live = tokens.get_session(state().store, sid)
    if live is None:
        return None, None
    if live.token_id is None:
        mark = current_app.extensions.get("tracker_configured_mark")
        if not mark or not hmac.compare_digest(live.configured_mark or "", mark):
            return None, None  # made with a configured token that has changed since
    return live.scope, live.token_id


def _start_session(scope: str, token_id: int | None) -> None:
    old = session.get("sid")
    store = state().store
    if isinstance(old, str) and old:
        tokens.revoke_session(store, old)
    mark = None if token_id is not None else current_app.extensions["tracker_configured_mark"]
    sid = tokens.create_session(
        store, scope, lifetime_s=float(current_app.config["SESSION_LIFETIME_S"]),
        token_id=token_id, configured_mark=mark,
    )  # fmt: skip
    session.clear()
    session["sid"] = sid


# ---------------------------------------------------------------------- redirects

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_KEEP = "/?&=#%:@!$'()*+,;~-._"  # characters a path and query may keep as they are


def safe_next(target: str | None) -> str:
    """Where to go after signing in: ``target`` if it stays on this site, else ``/``.

    Refused: anything with a control character (browsers drop tabs and newlines inside
    URLs, so ``/\\t/evil`` becomes ``//evil``) or a backslash (read as ``/``), anything not
    starting with one ``/`` once surrounding spaces are stripped, and anything with a
    scheme or host after parsing. What passes is returned percent-encoded.
    """
    if not target or _CONTROL.search(target) or "\\" in target:
        return "/"
    text = target.strip(" ")
    if not text.startswith("/") or text.startswith("//"):
        return "/"
    parts = urlsplit(text)
    if parts.scheme or parts.netloc:
        return "/"
    return quote(text, safe=_KEEP)


# --------------------------------------------------------------------- the views

bp = Blueprint("auth", __name__)


def _login_form(
    error: str | None, status: int, *, confirm_token: str | None = None, **headers: str
) -> tuple[str, int, dict[str, str]]:
    # web/templates/login.html: the dashboard's stylesheet, and what to do when an old
    # sign-in link stops working (each start of ``tracker ui`` prints a new one).
    # ``confirm_token``: a sign-in link that must be confirmed with a click (see login_page).
    session.setdefault("csrf", secrets.token_urlsafe(32))
    target = safe_next(request.values.get("next"))
    signed_out = request.args.get("signed_out") == "1" and error is None
    page = render_template(
        "login.html", error=error, csrf=session["csrf"], next=target, signed_out=signed_out,
        confirm_token=confirm_token, signed_in=confirm_token is not None and _signed_in(),
    )  # fmt: skip
    headers.setdefault("Cache-Control", "no-store")
    return page, status, headers


def _too_many(exc: TooManyAttempts) -> tuple[str, int, dict[str, str]]:
    wait = str(exc.retry_after)
    message = f"Too many wrong tokens from this address; try again in {wait} s."
    return _login_form(message, 429, **{"Retry-After": wait})


@bp.get("/login/app.css")
def login_css() -> Any:
    """The dashboard's stylesheet for the sign-in page, open to everyone (the rest of
    ``/static`` needs a sign-in): the project's own CSS, no data."""
    return send_from_directory(str(current_app.static_folder), "app.css", max_age=300)


@bp.get("/login/theme.js")
def login_theme() -> Any:
    """The colour-theme script for the sign-in page, open to everyone like its stylesheet:
    the page follows the theme chosen in this browser, or the system's (a few lines, no
    data)."""
    return send_from_directory(str(current_app.static_folder), "theme.js", max_age=300)


@bp.get("/login")
def login_page() -> Any:
    """The sign-in form; ``/login?token=...`` (the link ``tracker ui`` prints) signs in
    with that token and redirects, so the token does not stay in the address bar."""
    if current_app.config["NO_AUTH"]:
        return redirect("/")
    given = request.args.get("token")
    if given is None:
        return _login_form(None, 200)
    if _link_from_elsewhere() or _signed_in():
        # Login CSRF: another site's page (or a link clicked while signed in) must not swap
        # this browser's session for one of the link's token. The form asks first; its POST
        # carries the CSRF field, which another site cannot read.
        return _login_form(None, 200, confirm_token=given)
    try:
        found = check_token(given, "token")
    except TooManyAttempts as exc:
        return _too_many(exc)
    if found is None:
        return _login_form("Wrong access token.", 401)
    _start_session(*found)
    return redirect(safe_next(request.args.get("next")))


def _link_from_elsewhere() -> bool:
    """A navigation another site started: ``Sec-Fetch-Site`` says so (``cross-site``, or
    ``same-site``: another port of this host is another site's page too), or, without it,
    a ``Referer`` of another origin. A link opened from a terminal or typed is ``none``."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        return fetch_site not in ("none", "same-origin")
    referer = request.headers.get("Referer")
    if not referer:
        return False
    parsed = urlsplit(referer)
    return f"{parsed.scheme}://{parsed.netloc}" != request.host_url.rstrip("/")


def _signed_in() -> bool:
    sid = session.get("sid")
    return isinstance(sid, str) and bool(sid) and tokens.get_session(state().store, sid) is not None


@bp.post("/login")
def login() -> Any:
    """Sign in with a token: an HTML form (with its CSRF field) or ``{"token": ...}``."""
    as_json = request.mimetype == "application/json"
    if as_json:
        body = request.get_json(silent=True)
        given = body.get("token") if isinstance(body, dict) else None
    else:
        csrf = session.get("csrf")
        if not csrf or not hmac.compare_digest(str(request.form.get("csrf", "")), csrf):
            raise Forbidden("the sign-in form expired; reload /login and try again", field="csrf")
        given = request.form.get("token")
    try:
        found = check_token(given if isinstance(given, str) else None, "token")
    except TooManyAttempts as exc:
        if as_json:
            raise
        return _too_many(exc)
    if found is None:
        if as_json:
            raise Unauthorized("wrong access token", field="token")
        return _login_form("Wrong access token.", 401)
    if g.get("tracker_bound_run") is not None:
        text = "a job's own token logs its run only; it cannot sign in to the dashboard"
        if as_json:
            raise Forbidden(text, field="token")
        return _login_form(text[0].upper() + text[1:] + ".", 403)
    _start_session(*found)
    if as_json:
        return {"ok": True}
    return redirect(safe_next(request.form.get("next")))


@bp.app_context_processor
def _sign_out_button() -> dict[str, Any]:
    # Every page gets the sign-out button (web/templates/base.html) unless authentication is
    # off (--no-auth): then there is no sign-in to end. common.js sends the POST /logout.
    return {"sign_out": not current_app.config["NO_AUTH"]}


@bp.post("/logout")
def logout() -> Any:
    """End this sign-in on the server: the session row is revoked, the cookie cleared.

    A state change like any other: a JSON body (415 otherwise) from this dashboard's own
    origin (403 otherwise), signed in (401 otherwise; ``web/plumbing/security.py``). The
    dashboard's "Sign out" button sends it and then opens ``/login?signed_out=1``."""
    sid = session.get("sid")
    if isinstance(sid, str) and sid:
        tokens.revoke_session(state().store, sid)
    session.clear()
    return {"ok": True}


def install(app: Flask) -> None:
    """The wrong-token counter, the configured token's session mark and the views."""
    cfg = app.config
    app.extensions["tracker_login_limit"] = FailureLimit(
        int(cfg.get("LOGIN_MAX_FAILURES", 10)), float(cfg.get("LOGIN_WINDOW_S", 300.0))
    )
    token = cfg.get("TOKEN")
    if token:
        app.extensions["tracker_configured_mark"] = _configured_mark(cfg["SECRET_KEY"], token)
    app.register_blueprint(bp)
