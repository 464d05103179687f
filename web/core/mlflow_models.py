"""Pure mapping of MLflow logged models and run inputs (datasets) (no I/O, no Flask).

* A logged model (``mlflow.<flavor>.log_model``) is a ``logged_models`` row; its
  ``artifact_uri`` is ``mlflow-artifacts:/<experiment_id>/models/<model_id>/artifacts`` and
  its files are artifacts of its source run (``web/core/mlflow_artifacts.py``). A model
  created without a source run gets a finished run of its own (named after the model), so
  every model's files live in a run.
* Run inputs (``mlflow.log_input``): the datasets are kept in the run's config under the
  reserved key ``_mlflow_inputs`` (shown with the run's config on the run page and by
  ``tracker runs show``), each ``{name, digest, source_type, source, schema, profile,
  context}``, and returned as the run's ``inputs.dataset_inputs``.

Documented in ``web/API.md`` ("MLflow compatibility").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracker.entities import LoggedModelInfo
from tracker.web.core.mlflow_artifacts import model_artifact_uri
from tracker.web.core.mlflow_compat import (
    INPUTS_KEY,
    MAX_KEY_LENGTH,
    MlflowError,
    params_of,
    tags_of,
)

__all__ = [
    "INPUTS_KEY",
    "MAX_INPUTS",
    "datasets_of",
    "logged_model_json",
    "merge_inputs",
    "model_filter",
    "model_status",
]

MAX_INPUTS = 1_000  # datasets per run
MAX_DATASET_FIELD = 65_536  # characters of a dataset's schema, profile or source
STATUSES = ("PENDING", "READY", "UPLOAD_FAILED")
_PROTO_STATUS = {f"LOGGED_MODEL_{s}": s for s in STATUSES}
_PROTO_NUMBER = {1: "PENDING", 2: "READY", 3: "UPLOAD_FAILED"}


def _invalid(message: str, field: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message, field=field)


# ------------------------------------------------------------------ logged models


def model_status(raw: Any) -> str:
    """MLflow's ``LoggedModelStatus`` (``LOGGED_MODEL_READY``, its number, or ``READY``) ->
    ours (``READY``).

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): anything else.
    """
    if isinstance(raw, int) and not isinstance(raw, bool) and raw in _PROTO_NUMBER:
        return _PROTO_NUMBER[raw]
    if isinstance(raw, str):
        if raw in _PROTO_STATUS:
            return _PROTO_STATUS[raw]
        if raw in STATUSES:
            return raw
    raise _invalid(
        f"status {raw!r:.60} is not a logged model status: use one of {', '.join(_PROTO_STATUS)}",
        "status",
    )


def logged_model_json(model: LoggedModelInfo, experiment_id: str) -> dict[str, Any]:
    """An MLflow LoggedModel object."""
    info: dict[str, Any] = {
        "model_id": model.id,
        "experiment_id": experiment_id,
        "name": model.name,
        "artifact_uri": model_artifact_uri(experiment_id, model.id),
        "creation_timestamp_ms": round(model.created_at * 1000),
        "last_updated_timestamp_ms": round(model.updated_at * 1000),
        "status": f"LOGGED_MODEL_{model.status}",
        "source_run_id": str(model.run_id),
        "tags": [{"key": k, "value": v} for k, v in model.tags.items()],
    }
    if model.model_type:
        info["model_type"] = model.model_type
    if model.status_message:
        info["status_message"] = model.status_message
    return {
        "info": info,
        "data": {"params": [{"key": k, "value": v} for k, v in model.params.items()]},
    }


def model_params(items: Any) -> dict[str, str]:
    return params_of(items)


def model_tags(items: Any) -> dict[str, str]:
    return tags_of(items)


_CLAUSE = re.compile(
    r"""\s*(?:attributes?\.)?(name|source_run_id|model_type|status)\s*=\s*(['"])(.*?)\2\s*""",
    re.I | re.S,
)


def model_filter(text: Any) -> dict[str, str]:
    """A search_logged_models filter -> ``{field: value}`` equalities.

    Supported: none, or ``field = 'value'`` clauses joined by ``AND`` on ``name``,
    ``source_run_id``, ``model_type`` and ``status`` (what the client itself sends:
    ``name = '<name>'`` to resolve ``runs:/<run_id>/<name>``).

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): any other filter.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    if not isinstance(text, str) or len(text) > 1000:
        raise _invalid("filter must be a string of at most 1000 characters", "filter")
    out: dict[str, str] = {}
    for clause in re.split(r"\s+AND\s+", text.strip(), flags=re.I):
        found = _CLAUSE.fullmatch(clause)
        if found is None:
            raise _invalid(
                f"filter clause {clause[:100]!r} is not supported: this server filters logged "
                "models by name, source_run_id, model_type and status with '=' and AND",
                "filter",
            )
        field, value = found.group(1).lower(), found.group(3)
        out[field] = model_status(value) if field == "status" else value
    return out


def model_name_of(raw: Any, default: str) -> str:
    if raw is None or raw == "":
        return default
    if not isinstance(raw, str) or len(raw) > MAX_KEY_LENGTH:
        raise _invalid(f"name must be a string of at most {MAX_KEY_LENGTH} characters", "name")
    return raw


# ------------------------------------------------------------------ run inputs


def _text(item: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = item.get(key)
    if value is None or value == "":
        if required:
            raise _invalid(f"dataset {key} is required", key)
        return ""
    if not isinstance(value, str):
        raise _invalid(f"dataset {key} must be a string, not {type(value).__name__}", key)
    if len(value) > MAX_DATASET_FIELD:
        raise _invalid(
            f"dataset {key} has {len(value)} characters; at most {MAX_DATASET_FIELD}", key
        )
    return value


def datasets_of(items: Any) -> list[dict[str, Any]]:
    """MLflow ``DatasetInput`` objects (``{dataset: {...}, tags: [...]}``) -> our records.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): a malformed entry, a missing name or digest, a
            field too long, too many datasets.
    """
    if items is None:
        return []
    if not isinstance(items, list):
        raise _invalid("datasets must be a list of {dataset, tags}", "datasets")
    if len(items) > MAX_INPUTS:
        raise _invalid(f"at most {MAX_INPUTS} datasets per request", "datasets")
    out: list[dict[str, Any]] = []
    for item in items:
        dataset = item.get("dataset") if isinstance(item, Mapping) else None
        if not isinstance(dataset, Mapping):
            raise _invalid("each of datasets must be an object {dataset, tags}", "datasets")
        record: dict[str, Any] = {
            "name": _text(dataset, "name", required=True),
            "digest": _text(dataset, "digest", required=True),
            "source_type": _text(dataset, "source_type"),
            "source": _text(dataset, "source"),
            "schema": _text(dataset, "schema"),
            "profile": _text(dataset, "profile"),
            "context": tags_of(item.get("tags")),
        }
        out.append(record)
    return out


def merge_inputs(existing: Any, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's datasets after logging ``new``: one entry per (name, digest, context), a
    repeated one replaced in place (MLflow does not store a dataset input twice).

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): the run would have more than MAX_INPUTS.
    """
    merged = [dict(d) for d in existing if isinstance(d, Mapping)] if existing else []
    index = {_identity(d): i for i, d in enumerate(merged)}
    for record in new:
        key = _identity(record)
        if key in index:
            merged[index[key]] = record
        else:
            index[key] = len(merged)
            merged.append(record)
    if len(merged) > MAX_INPUTS:
        raise _invalid(f"a run holds at most {MAX_INPUTS} dataset inputs", "datasets")
    return merged


def _identity(record: Mapping[str, Any]) -> tuple[str, str, str]:
    context = record.get("context") or {}
    return (
        str(record.get("name")),
        str(record.get("digest")),
        str(sorted(context.items()) if isinstance(context, Mapping) else context),
    )
