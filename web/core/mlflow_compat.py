"""Pure mapping between MLflow's tracking REST API and the tracker's model (no I/O, no Flask).

MLflow's words and ours (documented in ``web/API.md``, section "MLflow compatibility"):

* experiment = project; ``experiment_id`` is the project id as a string. MLflow's "Default"
  experiment (id ``"0"``) is our project ``default``.
* run = run; ``run_id`` is the run's integer id as a string (the client accepts any
  ``[A-Za-z0-9][\\w-]*`` id, so no 32-hex encoding is needed).
* params = top-level run config keys holding strings (MLflow params are strings; reading a run
  that was not logged through MLflow flattens its config with dots and ``str()``s the values).
* tags: user tags become our run tags ``"key=value"`` (searchable like any tag); MLflow's own
  ``mlflow.*`` tags are provenance, kept verbatim in the config under ``_mlflow_tags``;
  ``mlflow.runName`` is the run's name, ``mlflow.source.git.commit`` also sets its git commit,
  ``mlflow.note.content`` (MLflow's run description) is the run's notes, which the dashboard
  and ``tracker runs note`` edit too.
* metrics = metric points: ``(key, step)`` is unique, the last value logged wins; keys follow
  the tracker's key rule (``tracker.client.values.check_key``); NaN and ±Inf are kept.

Errors on these routes use MLflow's shape ``{"error_code": "...", "message": "..."}``: the one
deliberate exception to the tracker's error envelope, because the MLflow client reads it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tracker.entities import MetricSummary, RunInfo, RunMeta
from tracker.errors import TrackerError
from tracker.rules import jsonvalues
from tracker.rules.annotations import NOTE_TAG, check_notes
from tracker.rules.config import flatten
from tracker.rules.ids import ascii_int, in_int64, parse_id
from tracker.rules.keys import check_key
from tracker.rules.mlflow_filter import like_match
from tracker.rules.tags import join_tag, split_tag, tag_key
from tracker.web.core.ingest import MAX_RECORDS

__all__ = [
    "DEFAULT_EXPERIMENT_ID",
    "DEFAULT_EXPERIMENT_NAME",
    "DEFAULT_PROJECT",
    "INPUTS_KEY",
    "SYSTEM_TAGS_KEY",
    "MlflowError",
    "apply_meta",
    "dataset_inputs_json",
    "default_matches",
    "error_body",
    "experiment_filter",
    "experiment_id_of",
    "experiment_json",
    "experiment_tag_of",
    "int64",
    "lifecycle_stage",
    "metric_json",
    "metric_records",
    "mlflow_params",
    "mlflow_status",
    "mlflow_tags",
    "optional_int64",
    "page_token",
    "params_of",
    "project_name_of",
    "require_active_run",
    "run_id_of",
    "run_info_json",
    "run_json",
    "tags_of",
    "tracker_status",
    "view_type",
    "with_user_id",
]

DEFAULT_EXPERIMENT_ID = "0"
DEFAULT_EXPERIMENT_NAME = "Default"
DEFAULT_PROJECT = "default"
SYSTEM_TAGS_KEY = "_mlflow_tags"  # reserved config key: MLflow's own mlflow.* tags
INPUTS_KEY = "_mlflow_inputs"  # reserved config key: the run's datasets (mlflow.log_input)
USER_ID_KEY = "_mlflow_user_id"  # reserved config key: a run's user_id unlike its mlflow.user tag
RESERVED_KEYS = (SYSTEM_TAGS_KEY, INPUTS_KEY, USER_ID_KEY)
RUN_NAME_TAG = "mlflow.runName"
GIT_COMMIT_TAG = "mlflow.source.git.commit"
USER_TAG = "mlflow.user"

MAX_KEY_LENGTH = 250  # MLflow's limits for param and tag keys and values
MAX_PARAM_LENGTH = 6000
MAX_TAG_LENGTH = 8000
MAX_EXPERIMENT_TAG_LENGTH = 5000
MAX_NAME_LENGTH = 200  # projects.name
MAX_RUN_NAME_LENGTH = 250  # runs.name
MAX_STEP = 2**62
MAX_PAGE_TOKEN = 2**62  # offsets and steps: past any page this server can have
MAX_FILTER_LENGTH = 1000  # an experiments/search filter (a name is at most 200 characters)
MAX_ITEMS = MAX_RECORDS  # metrics per log-batch (the tracker's ingest limit)
MAX_META_ITEMS = 10_000  # params or tags per log-batch

_TO_MLFLOW_STATUS = {
    "queued": "SCHEDULED",
    "running": "RUNNING",
    "finished": "FINISHED",
    "failed": "FAILED",
    "killed": "KILLED",
    "crashed": "FAILED",
}
_FROM_MLFLOW_STATUS = {
    "RUNNING": "running",
    "SCHEDULED": "queued",
    "FINISHED": "finished",
    "FAILED": "failed",
    "KILLED": "killed",
}


# ------------------------------------------------------------------------ errors

# MLflow's HTTP status for its error codes (mlflow.exceptions.ERROR_CODE_TO_HTTP_STATUS).
_MLFLOW_STATUS = {
    "BAD_REQUEST": 400,
    "INVALID_PARAMETER_VALUE": 400,
    "INVALID_STATE": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "INTERNAL_ERROR": 500,
    "NOT_IMPLEMENTED": 501,
    "TEMPORARILY_UNAVAILABLE": 503,
}
# Our error codes (TrackerError.code, or a werkzeug HTTP error's name) -> MLflow's.
_CODE_MAP = {
    "unauthorized": "UNAUTHENTICATED",
    "forbidden": "PERMISSION_DENIED",
    "forbidden_scope": "PERMISSION_DENIED",
    "not_found": "RESOURCE_DOES_NOT_EXIST",
    "conflict": "RESOURCE_ALREADY_EXISTS",
    "store_unavailable": "TEMPORARILY_UNAVAILABLE",
    "unsupported_media_type": "BAD_REQUEST",
    "payload_too_large": "BAD_REQUEST",
    "request_entity_too_large": "BAD_REQUEST",
    "too_many_keys": "INVALID_PARAMETER_VALUE",
    "bad_request": "BAD_REQUEST",
}


class MlflowError(TrackerError):
    """An error that has an exact MLflow error code (``RESOURCE_ALREADY_EXISTS``, ...)."""

    def __init__(self, mlflow_code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.mlflow_code = mlflow_code
        self.code = mlflow_code.lower()
        self.http_status = _MLFLOW_STATUS.get(mlflow_code, 400)


def error_body(code: str, message: str, status: int) -> tuple[dict[str, str], int]:
    """MLflow's error body and HTTP status for one of our errors.

    ``code`` is a ``TrackerError.code``, a werkzeug error's name (``request_entity_too_large``)
    or already an MLflow code (upper case). The HTTP status is kept: the client decides by
    ``error_code``, and retries only 408, 429 and 5xx.
    """
    if code.isupper():
        mlflow_code = code
    elif code in _CODE_MAP:
        mlflow_code = _CODE_MAP[code]
    elif code.startswith("invalid_") or code == "no_active_run":
        mlflow_code = "INVALID_PARAMETER_VALUE"
    elif status >= 500:
        mlflow_code = "INTERNAL_ERROR"
    else:
        mlflow_code = "BAD_REQUEST"
    return {"error_code": mlflow_code, "message": message}, status


def _invalid(message: str, name: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message, field=name)


# ---------------------------------------------------------------------- parsing


def _text(value: Any, name: str, max_len: int) -> str:
    """A required string of at most ``max_len`` characters."""
    if value is None or value == "":
        raise _invalid(f"{name} is required", name)
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a string, not {type(value).__name__}", name)
    if len(value) > max_len:
        raise _invalid(f"{name} has {len(value)} characters; at most {max_len} are allowed", name)
    return value


def int64(value: Any, name: str, default: int) -> int:
    """An int64 field: a JSON integer, or a decimal string (protobuf's JSON form of int64)."""
    found = optional_int64(value, name)
    return default if found is None else found


def optional_int64(value: Any, name: str) -> int | None:
    """``int64`` without a default: ``None`` when absent."""
    if value is None or value == "":
        return None
    number: int | None = None
    if isinstance(value, str):
        number = ascii_int(value)  # ASCII only: '²'.isdigit() is true, int('²') fails
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None:
        raise _invalid(f"{name} must be an integer, not {value!r:.60}", name)
    if not in_int64(number):
        raise _invalid(f"{name}={number:.3g} is out of the int64 range", name)
    return number


def run_id_of(body: Mapping[str, Any]) -> int:
    """The run named by ``run_id`` (or the older ``run_uuid``): our integer id.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): missing, or not one of our run ids.
        (An id that is well-formed but unknown is the store's ``NotFound`` -> 404.)
    """
    raw = body.get("run_id") or body.get("run_uuid")
    if raw is None or raw == "":
        raise _invalid("run_id is required", "run_id")
    text = str(raw).strip()
    run_id = parse_id(text)
    if run_id is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST",
            f"run {text[:64]!r} does not exist: this server's run ids are integers",
            field="run_id",
        )
    return run_id


