"""The ingest side of the API, used by the client's HTTP sink: parse and check the JSON the
sink sends, then hand it to the Store. Writes are idempotent where the SQL sink's are
(metric points: the same (run, key, step) written twice keeps one row, the last value).

Metric batches are ``{"records": [[step, wall_ms, {key: value}], ...]}`` -- the client's
``Record`` tuples as JSON arrays. Values are JSON numbers; NaN and ±Inf travel as the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (or ``null`` for NaN), since JSON has no such numbers
(the wire form of :mod:`tracker.rules.jsonvalues`).

Limits, all checked on the parsed JSON before a key is interned or a point row is built (the
body itself is bounded while it is inflated, see ``tracker.web.plumbing.params``):
``MAX_RECORDS`` records and ``MAX_KEYS_PER_REQUEST`` distinct metric keys per request (400
``invalid_input``), and ``MAX_KEYS_PER_RUN`` distinct keys per run (400 ``too_many_keys``,
naming the run, the count and the limit). The per-run count is read from the store when a
batch brings keys this process has not seen for the run; two processes adding keys to one run
at the same moment can pass the limit by what each adds (a bound, not a quota).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.entities import FINAL_RUN_STATUSES, AttemptFence
from tracker.errors import InvalidInput, InvalidMetricValue
from tracker.rules import jsonvalues
from tracker.rules.config import normalize_config
from tracker.rules.keys import check_key
from tracker.rules.tags import check_tags
from tracker.store import Store
from tracker.store.metrics import append_points, intern_keys, metric_keys, write_points
from tracker.store.runs import get_run
from tracker.web.core.fields import body_field

__all__ = [
    "CHECKPOINT_STATES",
    "MAX_KEYS_PER_REQUEST",
    "MAX_KEYS_PER_RUN",
    "MAX_RECORDS",
    "MetricBatch",
    "MetricIngest",
    "TooManyKeys",
    "attempt_fence",
    "checkpoint_args",
    "create_run_args",
    "event_args",
    "finish_run_args",
    "start_run_args",
]

CHECKPOINT_STATES = ("ok", "missing", "corrupt")
MAX_RECORDS = 100_000  # per request; the HTTP sink sends at most 20,000 points per request
MAX_KEYS_PER_REQUEST = 10_000  # distinct metric keys in one request
MAX_KEYS_PER_RUN = 10_000  # distinct metric keys one run may have
MAX_STEP = 2**62
_RUN_KEYS_CACHED = 1024  # runs whose key names a process keeps to check MAX_KEYS_PER_RUN


class TooManyKeys(InvalidInput):
    """A batch would give a run more than ``MAX_KEYS_PER_RUN`` distinct metric keys."""

    code = "too_many_keys"


@dataclass(frozen=True)
class MetricBatch:
    """A checked batch: the run exists, every record has the right shape, the key limits
    hold. Only :meth:`MetricIngest.store` writes it."""

    run_id: int
    records: list[Any]
    names: frozenset[str]


class MetricIngest:
    """Turns metric batches into point rows. Caches interned key ids and known run ids for
    the process (ids never change; runs are never deleted while a server runs)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._key_ids: dict[str, int] = {}
        self._known_runs: set[int] = set()
        self._run_keys: dict[int, set[str]] = {}  # keys each run is known to have

    def write(self, run_id: int, body: Mapping[str, Any], fence: AttemptFence | None = None) -> int:
        """Check and store a batch; returns the number of points.

        Raises: as :meth:`check` and :meth:`store_batch`.
        """
        return self.store_batch(self.check(run_id, body), fence)

    def check(self, run_id: int, body: Mapping[str, Any]) -> MetricBatch:
        """Everything that can refuse a batch, before anything is written.

        Raises:
            NotFound (404): no such run.
            InvalidInput / InvalidMetricKey (400): naming the record, or a limit passed.
            TooManyKeys (400 ``too_many_keys``): the run would pass ``MAX_KEYS_PER_RUN``.
            StoreUnavailable (503): the database is unreachable; the client retries.
        """
        records = body.get("records")
        if not isinstance(records, list):
            raise InvalidInput(
                "records must be a list of [step, wall_ms, {key: value}]", field="records"
            )
        if len(records) > MAX_RECORDS:
            raise InvalidInput(
                f"{len(records)} records in one request; at most {MAX_RECORDS} are allowed",
                field="records",
            )
        names = _check_records(records)
        if len(names) > MAX_KEYS_PER_REQUEST:
            raise InvalidInput(
                f"{len(names)} distinct metric keys in one request; at most "
                f"{MAX_KEYS_PER_REQUEST} are allowed",
                field="records",
            )
        self.require_run(run_id)
        self._check_run_keys(run_id, names)
        for name in names:
            if name not in self._key_ids:
                check_key(name)
        return MetricBatch(run_id, records, frozenset(names))

    def store_batch(
        self, batch: MetricBatch, fence: AttemptFence | None = None, *, append: bool = False
    ) -> int:
        """Store a checked batch; returns the number of points. With ``append`` (the MLflow
        route) every value of a step is kept and an exact repeat is skipped
        (``tracker.store.metrics.append_points``); otherwise the same step again overwrites.

        Raises:
            InvalidMetricValue (400): a value that is no number (nothing is stored).
            AttemptSuperseded (409): ``fence`` no longer holds (nothing is stored).
            StoreUnavailable (503): the database is unreachable; the client retries.
        """
        self._intern(batch.names)
        rows, last = self._rows(batch.run_id, batch.records)
        if append:
            append_points(self.store, rows)
        else:
            write_points(self.store, rows, last, fence=fence)
        known = self._run_keys.get(batch.run_id)
        if known is not None:
            known.update(batch.names)
        return len(rows)

    def _check_run_keys(self, run_id: int, names: set[str]) -> None:
        known = self._run_keys.get(run_id)
        if known is not None and names <= known:
            return
        known = set(metric_keys(self.store, run_id))
        self._run_keys.pop(run_id, None)
        if len(self._run_keys) >= _RUN_KEYS_CACHED:  # forget the least recently read run
            del self._run_keys[next(iter(self._run_keys))]
        self._run_keys[run_id] = known
        count = len(known | names)
        if count > MAX_KEYS_PER_RUN:
            raise TooManyKeys(
                f"run {run_id} would have {count} distinct metric keys; at most "
                f"{MAX_KEYS_PER_RUN} are allowed per run ({len(names - known)} new in this "
                "request)",
                field="records",
            )

    def require_run(self, run_id: int) -> None:
        """Raises NotFound (404) when there is no run ``run_id``."""
        if run_id not in self._known_runs:
            get_run(self.store, run_id)
            self._known_runs.add(run_id)

    def _intern(self, names: frozenset[str]) -> None:
        missing = [n for n in names if n not in self._key_ids]
        if missing:
            self._key_ids.update(intern_keys(self.store, missing))

    def _rows(self, run_id: int, records: list[Any]) -> tuple[list[Any], list[Any]]:
        key_ids = self._key_ids
        rows: list[tuple[int, int, int, int, float | None]] = []
        append = rows.append
        last: dict[int, tuple[int, int, int, int, float | None]] = {}
        for index, (step, wall, items) in enumerate(records):
            wall_ms = int(wall)
            for key, value in items.items():
                kind = type(value)
                if kind is float:
                    v = None if value != value else value
                elif kind is int:
                    v = float(value)
                else:
                    v = _special(value, index, key)
                row = (run_id, key_ids[key], step, wall_ms, v)
                append(row)
                prev = last.get(row[1])
                if prev is None or step >= prev[2]:
                    last[row[1]] = row
        return rows, list(last.values())


