"""Where the client's data goes: the Sink interface and the SQL sink.

A sink is injected into a Run, so tests and tools can pass their own. ``SqlSink`` writes to
the store directly (this is the one client module that imports the store, and only lazily);
the HTTP sink (``TRACKER_URI=http://...``) talks to the dashboard's ingest API with the same
methods. A sink raises ``StoreUnavailable`` when its store cannot be reached right now (the
writer keeps the batch and retries); any other error stops the writer.

Metric batches are lists of records ``(step, wall_ms, {key: float})``; values are plain
floats, NaN and ±Inf included. ``write_metrics`` must be idempotent: the writer retries a
batch whose outcome it does not know.

A process a worker started for a job writes with the job's attempt (``fence``, set by
``tracker.init`` from ``TRACKER_JOB_ID``/``TRACKER_ATTEMPT``): once another attempt took the
job over, the store refuses its points, events, heartbeats and status changes with
``AttemptSuperseded`` (see :mod:`tracker.store.fencing`), and the writer stops.
"""

from __future__ import annotations

import itertools
import logging
import operator
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from tracker.entities import AttemptFence, CheckpointInfo, RunInfo
from tracker.rules.throttle import Throttle

_log = logging.getLogger(__name__)
DIAGNOSE_EVERY_S = 10.0  # live diagnoses of a run written through the SQL sink
SETTLE_BUDGET_S = 0.5  # rollup refresh per idle writer cycle (tracker.store.points)

Record = tuple[int, int, dict[str, float]]


# A batch of at least this many log() records, each with the same keys and steps strictly
# increasing (a training loop logging faster than the writer's flush interval), is stored
# as packed chunks with its rollups (tracker.store.chunks.write_packed): no row per point,
# no rollup refresh later. Smaller or irregular batches go in as rows (sealed once the run
# has ended).
PACK_MIN_RECORDS = 1_024
_STEP, _WALL, _ITEMS = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _packed(run_id: int, key_ids: dict[str, int], records: Sequence[Record]) -> list[Any]:
    """``(run_id, key_id, Points)`` per key of ``records`` when they can be packed, else [].

    Per record only C-level iteration (``map``, ``np.fromiter``): the writer runs this over
    every record of a tight loop, beside the training thread's GIL (105 -> 37 ms per 100,000
    10-key records)."""
    n = len(records)
    dicts = list(map(_ITEMS, records))
    keys = tuple(dicts[0])
    k = len(keys)
    # Every dict has k keys and each of ``keys`` (else ``get`` raises KeyError): the same
    # keys, in whatever order; ``get`` takes the values in ``keys``' order.
    if not k or list(map(len, dicts)).count(k) != n:
        return []
    import numpy as np

    from tracker.rules.chunk_codec import Points

    steps = np.fromiter(map(_STEP, records), np.int64, n)
    if steps[0] < 0 or not bool((steps[1:] > steps[:-1]).all()):
        return []
    walls = np.fromiter(map(_WALL, records), np.int64, n)
    get = operator.itemgetter(*keys) if k > 1 else lambda d: (d[keys[0]],)
    try:
        flat = np.fromiter(itertools.chain.from_iterable(map(get, dicts)), np.float64, n * k)
    except (KeyError, TypeError, ValueError):  # other keys, or a value that is not a number
        return []
    columns = flat.reshape(n, k).T.copy()  # one contiguous row per key
    return [
        (run_id, key_ids[key], Points.of(steps, columns[i], walls)) for i, key in enumerate(keys)
    ]


class Sink(Protocol):
    def create_run(self, project: str, name: str | None, config: dict[str, Any],
                   tags: Sequence[str], **attrs: Any) -> RunInfo: ...  # fmt: skip
    def start_run(self, run_id: int, config: dict[str, Any] | None, **attrs: Any) -> RunInfo: ...
    def write_metrics(self, run_id: int, records: Sequence[Record]) -> None: ...
    def settle(self) -> bool | None: ...  # False: rollups left to refresh, call again
    # the answer: what the store asks of the run, e.g. {"profile": {...}}; None for nothing
    def heartbeat(self, run_id: int) -> dict[str, Any] | None: ...
    # a follower rank's heartbeat: the same answer, nothing written, no doctor
    def control(self, run_id: int) -> dict[str, Any] | None: ...
    def report_profile(self, run_id: int, profile_id: int, body: dict[str, Any]) -> None: ...
    def finish_run(self, run_id: int, status: str, **attrs: Any) -> None: ...
    def add_event(self, run_id: int, kind: str, message: str,
                  data: dict[str, Any] | None = None) -> None: ...  # fmt: skip
    def add_checkpoint(self, run_id: int, step: int, path: str, size: int, sha256: str,
                       metrics: dict[str, Any]) -> CheckpointInfo: ...  # fmt: skip
    def list_checkpoints(self, run_id: int) -> list[CheckpointInfo]: ...
    def set_checkpoint_state(self, checkpoint_id: int, state: str) -> None: ...
    def put_artifact(self, run_id: int, path: str, data: bytes | Path, *,
                     media_type: str | None = None, step: int | None = None,
                     meta: dict[str, Any] | None = None) -> None: ...  # fmt: skip
    def close(self) -> None: ...


