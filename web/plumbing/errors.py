"""The one JSON error envelope of the HTTP surface, and the JSON encoding of responses.

Every error -- a ``TrackerError`` raised below a view, a 404 for an unknown URL, a 405, a
415 from the security checks, an unexpected exception -- leaves as::

    {"error": {"code": "not_found", "message": "run 42 does not exist", "field": "run"}}

with the HTTP status of the error (``TrackerError.http_status``). ``field`` appears only
when the error names one. Unexpected exceptions are logged with their traceback and
answered with a generic 500 message, so no internal detail leaks to the client.
"""

from __future__ import annotations

from typing import Any, cast

from flask import Flask, Response, current_app
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from tracker.errors import TrackerError
from tracker.rules import jsonvalues

__all__ = [
    "Forbidden",
    "ForbiddenScope",
    "PayloadTooLarge",
    "TooManyAttempts",
    "TrackerJSONProvider",
    "Unauthorized",
    "UnsupportedMediaType",
    "error_body",
    "error_response",
    "register_error_handlers",
]


class Unauthorized(TrackerError):
    """No valid access token (bearer header or session cookie)."""

    code = "unauthorized"
    http_status = 401


class Forbidden(TrackerError):
    """A foreign Host header, a cross-origin state change, or an action the setup forbids."""

    code = "forbidden"
    http_status = 403


class ForbiddenScope(Forbidden):
    """Signed in, but with a token whose scope does not allow this request."""

    code = "forbidden_scope"


class UnsupportedMediaType(TrackerError):
    """A state-changing request whose body is not JSON (or has an unknown encoding)."""

    code = "unsupported_media_type"
    http_status = 415


class TooManyAttempts(TrackerError):
    """Too many wrong access tokens from one address: wait ``retry_after`` seconds."""

    code = "too_many_attempts"
    http_status = 429

    def __init__(self, message: str, *, retry_after: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class PayloadTooLarge(TrackerError):
    code = "payload_too_large"
    http_status = 413


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The envelope as a dict: ``{"error": {"code", "message", "field"?}}``."""
    inner: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        inner["field"] = field
    return {"error": inner}


def error_response(
    code: str, message: str, status: int, field: str | None = None, **headers: str
) -> Response:
    response = cast(Response, current_app.json.response(error_body(code, message, field)))
    response.status_code = status
    for name, value in headers.items():
        response.headers[name.replace("_", "-")] = value
    return response


def _http_code(exc: HTTPException) -> str:
    name = (exc.name or "error").lower()
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def _on_tracker_error(exc: TrackerError) -> Response:
    if exc.http_status >= 500:
        current_app.logger.error("%s: %s", exc.code, exc.message)
    extra = {}
    if isinstance(exc, TooManyAttempts):
        extra["Retry-After"] = str(exc.retry_after)
    return error_response(exc.code, exc.message, exc.http_status, exc.field, **extra)


def _on_http_exception(exc: HTTPException) -> Response:
    status = exc.code or 500
    message = exc.description or exc.name
    extra = {}
    if status == 405 and exc.response is None:
        allow = getattr(exc, "valid_methods", None)
        if allow:
            extra["Allow"] = ", ".join(sorted(allow))
    return error_response(_http_code(exc), message, status, **extra)


def _on_unexpected(exc: Exception) -> Response:
    current_app.logger.exception("unhandled error in %s", type(exc).__name__)
    return error_response("internal_error", "internal server error (see the server log)", 500)


def register_error_handlers(app: Flask) -> None:
    """Route every error of ``app`` through the envelope."""
    app.register_error_handler(TrackerError, _on_tracker_error)
    app.register_error_handler(HTTPException, _on_http_exception)
    app.register_error_handler(Exception, _on_unexpected)


# ------------------------------------------------------------------ JSON encoding


class TrackerJSONProvider(DefaultJSONProvider):
    """Compact, order-keeping, standard JSON: NaN and ±Inf in the wire form of
    :mod:`tracker.rules.jsonvalues`, never as bare literals."""

    sort_keys = False
    compact = True

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("separators", (",", ":"))
        kwargs.setdefault("ensure_ascii", False)
        return jsonvalues.dumps(obj, **kwargs)