def attempt_fence(header: str | None) -> AttemptFence | None:
    """The ``X-Tracker-Attempt: <job id>:<attempt>`` header of a worker's job, if sent.

    Raises InvalidInput (400) naming the header when it is malformed.
    """
    if header is None:
        return None
    job, sep, attempt = header.partition(":")
    if not (sep and job.isdigit() and attempt.isdigit() and len(header) <= 40):
        raise InvalidInput(
            f"X-Tracker-Attempt {header[:60]!r}: must be <job id>:<attempt>",
            field="X-Tracker-Attempt",
        )
    return AttemptFence(int(job), int(attempt))


def _check_records(records: list[Any]) -> set[str]:
    """Check the shape of every record; returns the metric names used."""
    names: set[str] = set()
    for index, record in enumerate(records):
        if type(record) is not list or len(record) != 3:
            raise InvalidInput(
                f"records[{index}] must be [step, wall_ms, {{key: value}}]", field="records"
            )
        step, wall, items = record
        if type(step) is not int or not 0 <= step <= MAX_STEP:
            raise InvalidInput(
                f"records[{index}]: step {step!r} must be an integer from 0 to 2**62",
                field="step",
            )
        if type(wall) not in (int, float) or not 0 <= wall < 2**62:
            raise InvalidInput(
                f"records[{index}]: wall_ms {wall!r} must be epoch milliseconds >= 0",
                field="wall_ms",
            )
        if type(items) is not dict:
            raise InvalidInput(f"records[{index}]: metrics must be an object", field="records")
        names.update(items)
    return names


