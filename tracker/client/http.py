"""The one HTTP client of the dashboard's JSON API (``/api/v1``, see ``web/API.md``): used by
the HTTP sink (``tracker.client.http_sink``) and the CLI's reader (``tracker.cli.remote``).
Standard library only (``urllib``), so ``import tracker`` stays light.

It owns, once for every caller:

- the auth header: ``Authorization: Bearer <token>`` when a token is given;
- the one decoder of the server's error envelope ``{"error": {"code", "message", "field"}}``
  (:func:`error_from_answer`): the class of ``tracker.errors`` named by the code (then by the
  status: 400 ``InvalidInput``, 404 ``NotFound``, 409 ``Conflict``, 413 ``TooLarge``), the
  server's code, message and field; 401 adds how to pass a token. An answer that is not the
  tracker's JSON (another program on that port) is a ``TrackerError`` saying so;
- the retry policy (:func:`should_retry`): an answer the server certainly did not act on
  (connection refused, 408, 429) is retried for every call, after at least its
  ``Retry-After``; 5xx, resets and timeouts (``StoreUnavailable``) only for idempotent calls;
  any other 4xx answer is final. Waits follow :mod:`tracker.rules.backoff` (0.1 s doubling,
  at most 2 s) for at most ``retry_for`` seconds, then the last error is raised.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from tracker.errors import (
    ArtifactCorrupt,
    AttemptSuperseded,
    Conflict,
    InvalidInput,
    InvalidMetricKey,
    InvalidMetricValue,
    NotFound,
    StoreUnavailable,
    TooLarge,
    TrackerError,
)
from tracker.rules.backoff import backoff_delay, retry_after_seconds

__all__ = [
    "ApiClient",
    "NotReceived",
    "decode_json",
    "error_from_answer",
    "should_retry",
]

FIRST_DELAY_S = 0.1
MAX_DELAY_S = 2.0
AUTH_HINT = (
    " (pass the dashboard's access token with --token or TRACKER_TOKEN; "
    "`tracker token create --scope log` makes one that may write and read)"
)
_BY_CODE: dict[str, type[TrackerError]] = {
    cls.code: cls
    for cls in (
        ArtifactCorrupt,
        AttemptSuperseded,
        Conflict,
        InvalidInput,
        InvalidMetricKey,
        InvalidMetricValue,
        NotFound,
        TooLarge,
    )
}
_BY_STATUS: dict[int, type[TrackerError]] = {
    400: InvalidInput,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
}
_NOT_RECEIVED_STATUS = (408, 429)


class NotReceived(StoreUnavailable):
    """The server certainly did not act on the request (the connection was refused, or it
    answered 408 or 429), so sending it again is safe even when it is not idempotent.
    ``retry_after``: the seconds its ``Retry-After`` asked for, if any."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def should_retry(error: TrackerError, *, idempotent: bool) -> bool:
    """The retry policy: whether a call that failed with ``error`` may be sent again."""
    if isinstance(error, NotReceived):
        return True
    return idempotent and isinstance(error, StoreUnavailable)


def error_from_answer(
    status: int,
    body: bytes,
    *,
    where: str,
    what: str,
    retry_after: str | None = None,
    now: float | None = None,
) -> TrackerError:
    """The error an HTTP error answer stands for (the one decoder of the error envelope).

    ``where`` is the server (its base URL), ``what`` the request (``"GET /runs/3"``).
    408/429 give ``NotReceived`` (with ``Retry-After`` read at ``now``), 5xx
    ``StoreUnavailable``; any other status the class named by the envelope's code, else by
    the status, with the server's code (``http_<status>`` without an envelope), message and
    field, and ``http_status`` set.
    """
    try:
        doc = json.loads(body or b"{}")
        detail = doc.get("error") or {}
        if not isinstance(detail, dict):
            detail = {}
    except (ValueError, AttributeError, UnicodeDecodeError):
        detail = {}
    message = str(detail.get("message") or f"HTTP {status}")
    if status in _NOT_RECEIVED_STATUS:
        wait = retry_after_seconds(retry_after, time.time() if now is None else now)
        return NotReceived(f"{where} answered {status}: {what}: {message}", retry_after=wait)
    if status >= 500:
        return StoreUnavailable(f"{where} answered {status}: {what}: {message}")
    code = str(detail.get("code") or f"http_{status}")
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, TrackerError)
    if status == 401:
        message += AUTH_HINT
    field = detail.get("field")
    error = cls(message, field=field if isinstance(field, str) else None)
    error.code = code
    error.http_status = status
    return error


