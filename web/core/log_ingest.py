"""Console output sent by the client's HTTP sink: ``POST /api/v1/runs/<id>/logs``.

A script run by hand with ``TRACKER_URI=http://...`` tees its stdout/stderr
(``tracker/client/console.py``); the sink posts what it captured as
``{"chunks": [[stream, wall_time, text], ...], "max_chars": N}``: ``stream`` is ``stdout``,
``stderr`` or ``meta`` (the client's own notes), ``wall_time`` epoch seconds, ``text`` the
output with its newlines (a NUL character, which PostgreSQL cannot store, becomes U+FFFD;
a text longer than the store's chunk size is cut into chunks of that size).
They are stored as the SQL sink stores them (``tracker.store.logs.append_run``, same
chunks, same trimming): the run keeps its newest ``max_chars`` characters (default
``DEFAULT_MAX_CHARS``, at most ``MAX_CHARS_LIMIT``); older chunks are deleted and a ``meta``
marker says how much was trimmed.

Limits, checked on the parsed JSON before anything is stored (the body itself is bounded
while it is read and inflated, see ``tracker.web.plumbing.params``): at most ``MAX_CHUNKS``
chunks per request; every chunk's shape (400 ``invalid_input`` naming ``chunks[i]``). A
bad request stores nothing.

Not idempotent: a request whose answer was lost (timeout, reset) and that the client's
console capture sends again is stored twice (console text is not worth a dedup key).

Budgets: the per-run count of stored characters is read from the store the first time a
process sees a run, then kept (for ``_RUNS_CACHED`` runs, least recently used forgotten).
Two server processes appending to one run each trim by their own count: the run may keep
up to twice its budget (a bound, not a quota), and never less than it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.entities import AttemptFence
from tracker.errors import InvalidInput
from tracker.store import Store
from tracker.store import logs as store_logs

__all__ = [
    "DEFAULT_MAX_CHARS",
    "MAX_CHARS_LIMIT",
    "MAX_CHUNKS",
    "STREAMS",
    "LogBatch",
    "LogIngest",
    "parse_log_batch",
]

STREAMS = ("stdout", "stderr", "meta")
MAX_CHUNKS = 100_000  # per request; the sink sends at most 10,000
DEFAULT_MAX_CHARS = 4 * 1024 * 1024  # the client's default (tracker.client.console)
MAX_CHARS_LIMIT = 1024 * 1024 * 1024  # a run may keep at most 1 Gi characters of output
_RUNS_CACHED = 1024


@dataclass(frozen=True)
class LogBatch:
    """A checked request: lines as ``(stream, wall_time, text)`` and the run's budget."""

    lines: list[tuple[str, float, str]]
    max_chars: int


def parse_log_batch(body: Mapping[str, Any]) -> LogBatch:
    """Check a ``POST /runs/<id>/logs`` body.

    Raises:
        InvalidInput (400): naming the field (``chunks``, ``chunks[i]`` or ``max_chars``) and
            the rule it breaks.
    """
    chunks = body.get("chunks")
    if not isinstance(chunks, list):
        raise InvalidInput(
            "chunks is required: a list of [stream, wall_time, text]", field="chunks"
        )
    if len(chunks) > MAX_CHUNKS:
        raise InvalidInput(
            f"{len(chunks)} chunks in one request; at most {MAX_CHUNKS} are allowed",
            field="chunks",
        )
    max_chars = body.get("max_chars", DEFAULT_MAX_CHARS)
    if type(max_chars) is not int or not 1 <= max_chars <= MAX_CHARS_LIMIT:
        raise InvalidInput(
            f"max_chars {max_chars!r} must be an integer from 1 to {MAX_CHARS_LIMIT}",
            field="max_chars",
        )
    lines: list[tuple[str, float, str]] = []
    for index, chunk in enumerate(chunks):
        where = f"chunks[{index}]"
        if type(chunk) is not list or len(chunk) != 3:
            raise InvalidInput(f"{where} must be [stream, wall_time, text]", field=where)
        stream, at, text = chunk
        if stream not in STREAMS:
            raise InvalidInput(
                f"{where}: stream {stream!r} must be one of {', '.join(STREAMS)}", field=where
            )
        if type(at) not in (int, float) or not 0 <= at < 2**40:
            raise InvalidInput(f"{where}: wall_time {at!r} must be epoch seconds >= 0", field=where)
        if type(text) is not str:
            raise InvalidInput(f"{where}: text must be a string", field=where)
        text = text.replace("\x00", "\ufffd")
        for start in range(0, len(text), store_logs.CHUNK_CHARS):  # trimming needs small chunks
            lines.append((stream, float(at), text[start : start + store_logs.CHUNK_CHARS]))
    return LogBatch(lines, max_chars)


class LogIngest:
    """Appends console output of runs started by hand, keeping each run's budget."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._budgets: OrderedDict[int, tuple[threading.Lock, store_logs.LogBudget]] = OrderedDict()

    def append(self, run_id: int, batch: LogBatch, fence: AttemptFence | None = None) -> int:
        """Store a checked batch for an existing run; returns the characters stored.

        Raises:
            AttemptSuperseded (409): ``fence`` no longer holds (nothing is stored).
            StoreUnavailable (503): the database is unreachable (nothing is stored; retry).
        """
        if not batch.lines:
            return 0
        run_lock, budget = self._budget(run_id, batch.max_chars)
        with run_lock:
            budget.limit = batch.max_chars
            store_logs.append_run(self.store, run_id, batch.lines, budget, fence)
        return sum(len(text) for _, _, text in batch.lines)

    def _budget(self, run_id: int, limit: int) -> tuple[threading.Lock, store_logs.LogBudget]:
        with self._lock:
            found = self._budgets.get(run_id)
            if found is not None:
                self._budgets.move_to_end(run_id)
                return found
        loaded = (threading.Lock(), store_logs.load_run_budget(self.store, run_id, limit))
        with self._lock:
            found = self._budgets.setdefault(run_id, loaded)
            self._budgets.move_to_end(run_id)
            while len(self._budgets) > _RUNS_CACHED:
                self._budgets.popitem(last=False)
            return found
