"""The HTTP sink: ``TRACKER_URI=http://host:port`` sends everything to the dashboard's JSON
API instead of a database, through the one HTTP client (:mod:`tracker.client.http`: auth
header, error envelope, retry policy).

Durability is the SQL sink's: metric batches are idempotent on the server (a retried batch
never duplicates a point), and when the server cannot be reached -- refused, reset, timed
out, or answering 5xx -- ``StoreUnavailable`` is raised so the writer keeps the batch,
retries with backoff and spills to disk past its memory limit. Control calls (start,
finish, checkpoints) retry by themselves for ``retry_for`` seconds; a call that is not
idempotent (create a run, add an event or a checkpoint) is retried only when the server
certainly did not act on it (connection refused, 408, 429 after its ``Retry-After``).

Bodies are JSON, gzip-compressed above 1 KiB; NaN and ±Inf travel as "NaN", "Infinity" and
"-Infinity" (the wire form of :mod:`tracker.rules.jsonvalues`). ``TRACKER_TOKEN`` (or
``token=``) is sent as ``Authorization: Bearer``. A metric batch goes out in requests of at
most ``MAX_POINTS_PER_REQUEST`` points, well inside the server's body limit (8 MiB). Console
output of a run started by hand (``append_logs``, teed by ``tracker.client.console``) goes to
``POST /runs/<id>/logs`` in requests of at most ``MAX_LOG_CHARS_PER_REQUEST`` characters.
"""

from __future__ import annotations

import gzip
import json
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracker.client.http import ApiClient
from tracker.client.sinks import Record
from tracker.entities import AttemptFence, CheckpointInfo, RunInfo
from tracker.rules import jsonvalues

__all__ = ["HttpSink"]

ATTEMPT_HEADER = "X-Tracker-Attempt"  # "<job id>:<attempt>": the writes' attempt fence
_COMPRESS_MIN = 1024
MAX_POINTS_PER_REQUEST = 20_000  # < 6 MiB of JSON even with 250-character keys
MAX_LOG_CHARS_PER_REQUEST = 512 * 1024  # < 6 MiB of JSON even if every character is escaped
MAX_LOG_CHUNKS_PER_REQUEST = 10_000
LOG_CHUNK_CHARS = 8192  # as tracker.store.logs.CHUNK_CHARS
_RUN_FIELDS = set(RunInfo.__dataclass_fields__)
_CHECKPOINT_FIELDS = set(CheckpointInfo.__dataclass_fields__)


def _encode(body: Any) -> bytes:
    return jsonvalues.dumps(body, separators=(",", ":")).encode("utf-8")