def decode_json(raw: bytes, *, where: str, what: str) -> Any:
    """The JSON document of a successful answer (``None`` for an empty one).

    Raises TrackerError when it is not JSON: another program answers on that port."""
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise TrackerError(
            f"{where} answered {what} with something that is not the tracker's JSON: "
            "is this a tracker dashboard (`tracker ui`)?"
        ) from None


class ApiClient:
    """Requests to one dashboard's ``/api/v1``: auth header, error decoding, retries.

    Every request uses its own connection (``urllib``), so there is nothing to close.
    ``sleep``, ``clock`` and ``wall`` are injectable for tests.

    Raises (from every request): ``NotReceived``/``StoreUnavailable`` when the server
    cannot be reached or answers 408, 429 or 5xx (after the retries the call allows);
    ``TrackerError`` subclasses for every other 4xx answer, and for an answer that is not
    the tracker's JSON.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry_for: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        self.timeout = timeout
        self.retry_for = retry_for
        self._sleep = sleep
        self._clock = clock
        self._wall = wall

    def __repr__(self) -> str:  # never shows the token
        return f"ApiClient({self.base_url!r})"

    def headers(self, accept: str = "application/json") -> dict[str, str]:
        """The headers of every request: ``Accept`` and the auth header."""
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        url = self.base_url + "/api/v1" + path
        given = {k: v for k, v in (query or {}).items() if v is not None}
        if given:
            url += "?" + urllib.parse.urlencode(given, doseq=True)
        return url

    def open(
        self,
        method: str,
        path: str,
        *,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        accept: str = "application/json",
        idempotent: bool,
        retry: bool = True,
    ) -> Any:
        """The response to one request (a file object to read and close).

        With ``retry``, a failure the policy allows (:func:`should_retry`) is sent again
        after the backoff (at least ``Retry-After``) while ``retry_for`` seconds last. A
        body that is a stream (a file) is sent once: it cannot be read again."""
        if data is not None and not isinstance(data, bytes):
            retry = False
        deadline = self._clock() + self.retry_for
        attempt = 0
        while True:
            try:
                return self._open_once(method, path, data, headers, query, accept)
            except StoreUnavailable as exc:
                if not retry or not should_retry(exc, idempotent=idempotent):
                    raise
                attempt += 1
                wait = backoff_delay(attempt, base_s=FIRST_DELAY_S, cap_s=MAX_DELAY_S)
                if isinstance(exc, NotReceived) and exc.retry_after is not None:
                    wait = max(wait, exc.retry_after)
                if self._clock() + wait > deadline:
                    raise
            self._sleep(wait)

    def call(
        self,
        method: str,
        path: str,
        *,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        idempotent: bool,
        retry: bool = True,
    ) -> Any:
        """``open`` and the answer's JSON document (``None`` for an empty answer)."""
        what = f"{method} {path}"
        response = self.open(
            method, path, data=data, headers=headers, query=query, idempotent=idempotent,
            retry=retry,
        )  # fmt: skip
        try:
            with response:
                raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise StoreUnavailable(f"{what} to {self.base_url} failed: {exc!r}") from exc
        return decode_json(raw, where=self.base_url, what=what)

    def _open_once(
        self,
        method: str,
        path: str,
        data: Any,
        extra: Mapping[str, str] | None,
        query: Mapping[str, Any] | None,
        accept: str,
    ) -> Any:
        headers = {**self.headers(accept), **(extra or {})}
        request = urllib.request.Request(
            self.url(path, query), data=data, headers=headers, method=method
        )
        what = f"{method} {path}"
        try:
            return urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read()
            except (OSError, http.client.HTTPException):
                body = b""
            raise error_from_answer(
                exc.code, body, where=self.base_url, what=what,
                retry_after=exc.headers.get("Retry-After") if exc.headers else None,
                now=self._wall(),
            ) from None  # fmt: skip
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError):
                raise self._refused() from exc
            raise StoreUnavailable(f"{self.base_url} cannot be reached: {exc.reason}") from exc
        except ConnectionRefusedError as exc:
            raise self._refused() from exc
        except (OSError, http.client.HTTPException) as exc:
            raise StoreUnavailable(f"{what} to {self.base_url} failed: {exc!r}") from exc

    def _refused(self) -> NotReceived:
        return NotReceived(f"{self.base_url} cannot be reached: it refused the connection")
