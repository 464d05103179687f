"""The ingest side of the API, used by the client's HTTP sink: parse and check the JSON the
sink sends, then hand it to the Store. Writes are idempotent where the SQL sink's are
(metric points: the same (run, key, step) written twice keeps one row, the last value).

Metric batches are ``{"records": [[step, wall_ms, {key: value}], ...]}`` -- the client's
``Record`` tuples as JSON arrays. Values are JSON numbers; NaN and ±Inf travel as the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (or ``null`` for NaN), since JSON has no such numbers
(the wire form of :mod:`tracker.rules.jsonvalues`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tracker.entities import FINAL_RUN_STATUSES
from tracker.errors import InvalidInput, InvalidMetricValue
from tracker.rules import jsonvalues
from tracker.rules.config import normalize_config
from tracker.rules.keys import check_key
from tracker.rules.tags import check_tags
from tracker.store import Store
from tracker.web.core.fields import body_field

__all__ = [
    "CHECKPOINT_STATES",
    "MetricIngest",
    "checkpoint_args",
    "create_run_args",
    "event_args",
    "finish_run_args",
    "start_run_args",
]

CHECKPOINT_STATES = ("ok", "missing", "corrupt")
MAX_RECORDS = 1_000_000
MAX_STEP = 2**62


class MetricIngest:
    """Turns metric batches into point rows. Caches interned key ids and known run ids for
    the process (ids never change; runs are never deleted while a server runs)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._key_ids: dict[str, int] = {}
        self._known_runs: set[int] = set()

    def write(self, run_id: int, body: Mapping[str, Any]) -> int:
        """Store a batch; returns the number of points.

        Raises:
            NotFound (404): no such run.
            InvalidInput / InvalidMetricKey / InvalidMetricValue (400): naming the record.
            StoreUnavailable (503): the database is unreachable; the client retries.
        """
        records = body.get("records")
        if not isinstance(records, list):
            raise InvalidInput(
                "records must be a list of [step, wall_ms, {key: value}]", field="records"
            )
        if len(records) > MAX_RECORDS:
            raise InvalidInput(f"at most {MAX_RECORDS} records per request", field="records")
        self.require_run(run_id)
        self._intern(_check_records(records))
        rows, last = self._rows(run_id, records)
        self.store.write_points(rows, last)
        return len(rows)

    def require_run(self, run_id: int) -> None:
        """Raises NotFound (404) when there is no run ``run_id``."""
        if run_id not in self._known_runs:
            self.store.get_run(run_id)
            self._known_runs.add(run_id)

    def _intern(self, names: set[str]) -> None:
        missing = [n for n in names if n not in self._key_ids]
        for name in missing:
            check_key(name)
        if missing:
            self._key_ids.update(self.store.intern_keys(missing))

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
    """Keyword arguments for ``Store.create_run`` from a ``POST /runs`` body."""
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
    """Keyword arguments for ``Store.start_run`` from a ``POST /runs/<id>/start`` body.

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
