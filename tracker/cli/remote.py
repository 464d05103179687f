"""Reading a dashboard over HTTP: the CLI's read commands with ``--uri http://host:port``.

:class:`HttpReader` is the :class:`tracker.cli.reading.Reader` over the dashboard's JSON API
(``web/API.md``): it sends ``--token`` /
``TRACKER_TOKEN`` as ``Authorization: Bearer`` (a ``log`` token may read everything) and
turns the answers back into the entities the store returns, so a command prints the same
whichever reader it got. Env values never leave the server: a job read here has its env
*names* (the values are empty strings), which is all the CLI shows of them anyway.

Errors, decoded by the one HTTP client (:mod:`tracker.client.http`), exactly as for the HTTP
sink: the server's error envelope becomes the matching ``TrackerError`` with the server's
code (``NotFound`` 404, ``InvalidInput`` 400, ``Conflict`` 409; 401 says to pass a token);
a server that cannot be reached, or answers 408, 429 or 5xx after the retries, is
``StoreUnavailable``; an answer that is not the tracker's JSON (another program on that
port) is a ``TrackerError`` saying so.

``submit``, ``sweep`` and ``jobs cancel`` also work over HTTP, with an ``admin`` token
(:mod:`tracker.cli.remote_submit`). Every other command that writes, or reads what the API
does not serve, needs the database: :func:`refuse_http` (called by ``open_store``) stops it
with a message naming the command, what to give instead, and which commands do work over
HTTP.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import click

from tracker.client.http import ApiClient
from tracker.entities import (
    ArtifactInfo,
    CheckpointInfo,
    JobAttemptInfo,
    JobInfo,
    LogChunk,
    MetricPoint,
    RunEventInfo,
    RunInfo,
    WorkerInfo,
)
from tracker.errors import InvalidInput, NotFound, TrackerError
from tracker.rules.jsonvalues import decode_special

__all__ = [
    "HTTP_READ_COMMANDS",
    "HTTP_WRITE_COMMANDS",
    "HttpReader",
    "is_http",
    "job_from_json",
    "refuse_http",
    "run_from_json",
]

HTTP_READ_COMMANDS = (
    "runs ls",
    "runs show",
    "runs export",
    "jobs ls",
    "jobs show",
    "jobs logs",
    "workers ls",
)
HTTP_WRITE_COMMANDS = (  # with an admin token
    "submit", "sweep", "jobs cancel", "runs tag", "runs untag", "runs rename", "runs note",
    "runs star",
)  # fmt: skip
_RUNS_PAGE = 500  # the API's most runs per search page
_COMPARE_MAX = 200  # the API's most runs per /compare
_JOBS_PAGE = 1000
_EVENTS_PAGE = 5000


def is_http(uri: str | None) -> bool:
    """Whether ``uri`` is a dashboard's address rather than a database URL."""
    return bool(uri) and str(uri).lower().startswith(("http://", "https://"))


def refuse_http(uri: str | None) -> None:
    """Raise InvalidInput (field ``uri``) when a command that needs the database was given a
    dashboard's ``http://`` address; nothing otherwise."""
    if not is_http(uri):
        return
    ctx = click.get_current_context(silent=True)
    command = " ".join(ctx.command_path.split()[1:]) if ctx is not None else ""
    what = f"`tracker {command}`" if command else "this command"
    reads = ", ".join(HTTP_READ_COMMANDS)
    writes = ", ".join(HTTP_WRITE_COMMANDS)
    raise InvalidInput(
        f"{what} needs the database, and {uri} is a dashboard: give a database URL "
        "(sqlite:///path/to/tracker.db or postgresql+psycopg://user@host/db) with --uri or "
        f"TRACKER_URI. Over http:// the CLI reads: {reads}; and with an admin token "
        f"submits: {writes}",
        field="uri",
    )


def _number(value: Any) -> Any:
    if isinstance(value, str):
        special = decode_special(value)
        return value if special is None else special
    return value


def _fields(cls: type, doc: dict[str, Any]) -> dict[str, Any]:
    names = cls.__dataclass_fields__  # type: ignore[attr-defined]
    return {k: v for k, v in doc.items() if k in names}


def _run(doc: dict[str, Any]) -> RunInfo:
    values = _fields(RunInfo, doc)
    values["last_metrics"] = {k: _number(v) for k, v in (doc.get("last_metrics") or {}).items()}
    return RunInfo(**values)


def run_from_json(doc: dict[str, Any]) -> RunInfo:
    """A run of the API (``run_json``) as the store returns it."""
    return _run(doc)


def job_from_json(doc: dict[str, Any]) -> JobInfo:
    """A job of the API (``job_json``) as the store returns it, env values left empty."""
    values = _fields(JobInfo, doc)
    values["env"] = dict.fromkeys(doc.get("env_keys") or [], "")  # names only
    values["lease_owner"] = doc.get("worker")
    values.setdefault("retry_on_failure", False)
    return JobInfo(**values)