def experiment_id_of(raw: Any) -> int | None:
    """Our project id for an ``experiment_id``; ``None`` for the Default experiment ``"0"``.

    Raises:
        MlflowError: RESOURCE_DOES_NOT_EXIST for an id that is not an integer.
    """
    text = DEFAULT_EXPERIMENT_ID if raw is None or raw == "" else str(raw).strip()
    number = parse_id(text)
    if number is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST",
            f"experiment {text[:64]!r} does not exist: this server's experiment ids are "
            "integers (project ids)",
            field="experiment_id",
        )
    return None if number == 0 else number


def project_name_of(experiment_name: Any, field: str = "experiment_name") -> str:
    """The project an experiment name means: "Default" is the project ``default``.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): missing, blank, or longer than 200 characters.
    """
    name = _text(experiment_name, field, MAX_NAME_LENGTH).strip()
    if not name:
        raise _invalid(f"{field} must not be blank", field)
    return DEFAULT_PROJECT if name in (DEFAULT_EXPERIMENT_NAME, DEFAULT_PROJECT) else name


_FILTER_RE = re.compile(
    r"""^\s*(?:attributes?\.)?name\s*(=|LIKE|ILIKE)\s*(['"])(.*)\2\s*$""", re.I | re.S
)


def experiment_filter(text: Any) -> tuple[str | None, str | None]:
    """``(exact project name, LIKE pattern)`` for an experiments/search filter.

    Supported: none, ``name = 'x'``, ``name LIKE 'x%'``, ``name ILIKE 'x%'`` (both LIKEs
    are case-insensitive here).

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): any other filter, or one longer than
            ``MAX_FILTER_LENGTH`` (SQLite refuses LIKE patterns past 50,000 bytes).
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return None, None
    if isinstance(text, str) and len(text) > MAX_FILTER_LENGTH:
        raise _invalid(
            f"filter has {len(text)} characters; at most {MAX_FILTER_LENGTH} are allowed",
            "filter",
        )
    found = _FILTER_RE.match(text) if isinstance(text, str) else None
    if found is None:
        raise _invalid(
            f"filter {str(text)[:100]!r} is not supported: this server searches experiments "
            "by name only (name = 'x', name LIKE 'x%')",
            "filter",
        )
    if found.group(1) == "=":
        return project_name_of(found.group(3), "filter"), None
    return None, found.group(3)


_VIEW_TYPES: dict[Any, bool | None] = {
    "ACTIVE_ONLY": False,
    "DELETED_ONLY": True,
    "ALL": None,
    1: False,
    2: True,
    3: None,
}


def view_type(raw: Any, name: str = "view_type") -> bool | None:
    """MLflow's ViewType -> which soft-deleted rows a search returns: ``False`` active only
    (the default), ``True`` deleted only, ``None`` all.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): not a ViewType name or number.
    """
    if raw is None or raw == "":
        return False
    key = raw.upper() if isinstance(raw, str) else raw
    if isinstance(key, str) and key.isdigit():
        key = int(key)
    if isinstance(key, bool) or key not in _VIEW_TYPES:
        raise _invalid(
            f"{name} {raw!r:.40} is not a ViewType: use ACTIVE_ONLY, DELETED_ONLY or ALL", name
        )
    return _VIEW_TYPES[key]


def lifecycle_stage(deleted_at: float | None) -> str:
    """MLflow's lifecycle stage of a run or experiment."""
    return "active" if deleted_at is None else "deleted"