class HttpSink:
    """A Sink over the dashboard's ``/api/v1`` (see ``web/API.md``).

    Raises (from every method):
        StoreUnavailable: the server cannot be reached or answers 5xx.
        TrackerError subclasses (NotFound, InvalidInput, ...): the server refused the
            request (4xx); the error's code is the server's.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry_for: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        token = token if token is not None else (os.environ.get("TRACKER_TOKEN") or None)
        self.client = ApiClient(self.base_url, token, timeout=timeout, retry_for=retry_for)
        self.fence: AttemptFence | None = None  # set by tracker.init inside a worker's job

    def __repr__(self) -> str:  # never shows the token
        return f"HttpSink({self.base_url!r})"

    @property
    def token(self) -> str | None:
        """The access token sent as ``Authorization: Bearer`` (by the client)."""
        return self.client.token

    @token.setter
    def token(self, value: str | None) -> None:
        self.client.token = value or None

    # ------------------------------------------------------------------ transport

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.fence is not None:
            headers[ATTEMPT_HEADER] = f"{self.fence.job_id}:{self.fence.attempt}"
        return headers

    def _send(self, method: str, path: str, body: Any) -> Any:
        """One request, not retried (the writer retries what it keeps)."""
        return self._request(method, path, body, idempotent=False, retry=False)

    def _call(self, method: str, path: str, body: Any = None, *, idempotent: bool) -> Any:
        """One request, retried by the client's policy for ``retry_for`` seconds
        (:func:`tracker.client.http.should_retry`)."""
        return self._request(method, path, body, idempotent=idempotent, retry=True)

    def _request(self, method: str, path: str, body: Any, *, idempotent: bool, retry: bool) -> Any:
        headers: dict[str, str] = {}
        data = None
        if method != "GET":
            data = _encode({} if body is None else body)
            headers["Content-Type"] = "application/json"
            if len(data) >= _COMPRESS_MIN:
                data = gzip.compress(data, compresslevel=1)
                headers["Content-Encoding"] = "gzip"
        return self.client.call(
            method, path, data=data, headers=self._headers(headers), idempotent=idempotent,
            retry=retry,
        )  # fmt: skip

    # ----------------------------------------------------------------- Sink API

    def create_run(
        self,
        project: str,
        name: str | None,
        config: dict[str, Any],
        tags: Sequence[str],
        **attrs: Any,
    ) -> RunInfo:
        body = {"project": project, "name": name, "config": config, "tags": list(tags), **attrs}
        return _run(self._call("POST", "/runs", body, idempotent=False))

    def start_run(self, run_id: int, config: dict[str, Any] | None, **attrs: Any) -> RunInfo:
        body = {"config": config, **attrs}
        return _run(self._call("POST", f"/runs/{run_id}/start", body, idempotent=True))

    def write_metrics(self, run_id: int, records: Sequence[Record]) -> None:
        # No retry here: the writer keeps the batch, backs off and spills (the server's
        # writes are idempotent, so the parts sent before a failure may be sent again).
        for part in _parts(records, MAX_POINTS_PER_REQUEST):
            self._send("POST", f"/runs/{run_id}/metrics", {"records": part})

    def settle(self) -> None:
        """Nothing to do: the server refreshes chart rollups as each batch arrives."""

    def heartbeat(self, run_id: int) -> dict[str, Any] | None:
        answer = self._send("POST", f"/runs/{run_id}/heartbeat", None)
        control = answer.get("control") if isinstance(answer, dict) else None
        return control if isinstance(control, dict) else None  # an older server: none

    def control(self, run_id: int) -> dict[str, Any] | None:
        answer = self._send("GET", f"/runs/{run_id}/control", None)
        control = answer.get("control") if isinstance(answer, dict) else None
        return control if isinstance(control, dict) else None

    def report_profile(self, run_id: int, profile_id: int, body: dict[str, Any]) -> None:
        path = f"/runs/{run_id}/profiles/{profile_id}/report"
        self._call("POST", path, body, idempotent=True)  # a report again changes nothing

    def finish_run(self, run_id: int, status: str, **attrs: Any) -> None:
        body = {"status": status, **attrs}
        self._call("POST", f"/runs/{run_id}/finish", body, idempotent=True)

    def add_event(
        self, run_id: int, kind: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        body = {"kind": kind, "message": message, "data": data}
        self._call("POST", f"/runs/{run_id}/events", body, idempotent=False)

    def add_checkpoint(
        self, run_id: int, step: int, path: str, size: int, sha256: str, metrics: dict[str, Any]
    ) -> CheckpointInfo:
        body = {"step": step, "path": path, "bytes": size, "sha256": sha256, "metrics": metrics}
        doc = self._call("POST", f"/runs/{run_id}/checkpoints", body, idempotent=False)
        return _checkpoint(doc)

    def list_checkpoints(self, run_id: int) -> list[CheckpointInfo]:
        doc = self._call("GET", f"/runs/{run_id}/checkpoints", idempotent=True)
        return [_checkpoint(c) for c in doc["checkpoints"]]

    def set_checkpoint_state(self, checkpoint_id: int, state: str) -> None:
        self._call("PATCH", f"/checkpoints/{checkpoint_id}", {"state": state}, idempotent=True)

    def put_artifact(
        self, run_id: int, path: str, data: bytes | Path, *, media_type: str | None = None,
        step: int | None = None, meta: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """``PUT /runs/<id>/artifacts/<path>`` with the raw bytes (a file is streamed).

        No retry here: the writer keeps the upload and retries it after ``StoreUnavailable``
        (storing one path twice with the same bytes is idempotent)."""
        query = {}
        if step is not None:
            query["step"] = str(step)
        if media_type:
            query["media_type"] = media_type
        url = f"/runs/{run_id}/artifacts/{urllib.parse.quote(path, safe='/')}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Content-SHA256": _sha256(data),
        }
        if meta:
            headers["X-Artifact-Meta"] = json.dumps(meta, separators=(",", ":"), ensure_ascii=True)
        if isinstance(data, bytes):
            self._send_raw("PUT", url, data, headers)
            return
        with open(data, "rb") as fh:
            headers["Content-Length"] = str(os.fstat(fh.fileno()).st_size)
            self._send_raw("PUT", url, fh, headers)

    def _send_raw(self, method: str, path: str, body: Any, extra: dict[str, str]) -> Any:
        """``_send`` for a raw (not JSON) body."""
        return self.client.call(
            method, path, data=body, headers=self._headers(extra), idempotent=False, retry=False
        )

    def append_logs(
        self, run_id: int, lines: Sequence[tuple[str, float, str]], max_chars: int
    ) -> None:
        """Send console lines of a run started by hand (``POST /runs/<id>/logs``); the run
        keeps its newest ``max_chars`` characters.

        Consecutive lines of one stream travel as one chunk; a batch goes out in requests of
        at most ``MAX_LOG_CHARS_PER_REQUEST`` characters. No retry here, as for metric
        batches: ``StoreUnavailable`` goes to the console capture, which keeps the lines
        and sends them again a second later (so its thread never sleeps through the
        process's exit). Not idempotent: a request whose answer was lost (timeout, reset)
        is stored twice when sent again, and so is the first part of a batch split over
        several requests that fails after it.
        """
        for part in _log_parts(lines, MAX_LOG_CHARS_PER_REQUEST, MAX_LOG_CHUNKS_PER_REQUEST):
            body = {"chunks": part, "max_chars": max_chars}
            self._send("POST", f"/runs/{run_id}/logs", body)

    def close(self) -> None:
        """Nothing to release: every request uses its own connection."""


def _sha256(data: bytes | Path) -> str:
    import hashlib

    if isinstance(data, bytes):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    with open(data, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _parts(records: Sequence[Record], most: int) -> list[Sequence[Record]]:
    """``records`` cut into consecutive runs of at most ``most`` points (a record with more
    keys than that goes alone)."""
    parts: list[Sequence[Record]] = []
    start, points = 0, 0
    for index, record in enumerate(records):
        n = len(record[2])
        if points and points + n > most:
            parts.append(records[start:index])
            start, points = index, 0
        points += n
    if start < len(records) or not parts:
        parts.append(records[start:])
    return parts


def _log_parts(
    lines: Sequence[tuple[str, float, str]], most_chars: int, most_chunks: int
) -> list[list[list[Any]]]:
    """Console lines as request bodies' ``chunks``: consecutive lines of one stream merged
    (first time kept) into chunks of at most ``LOG_CHUNK_CHARS`` (the store's chunk size, so
    trimming keeps most of a run's budget), each part at most ``most_chars`` characters in
    at most ``most_chunks`` chunks."""
    parts: list[list[list[Any]]] = []
    part: list[list[Any]] = []
    chars = 0
    for stream, at, text in lines:
        while text:
            if chars >= most_chars or len(part) >= most_chunks:
                parts.append(part)
                part, chars = [], 0
            last = part[-1] if part else None
            if last is not None and last[0] == stream and len(last[2]) < LOG_CHUNK_CHARS:
                piece = text[: min(most_chars - chars, LOG_CHUNK_CHARS - len(last[2]))]
                last[2] += piece
            else:
                piece = text[: min(most_chars - chars, LOG_CHUNK_CHARS)]
                part.append([stream, at, piece])
            text = text[len(piece) :]
            chars += len(piece)
    if part:
        parts.append(part)
    return parts


def _number(value: Any) -> Any:
    if isinstance(value, str):
        special = jsonvalues.decode_special(value)
        return value if special is None else special
    return value


def _run(doc: dict[str, Any]) -> RunInfo:
    fields = {k: v for k, v in doc.items() if k in _RUN_FIELDS}
    fields["last_metrics"] = {k: _number(v) for k, v in (doc.get("last_metrics") or {}).items()}
    return RunInfo(**fields)


def _checkpoint(doc: dict[str, Any]) -> CheckpointInfo:
    return CheckpointInfo(**{k: v for k, v in doc.items() if k in _CHECKPOINT_FIELDS})