def _special(value: Any, index: int, key: str) -> float | None:
    if value is None:
        return None
    special = jsonvalues.decode_special(value) if type(value) is str else None
    if special is not None:
        return None if math.isnan(special) else special  # the store keeps NaN as NULL
    raise InvalidMetricValue(
        f"records[{index}]: metric {key!r} has value {value!r}; send a number, null or one of "
        '"NaN", "Infinity", "-Infinity"',
        field=key,
    )


# --------------------------------------------------------------- run lifecycle


def _str(body: Mapping[str, Any], name: str, max_len: int, *, required: bool = False) -> Any:
    value = body_field(body, name, str, required=required)
    if value is not None and len(value) > max_len:
        raise InvalidInput(f"{name} is longer than {max_len} characters", field=name)
    return value


def _attrs(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "host": _str(body, "host", 255),
        "pid": body_field(body, "pid", int),
        "git_commit": _str(body, "git_commit", 64),
    }


def _command(body: Mapping[str, Any]) -> list[str] | None:
    """The command line the process reports, stored for display. Never launchable: clones
    and schedules copy a submitted job, never a run's command (``tracker.store.clone``)."""
    command = body_field(body, "command", list)
    if command is not None and not all(isinstance(a, str) for a in command):
        raise InvalidInput("command must be a list of strings", field="command")
    return command


def _config(body: Mapping[str, Any]) -> dict[str, Any] | None:
    config = body_field(body, "config", dict)
    return None if config is None else normalize_config(config)


def create_run_args(body: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``tracker.store.runs.create_run`` from a ``POST /runs`` body."""
    tags = check_tags(body_field(body, "tags", list, default=[]))
    status = body_field(body, "status", str, default="running")
    if status not in ("running", "queued"):
        raise InvalidInput("status of a new run must be running or queued", field="status")
    project = _str(body, "project", 200) or "default"
    return {
        "project": project,
        "name": _str(body, "name", 250),
        "config": _config(body) or {},
        "tags": tags,
        "status": status,
        "command": _command(body),
        **_attrs(body),
    }


def start_run_args(body: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``tracker.store.runs.start_run`` from a ``POST /runs/<id>/start`` body.

    A ``command`` field is ignored (clients before issue 9 send one): a run's command is
    set when the run is created and never changed afterwards.
    """
    return {"config": _config(body), **_attrs(body)}


def finish_run_args(body: Mapping[str, Any]) -> dict[str, Any]:
    status = body_field(body, "status", str, required=True)
    if status not in FINAL_RUN_STATUSES:
        raise InvalidInput(
            f"status {status!r}: a run finishes as one of {', '.join(FINAL_RUN_STATUSES)}",
            field="status",
        )
    return {
        "status": status,
        "exit_code": body_field(body, "exit_code", int),
        "error": _str(body, "error", 100_000),
        "failure_class": _str(body, "failure_class", 64),
        "failure_hint": _str(body, "failure_hint", 10_000),
    }


def event_args(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": _str(body, "kind", 32, required=True),
        "message": _str(body, "message", 100_000, required=True),
        "data": body_field(body, "data", dict),
    }


def checkpoint_args(body: Mapping[str, Any]) -> dict[str, Any]:
    step = body_field(body, "step", int, required=True)
    size = body_field(body, "bytes", int, required=True)
    if step < 0 or size < 0:
        raise InvalidInput("step and bytes must be >= 0", field="step" if step < 0 else "bytes")
    sha = _str(body, "sha256", 64, required=True)
    metrics = body_field(body, "metrics", dict, default={})
    return {
        "step": step,
        "path": _str(body, "path", 4096, required=True),
        "size": size,
        "sha256": sha,
        "metrics": metrics,
    }


def checkpoint_state(body: Mapping[str, Any]) -> str:
    state = body_field(body, "state", str, required=True)
    if state not in CHECKPOINT_STATES:
        raise InvalidInput(f"state must be one of {', '.join(CHECKPOINT_STATES)}", field="state")
    return state