class SqlSink:
    """Writes straight into a SQL store (SQLite or PostgreSQL)."""

    def __init__(self, store: Any, fence: AttemptFence | None = None) -> None:
        self.store = store
        self.fence = fence  # the job attempt this process writes for, if a worker started it
        self._key_ids: dict[str, int] = {}
        # Step ranges written since the last rollup refresh: the writer refreshes the chart
        # rollups once it is idle (settle), not inside every ingest transaction.
        self._dirty: dict[tuple[int, int], tuple[int, int]] = {}
        # One settle() refreshes for about this long (the writer comes back between calls).
        self.settle_budget_s = SETTLE_BUDGET_S
        self.settle_chunk_points: int | None = None  # None: the store's default
        # batches of this many records or more are stored packed (None: always rows)
        self.pack_min_records: int | None = PACK_MIN_RECORDS
        self._log_budgets: dict[int, Any] = {}  # run id -> store.logs.LogBudget
        self._doctor = Throttle()
        self._doctor.wait("doctor", time.monotonic() + DIAGNOSE_EVERY_S)
        # what the doctor's passes judged (tracker.store.diagnoses.DoctorMemory): each point
        # of a loss is judged for spikes by one of them, however fast the run logs
        self._judged: Any = None
        # Gets a failure of the doctor (tracker.client.failsafe); None: logged with its
        # traceback (strict runs, and tools that use a sink without a run)
        self.on_doctor_failure: Callable[[BaseException], None] | None = None

    @classmethod
    def from_uri(cls, uri: str | None = None) -> SqlSink:
        """Raises InheritedRunError for a SQLite file the parent of this forked process has
        open (``tracker.client.fork``)."""
        from tracker.client import fork
        from tracker.store import Store, resolve_uri

        resolved = resolve_uri(uri)
        if resolved.startswith("sqlite:///") and resolved != "sqlite:///:memory:":
            fork.check_sqlite_file(resolved[len("sqlite:///") :].split("?")[0])
        return cls(Store(resolved))

    def create_run(
        self, project: str, name: str | None, config: dict[str, Any], tags: Sequence[str],
        **attrs: Any,
    ) -> RunInfo:  # fmt: skip
        from tracker.store import runs

        return runs.create_run(self.store, project, name, config, tags, **attrs)

    def start_run(self, run_id: int, config: dict[str, Any] | None, **attrs: Any) -> RunInfo:
        from tracker.store import runs

        return runs.start_run(self.store, run_id, config=config, fence=self.fence, **attrs)

    def write_metrics(self, run_id: int, records: Sequence[Record]) -> None:
        key_ids = self._key_ids
        names: set[str] = set()
        for _, _, items in records:
            names.update(items)
        missing = names.difference(key_ids)
        if missing:
            from tracker.store import metrics

            key_ids.update(metrics.intern_keys(self.store, missing))
        least = self.pack_min_records
        packed = _packed(run_id, key_ids, records) if least and len(records) >= least else []
        rows = (
            []
            if packed
            else [
                (run_id, key_ids[k], step, wall_ms, v)
                for step, wall_ms, items in records
                for k, v in items.items()
            ]
        )
        # Per record, not per point: the newest record holding each key, and one step range
        # for every key of the batch (a wider range only re-reads a few more points).
        last: dict[str, tuple[int, int, int, int, float | None]] = {}
        for step, wall_ms, items in reversed(records):
            for k in items.keys() - last.keys():
                last[k] = (run_id, key_ids[k], step, wall_ms, items[k])
            if len(last) == len(names):
                break
        steps = [r[0] for r in records]
        span = (min(steps), max(steps))
        # packed series get their rollups in their own transaction
        bounds = {} if packed else {(run_id, key_ids[k]): span for k in names}
        from tracker.store import metrics

        metrics.write_points(
            self.store,
            rows,
            list(last.values()),
            bounds,
            refresh_rollups=False,
            fence=self.fence,
            packed=packed,
        )
        dirty = self._dirty
        for key, (lo, hi) in bounds.items():
            seen = dirty.get(key)
            dirty[key] = (lo, hi) if seen is None else (min(lo, seen[0]), max(hi, seen[1]))

    def settle(self) -> bool:
        """Refresh the chart rollups of what was written since the last call, for about
        ``settle_budget_s`` seconds in short transactions; True once all are current.

        Raises:
            StoreUnavailable: the store is away; the ranges are kept for the next call.
        """
        if self._dirty:
            dirty = self._dirty
            self._dirty = {}
            from tracker.store import metrics

            try:
                left = metrics.refresh_rollups(
                    self.store,
                    dirty,
                    chunk_points=self.settle_chunk_points,
                    budget_s=self.settle_budget_s,
                )
            except BaseException:
                left = dirty  # refreshing again is exact, so keep every range
                raise
            finally:
                for key, (lo, hi) in left.items():  # merged with what came in meanwhile
                    seen = self._dirty.get(key)
                    self._dirty[key] = (
                        (lo, hi) if seen is None else (min(lo, seen[0]), max(hi, seen[1]))
                    )
        return not self._dirty

    def heartbeat(self, run_id: int) -> dict[str, Any] | None:
        from tracker.store import profiles, runs

        runs.heartbeat(self.store, run_id, fence=self.fence)
        now = time.monotonic()
        if self._doctor.due("doctor", now):  # live doctor, off the training thread
            self._diagnose(run_id, final=False)
            # at most ~10% of the writer's time for a big run (the one throttle)
            self._doctor.ran("doctor", now, time.monotonic() - now, DIAGNOSE_EVERY_S)
        return profiles.control(self.store, run_id)

    def control(self, run_id: int) -> dict[str, Any] | None:
        from tracker.store import profiles

        return profiles.control(self.store, run_id)

    def report_profile(self, run_id: int, profile_id: int, body: dict[str, Any]) -> None:
        from tracker.store import profiles

        profiles.report(self.store, run_id, profile_id, body)

    def finish_run(self, run_id: int, status: str, **attrs: Any) -> None:
        from tracker.store import runs

        runs.finish_run(self.store, run_id, status, fence=self.fence, **attrs)
        self._diagnose(run_id, final=True)

    def _diagnose(self, run_id: int, *, final: bool) -> None:
        """Run the doctor over the stored run (tracker.store.diagnoses); a failure of the
        doctor goes to ``on_doctor_failure`` (else it is logged) and never fails the
        training script."""
        from tracker.errors import StoreUnavailable
        from tracker.store import diagnoses

        if self._judged is None:
            self._judged = diagnoses.DoctorMemory(whole_runs=True)
        try:
            diagnoses.diagnose_run(self.store, run_id, final=final, memory=self._judged)
        except StoreUnavailable:
            raise
        except Exception as exc:
            if self.on_doctor_failure is not None:
                self.on_doctor_failure(exc)
                return
            _log.exception("run %s: the doctor failed; `tracker doctor %s` retries", run_id, run_id)

    def add_event(
        self, run_id: int, kind: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        from tracker.store import events

        events.add_event(self.store, run_id, kind, message, data, fence=self.fence)

    def add_checkpoint(
        self, run_id: int, step: int, path: str, size: int, sha256: str, metrics: dict[str, Any]
    ) -> CheckpointInfo:
        from tracker.store import checkpoints

        return checkpoints.add_checkpoint(self.store, run_id, step, path, size, sha256, metrics)

    def list_checkpoints(self, run_id: int) -> list[CheckpointInfo]:
        from tracker.store import checkpoints

        return checkpoints.list_checkpoints(self.store, run_id)

    def set_checkpoint_state(self, checkpoint_id: int, state: str) -> None:
        from tracker.store import checkpoints

        checkpoints.set_checkpoint_state(self.store, checkpoint_id, state)

    def put_artifact(
        self, run_id: int, path: str, data: bytes | Path, *, media_type: str | None = None,
        step: int | None = None, meta: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """Store a file of the run (``tracker.store.artifacts``): idempotent for one path."""
        from tracker.store.artifacts import put_artifact

        put_artifact(self.store, run_id, path, data, media_type=media_type, step=step, meta=meta)

    def append_logs(self, run_id: int, lines: Sequence[tuple[str, float, str]],
                    max_chars: int) -> None:  # fmt: skip
        """Store console lines of a run started by hand, keeping its newest ``max_chars``."""
        from tracker.store import logs

        budget = self._log_budgets.get(run_id)
        if budget is None:
            budget = self._log_budgets[run_id] = logs.LogBudget(max_chars)
        logs.append_run(self.store, run_id, lines, budget)

    def close(self) -> None:
        self.store.close()


def sink_for_uri(uri: str | None = None) -> Sink:
    """The sink for ``TRACKER_URI`` (or the given URI): HTTP for http(s) URLs, else SQL.

    The store (and SQLAlchemy) is imported only for a SQL sink, so a training host that
    logs over HTTP never loads it.

    Raises:
        InvalidInput: the URI is neither http(s) nor a supported SQL URL.
        StoreUnavailable / SchemaError: the SQL store cannot be opened or upgraded.
    """
    raw = uri or os.environ.get("TRACKER_URI") or ""
    if raw.startswith(("http://", "https://")):
        from tracker.client.http_sink import HttpSink

        return HttpSink(raw)
    return SqlSink.from_uri(uri)