class HttpReader:
    """:class:`tracker.cli.reading.Reader` over a dashboard's ``/api/v1``, through the one
    HTTP client (:class:`tracker.client.http.ApiClient`): every read is idempotent, so it is
    retried for ``retry_for`` seconds on 408, 429 (after its ``Retry-After``), 5xx and
    connection errors."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry_for: float = 5.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.where = self.base_url
        self.client = ApiClient(self.base_url, token, timeout=timeout, retry_for=retry_for)

    def __repr__(self) -> str:  # never shows the token
        return f"HttpReader({self.base_url!r})"

    # ------------------------------------------------------------------ transport

    def _get(self, path: str, **params: Any) -> dict[str, Any]:
        doc = self.client.call("GET", path, query=params, idempotent=True)
        if not isinstance(doc, dict):
            raise TrackerError(
                f"{self.base_url} answered GET {path} with something that is not the "
                "tracker's JSON: is this a tracker dashboard (`tracker ui`)?"
            )
        return doc

    # ---------------------------------------------------------------------- runs

    def search_runs(
        self, query: str, project: str | None, status: str | None, tag: str | None, limit: int
    ) -> list[RunInfo]:
        if status:
            query = f"({query}) and status == {status}" if query.strip() else f"status == {status}"
        ids: list[int] = []
        while len(ids) < limit:
            size = min(_RUNS_PAGE, limit - len(ids))
            page = self._get(
                "/runs", q=query or None, project=project, tag=tag, sort="id", order="desc",
                limit=size, offset=len(ids),
            )  # fmt: skip
            ids.extend(int(r["id"]) for r in page["runs"])
            if len(page["runs"]) < size:
                break
        found: list[RunInfo] = []
        for start in range(0, len(ids), _COMPARE_MAX):  # whole runs, 200 a request
            part = ids[start : start + _COMPARE_MAX]
            doc = self._get("/compare", runs=",".join(map(str, part)))
            found.extend(_run(r) for r in doc["runs"])
        return found

    def run(self, run_id: int) -> RunInfo:
        return _run(self._get(f"/runs/{run_id}"))

    def checkpoints(self, run_id: int) -> list[CheckpointInfo]:
        doc = self._get(f"/runs/{run_id}/checkpoints")
        return [CheckpointInfo(**_fields(CheckpointInfo, c)) for c in doc["checkpoints"]]

    def events(self, run_id: int) -> list[RunEventInfo]:
        found: list[RunEventInfo] = []
        after = 0
        while True:
            doc = self._get(f"/runs/{run_id}/events", after=after, limit=_EVENTS_PAGE)
            found.extend(RunEventInfo(**_fields(RunEventInfo, e)) for e in doc["events"])
            if len(doc["events"]) < _EVENTS_PAGE:
                return found
            after = int(doc["next_after"])

    def metric_keys(self, run_id: int) -> list[str]:
        doc = self._get(f"/runs/{run_id}/metrics")
        return sorted(str(m["key"]) for m in doc["metrics"])

    def metric_points(self, run_id: int, key: str) -> Iterator[MetricPoint]:
        from tracker.cli.reading import POINTS_PAGE

        after = -1
        while True:
            doc = self._get(f"/runs/{run_id}/points", key=key, after_step=after, limit=POINTS_PAGE)
            points = doc["points"]
            for step, wall_time, value in points:
                yield MetricPoint(int(step), float(wall_time), _number(value))
            if len(points) < POINTS_PAGE:
                return
            after = int(doc["next_after_step"])

    # ---------------------------------------------------------------------- jobs

    def jobs(self, statuses: Sequence[str], project: str | None, limit: int) -> list[JobInfo]:
        found: list[JobInfo] = []
        while len(found) < limit:
            size = min(_JOBS_PAGE, limit - len(found))
            doc = self._get(
                "/jobs", status=",".join(statuses) or None, project=project, limit=size,
                offset=len(found),
            )  # fmt: skip
            found.extend(job_from_json(j) for j in doc["jobs"])
            if len(doc["jobs"]) < size:
                break
        return found

    def job(self, job_id: int) -> JobInfo:
        return job_from_json(self._get(f"/jobs/{job_id}"))

    def attempts(self, job_id: int) -> list[JobAttemptInfo]:
        doc = self._get(f"/jobs/{job_id}")
        return [
            JobAttemptInfo(job_id=job_id, worker_id=a.get("worker"), **_fields(JobAttemptInfo, a))
            for a in doc["attempts"]
        ]

    def logs_after(
        self, job_id: int, after: int, attempt: int | None, stream: str | None, limit: int
    ) -> list[LogChunk]:
        doc = self._get(
            f"/jobs/{job_id}/logs", after=after, attempt=attempt, stream=stream,
            limit=min(limit, 5000),
        )  # fmt: skip
        return [LogChunk(job_id=job_id, **_fields(LogChunk, c)) for c in doc["chunks"]]

    def workers(self, include_stopped: bool, include_lost: bool) -> list[WorkerInfo]:
        doc = self._get("/workers", all=int(include_stopped))
        found = [WorkerInfo(**_fields(WorkerInfo, w)) for w in doc["workers"]]
        return [w for w in found if include_lost or w.status != "lost"]

    # ----------------------------------------------------------------- artifacts

    def artifacts(self, run_id: int, prefix: str) -> list[ArtifactInfo]:
        doc = self._get(f"/runs/{run_id}/artifacts", prefix=prefix or None)
        return [ArtifactInfo(**_fields(ArtifactInfo, a)) for a in doc["artifacts"]]

    def artifact(self, run_id: int, path: str) -> ArtifactInfo:
        parent = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        for info in self.artifacts(run_id, parent):
            if info.path == path:
                return info
        raise NotFound(f"run {run_id} has no artifact {path!r}", field="path")

    def open_artifact(self, run_id: int, path: str) -> BinaryIO:
        quoted = urllib.parse.quote(path, safe="/")
        path = f"/runs/{run_id}/artifacts/{quoted}"
        response = self.client.open(
            "GET", path, query={"download": 1}, accept="*/*", idempotent=True
        )
        return response  # type: ignore[no-any-return]
