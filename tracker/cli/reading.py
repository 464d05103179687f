"""The reads the CLI's read commands make, behind one small interface, from a database or
from a dashboard.

``runs ls|show|export``, ``jobs ls|show|logs`` and ``workers ls`` take ``--uri`` (or
``TRACKER_URI``): a database URL (``sqlite:///...``, ``postgresql+psycopg://...``) is read
through the store (:class:`StoreReader`); a dashboard's ``http://host:port`` is read over its
JSON API (:class:`tracker.cli.remote.HttpReader`, with ``--token`` / ``TRACKER_TOKEN``: a
``log`` token is enough). Each command calls :func:`open_reader` and the methods of
:class:`Reader`, so its code is one copy whatever the source; both readers return the same
frozen entities (``RunInfo``, ``JobInfo``, ...).

Failure modes (both readers): ``NotFound`` for an unknown run or job, ``InvalidInput`` for a
bad filter, ``StoreUnavailable`` when the database or the dashboard cannot be reached; over
HTTP also ``TrackerError`` with the server's code (``unauthorized``, ``forbidden_scope``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import click

from tracker.cli.common import open_store, uri_option
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
from tracker.store.checkpoints import list_checkpoints
from tracker.store.events import list_events
from tracker.store.metrics import metric_history, metric_keys
from tracker.store.runs import get_run

if TYPE_CHECKING:  # the store (and SQLAlchemy) load only when a command runs
    from tracker.store import Store

__all__ = ["POINTS_PAGE", "Reader", "StoreReader", "open_reader", "reader_options"]

POINTS_PAGE = 10_000  # metric points per read when exporting (one request over HTTP)

token_option = click.option(
    "--token",
    envvar="TRACKER_TOKEN",
    default=None,
    help="Access token when --uri is a dashboard's http://host:port (default: TRACKER_TOKEN); "
    "a `log` token is enough to read.",
)


def reader_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--uri`` (database URL or dashboard http://host:port) and ``--token``."""
    return uri_option(token_option(f))


class Reader(Protocol):
    """What the read commands read. ``where`` names the source for messages."""

    where: str

    def search_runs(
        self, query: str, project: str | None, status: str | None, tag: str | None, limit: int
    ) -> list[RunInfo]:
        """Up to ``limit`` runs, newest first, matching the dashboard's query language."""
        ...

    def run(self, run_id: int) -> RunInfo: ...

    def checkpoints(self, run_id: int) -> list[CheckpointInfo]: ...

    def events(self, run_id: int) -> list[RunEventInfo]: ...

    def metric_keys(self, run_id: int) -> list[str]: ...

    def metric_points(self, run_id: int, key: str) -> Iterator[MetricPoint]:
        """Every point of one metric of a run, by step (read a page at a time)."""
        ...

    def jobs(self, statuses: Sequence[str], project: str | None, limit: int) -> list[JobInfo]: ...

    def job(self, job_id: int) -> JobInfo: ...

    def attempts(self, job_id: int) -> list[JobAttemptInfo]: ...

    def logs_after(
        self, job_id: int, after: int, attempt: int | None, stream: str | None, limit: int
    ) -> list[LogChunk]: ...

    def workers(self, include_stopped: bool, include_lost: bool) -> list[WorkerInfo]: ...

    def artifacts(self, run_id: int, prefix: str) -> list[ArtifactInfo]:
        """The run's artifacts under ``prefix``, sorted by path."""
        ...

    def artifact(self, run_id: int, path: str) -> ArtifactInfo: ...

    def open_artifact(self, run_id: int, path: str) -> BinaryIO:
        """The artifact's bytes as a stream (close it)."""
        ...


def open_reader(
    uri: str | None, token: str | None = None, *, artifact_root: str | None = None
) -> Reader:
    """A reader of ``uri``: over HTTP for ``http(s)://``, else through the store (which a
    read command opens as every command does; ``artifact_root`` is its artifact root)."""
    from tracker.cli.remote import HttpReader, is_http

    if is_http(uri):
        assert uri is not None  # is_http says so; for mypy
        return HttpReader(uri, token)
    store = open_store(uri)
    store.artifact_root = artifact_root
    return StoreReader(store)


class StoreReader:
    """:class:`Reader` over a database (the store's own queries)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.where = store.uri

    def search_runs(
        self, query: str, project: str | None, status: str | None, tag: str | None, limit: int
    ) -> list[RunInfo]:
        from tracker.store.run_reads import runs_by_ids
        from tracker.store.run_search import MAX_LIMIT, RunSearch, search_runs

        spec = RunSearch(query, project, status, (tag,) if tag else (), sort="id", order="desc")
        ids: list[int] = []
        while len(ids) < limit:
            size = min(MAX_LIMIT, limit - len(ids))
            page = search_runs(self.store, dataclasses.replace(spec, limit=size, offset=len(ids)))
            ids.extend(r.id for r in page.runs)
            if len(page.runs) < size:
                break
        return runs_by_ids(self.store, ids)

    def run(self, run_id: int) -> RunInfo:
        return get_run(self.store, run_id)

    def checkpoints(self, run_id: int) -> list[CheckpointInfo]:
        return list_checkpoints(self.store, run_id)

    def events(self, run_id: int) -> list[RunEventInfo]:
        return list_events(self.store, run_id)

    def metric_keys(self, run_id: int) -> list[str]:
        return metric_keys(self.store, run_id)

    def metric_points(self, run_id: int, key: str) -> Iterator[MetricPoint]:
        lo = 0
        while True:
            page = metric_history(self.store, run_id, key, lo=lo, limit=POINTS_PAGE)
            yield from page
            if len(page) < POINTS_PAGE:
                return
            lo = page[-1].step + 1

    def jobs(self, statuses: Sequence[str], project: str | None, limit: int) -> list[JobInfo]:
        from tracker.store.jobs import list_jobs

        return list_jobs(self.store, status=list(statuses) or None, project=project, limit=limit)

    def job(self, job_id: int) -> JobInfo:
        from tracker.store.jobs import get_job

        return get_job(self.store, job_id)

    def attempts(self, job_id: int) -> list[JobAttemptInfo]:
        from tracker.store.jobs import attempts

        return attempts(self.store, job_id)

    def logs_after(
        self, job_id: int, after: int, attempt: int | None, stream: str | None, limit: int
    ) -> list[LogChunk]:
        from tracker.store import logs

        return logs.logs_after(
            self.store, job_id, after=after, attempt=attempt, stream=stream, limit=limit
        )

    def workers(self, include_stopped: bool, include_lost: bool) -> list[WorkerInfo]:
        from tracker.store.workers import list_workers

        return list_workers(self.store, include_stopped=include_stopped, include_lost=include_lost)

    def artifacts(self, run_id: int, prefix: str) -> list[ArtifactInfo]:
        from tracker.store.artifacts import list_artifacts

        return list_artifacts(self.store, run_id, prefix)

    def artifact(self, run_id: int, path: str) -> ArtifactInfo:
        from tracker.store.artifacts import get_artifact

        return get_artifact(self.store, run_id, path)

    def open_artifact(self, run_id: int, path: str) -> BinaryIO:
        from tracker.store.artifacts import open_artifact

        return open_artifact(self.store, run_id, path)