def require_active_run(run_id: int, deleted_at: float | None) -> None:
    """MLflow refuses writes to a deleted run (``SqlAlchemyStore._check_run_is_active``).

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): the run is deleted; restore it first.
    """
    if deleted_at is not None:
        raise _invalid(
            f"The run {run_id} must be in the 'active' state. Current state is deleted.",
            "run_id",
        )


def experiment_tag_of(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(key, value)`` of an experiments/set-experiment-tag request.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): a missing or too long key, a too long value.
    """
    key = _text(body.get("key"), "key", MAX_KEY_LENGTH)
    value = body.get("value")
    value = "" if value is None else value if isinstance(value, str) else str(value)
    if len(value) > MAX_EXPERIMENT_TAG_LENGTH:
        raise _invalid(
            f"experiment tag {key!r}: the value has {len(value)} characters; at most "
            f"{MAX_EXPERIMENT_TAG_LENGTH}",
            "value",
        )
    return key, value


def default_matches(name: str | None, like: str | None) -> bool:
    """Whether MLflow's Default experiment passes an experiments/search filter."""
    if name is not None:
        return name == DEFAULT_PROJECT
    if like is None:
        return True
    return like_match(DEFAULT_EXPERIMENT_NAME, like, case_sensitive=False)


def _metric_value(raw: Any, key: str) -> float:
    if isinstance(raw, bool):
        raise _invalid(f"metric {key!r}: value must be a number, not a boolean", key)
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        special = jsonvalues.decode_special(raw)
        if special is not None:
            return special
        try:
            return float(raw)  # protobuf's JSON also allows numbers as strings
        except ValueError:
            pass
    raise _invalid(
        f"metric {key!r}: value {raw!r:.60} is not a number (NaN and infinities are sent as "
        '"NaN", "Infinity", "-Infinity")',
        key,
    )


def metric_records(metrics: Any, *, now_ms: int) -> list[list[Any]]:
    """MLflow metric objects -> the tracker's ingest records ``[step, wall_ms, {key: value}]``.

    NaN becomes ``None`` and ±Inf the strings the ingest takes (``web/core/ingest.py``).

    Raises:
        InvalidMetricKey: a key breaking the tracker's key rule (MLflow allows spaces, ...).
        MlflowError (INVALID_PARAMETER_VALUE): a missing key, a bad value, step or timestamp.
    """
    if not isinstance(metrics, list):
        raise _invalid("metrics must be a list of {key, value, timestamp, step}", "metrics")
    if len(metrics) > MAX_ITEMS:
        raise _invalid(f"at most {MAX_ITEMS} metrics per request", "metrics")
    records: list[list[Any]] = []
    for item in metrics:
        if not isinstance(item, Mapping):
            raise _invalid("each metric must be an object {key, value, timestamp, step}", "metrics")
        key = check_key(item.get("key"))
        value = _metric_value(item.get("value"), key)
        step = int64(item.get("step"), "step", 0)
        stamp = int64(item.get("timestamp"), "timestamp", now_ms)
        if not 0 <= step <= MAX_STEP:
            raise _invalid(f"metric {key!r}: step {step} must be from 0 to 2**62", "step")
        if not 0 <= stamp < 2**62:
            raise _invalid(f"metric {key!r}: timestamp {stamp} must be epoch ms >= 0", "timestamp")
        records.append([step, stamp, {key: _ingest_value(value)}])
    return records


def _ingest_value(value: float) -> float | str | None:
    return None if math.isnan(value) else jsonvalues.encode_float(value)


def _pairs(items: Any, what: str, max_value: int) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _invalid(f"{what} must be a list of {{key, value}}", what)
    if len(items) > MAX_META_ITEMS:
        raise _invalid(f"at most {MAX_META_ITEMS} {what} per request", what)
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise _invalid(f"each of {what} must be an object {{key, value}}", what)
        key = _text(item.get("key"), f"{what} key", MAX_KEY_LENGTH)
        if "=" in key or "\x00" in key:
            raise _invalid(f"{what} key {key!r} must not contain '=' or NUL", key)
        value = item.get("value")
        value = "" if value is None else value
        if not isinstance(value, str):
            value = str(value)
        if len(value) > max_value:
            raise _invalid(
                f"{what} {key!r}: the value has {len(value)} characters; at most {max_value}",
                key,
            )
        out[key] = value
    return out


def params_of(items: Any) -> dict[str, str]:
    """``[{key, value}]`` params -> ``{key: value}`` (values are strings, as in MLflow).

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): a missing or reserved key, a value too long.
    """
    params = _pairs(items, "params", MAX_PARAM_LENGTH)
    for reserved in RESERVED_KEYS:
        if reserved in params:
            raise _invalid(f"param key {reserved!r} is reserved by this server", "key")
    return params


def tags_of(items: Any) -> dict[str, str]:
    """``[{key, value}]`` tags -> ``{key: value}``.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): a missing key, a key with '=', a value too long.
    """
    return _pairs(items, "tags", MAX_TAG_LENGTH)


def page_token(raw: Any) -> int:
    """Page tokens of this server are decimal offsets (or steps); ``0`` when absent.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): not ASCII digits within ``0..MAX_PAGE_TOKEN``.
    """
    if raw is None or raw == "":
        return 0
    text = str(raw)
    number = ascii_int(text) if text.isascii() and text.isdigit() else None
    if number is None or number > MAX_PAGE_TOKEN:
        raise _invalid(f"page_token {text[:40]!r} is not a token this server issued", "page_token")
    return number


# ------------------------------------------------------------------ run metadata


def mlflow_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The run config as MLflow params: dotted keys, string values, the reserved key left out."""
    flat = flatten({k: v for k, v in config.items() if k not in RESERVED_KEYS})
    return {k: v if isinstance(v, str) else str(v) for k, v in flat.items()}


def apply_meta(
    meta: RunMeta,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    deleted_tags: Iterable[str] = (),
) -> RunMeta:
    """Fold params and tags into a run's columns (see the module docstring for where).

    Raises:
        MlflowError: INVALID_PARAMETER_VALUE when a param already has a different value
            (MLflow params are write-once); RESOURCE_DOES_NOT_EXIST when deleting a tag the
            run does not have.
    """
    config = dict(meta.config)
    if params:
        existing = mlflow_params(config)
        for key, value in params.items():
            if key in existing and existing[key] != value:
                raise _invalid(
                    f"param {key!r} already has the value {existing[key]!r:.100}; MLflow params "
                    f"are write-once, so {value!r:.100} was not stored (nothing in this request "
                    "was stored)",
                    key,
                )
            if key not in existing:  # an equal value stays as it is (typed, maybe nested)
                config[key] = value
    system = dict(config.get(SYSTEM_TAGS_KEY) or {})
    user = {tag_key(t): t for t in meta.tags}
    name, git_commit, notes = meta.name, meta.git_commit, meta.notes
    for key in deleted_tags:
        if key == NOTE_TAG and notes is not None:
            notes = None
        elif key in system:
            del system[key]
        elif key in user:
            del user[key]
        else:
            raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"the run has no tag {key!r}", field="key")
    for key, value in (tags or {}).items():
        if key == RUN_NAME_TAG:
            name = value[:MAX_RUN_NAME_LENGTH] or name
        elif key == NOTE_TAG:
            notes = check_notes(value)
            system.pop(NOTE_TAG, None)  # one note: the column, never a second copy
        elif key.startswith("mlflow."):
            system[key] = value
            if key == GIT_COMMIT_TAG and len(value) <= 64:
                git_commit = value or git_commit
        else:
            user[key] = join_tag(key, value)
    if system:
        config[SYSTEM_TAGS_KEY] = system
    else:
        config.pop(SYSTEM_TAGS_KEY, None)
    return RunMeta(
        name=name, config=config, tags=list(user.values()), git_commit=git_commit, notes=notes
    )


def with_user_id(meta: RunMeta, user_id: Any) -> RunMeta:
    """Keep a new run's ``user_id`` where it differs from its ``mlflow.user`` tag (MLflow stores
    the user as a run attribute and adds no tag for it; the client sends "unknown" when the
    tag is absent, which is what a run without both reports anyway)."""
    system = meta.config.get(SYSTEM_TAGS_KEY) or {}
    if not isinstance(user_id, str) or user_id in ("", "unknown", system.get(USER_TAG)):
        return meta
    config = {**meta.config, USER_ID_KEY: user_id[:MAX_KEY_LENGTH]}
    return dataclasses.replace(meta, config=config)


def user_id_of(run: RunInfo) -> str:
    """The user_id MLflow reports: as created, else the ``mlflow.user`` tag, else "unknown"."""
    stored = run.config.get(USER_ID_KEY)
    if isinstance(stored, str) and stored:
        return stored
    tag = (run.config.get(SYSTEM_TAGS_KEY) or {}).get(USER_TAG)
    return str(tag) if tag else "unknown"


def mlflow_tags(run: RunInfo) -> dict[str, str]:
    """All MLflow tags of a run: user tags, the reserved system tags, its name and notes."""
    out: dict[str, str] = {}
    for tag in run.tags:
        key, value = split_tag(tag)
        out[key] = value
    system = run.config.get(SYSTEM_TAGS_KEY)
    if isinstance(system, Mapping):
        out.update({str(k): str(v) for k, v in system.items()})
    if run.git_commit and GIT_COMMIT_TAG not in out:
        out[GIT_COMMIT_TAG] = run.git_commit
    out[RUN_NAME_TAG] = run.name
    if run.notes is not None:
        out[NOTE_TAG] = run.notes
    return out


def mlflow_status(status: str) -> str:
    """Our run status -> MLflow's (``crashed`` is ``FAILED``: MLflow has no such state)."""
    return _TO_MLFLOW_STATUS.get(status, "FAILED")


def tracker_status(status: Any) -> str:
    """MLflow's run status -> ours.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): not one of MLflow's run statuses.
    """
    if isinstance(status, int) and not isinstance(status, bool):  # the proto enum number
        status = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}.get(status)
    if status not in _FROM_MLFLOW_STATUS:
        raise _invalid(
            f"status {status!r} is not an MLflow run status: use one of "
            f"{', '.join(_FROM_MLFLOW_STATUS)}",
            "status",
        )
    return _FROM_MLFLOW_STATUS[status]


# ------------------------------------------------------------------ serializers


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def experiment_json(
    project_id: int,
    name: str,
    created_at: float,
    *,
    deleted_at: float | None = None,
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An MLflow Experiment object for a project (``tags``: the project's tags)."""
    default = name == DEFAULT_PROJECT
    created = _ms(created_at)
    return {
        "experiment_id": DEFAULT_EXPERIMENT_ID if default else str(project_id),
        "name": DEFAULT_EXPERIMENT_NAME if default else name,
        "artifact_location": "",
        "lifecycle_stage": lifecycle_stage(deleted_at),
        "creation_time": created,
        "last_update_time": created if deleted_at is None else _ms(deleted_at),
        "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()],
    }


def run_info_json(run: RunInfo, experiment_id: str) -> dict[str, Any]:
    """An MLflow RunInfo object (the artifact URI names the MLflow artifact proxy, which this
    server does not provide: artifact calls fail instead of writing to a local folder)."""
    info: dict[str, Any] = {
        "run_id": str(run.id),
        "run_uuid": str(run.id),
        "run_name": run.name,
        "experiment_id": experiment_id,
        "user_id": user_id_of(run),
        "status": mlflow_status(run.status),
        "start_time": _ms(run.started_at if run.started_at is not None else run.created_at),
        "artifact_uri": f"mlflow-artifacts:/{experiment_id}/{run.id}/artifacts",
        "lifecycle_stage": lifecycle_stage(run.deleted_at),
    }
    end = _ms(run.ended_at)
    if end is not None:
        info["end_time"] = end
    return info


def metric_json(key: str, step: int, wall_time: float, value: float | None) -> dict[str, Any]:
    """An MLflow Metric object (``None``, the store's NaN, becomes NaN)."""
    return {
        "key": key,
        "value": math.nan if value is None else value,
        "timestamp": _ms(wall_time),
        "step": step,
    }


def run_json(
    run: RunInfo, experiment_id: str, summaries: Iterable[MetricSummary] = ()
) -> dict[str, Any]:
    """An MLflow Run object: info, data (last metric values, params, tags), inputs (datasets).

    ``summaries``: the run's last metric points (``tracker.store.run_reads.metric_summaries``)."""
    metrics = [metric_json(s.key, s.last_step, s.last_wall_time, s.last_value) for s in summaries]
    return {
        "info": run_info_json(run, experiment_id),
        "data": {
            "metrics": metrics,
            "params": [{"key": k, "value": v} for k, v in mlflow_params(run.config).items()],
            "tags": [{"key": k, "value": v} for k, v in mlflow_tags(run).items()],
        },
        "inputs": {"dataset_inputs": dataset_inputs_json(run.config)},
    }


def dataset_inputs_json(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's ``inputs.dataset_inputs`` (MLflow's ``DatasetInput`` objects)."""
    out: list[dict[str, Any]] = []
    for record in config.get(INPUTS_KEY) or []:
        if not isinstance(record, Mapping):
            continue
        dataset = {
            k: record[k]
            for k in ("name", "digest", "source_type", "source", "schema", "profile")
            if record.get(k)
        }
        context = record.get("context") or {}
        tags = [{"key": k, "value": v} for k, v in context.items()]
        out.append({"dataset": dataset, "tags": tags})
    return out
