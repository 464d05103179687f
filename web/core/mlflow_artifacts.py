"""Pure mapping between MLflow's artifact proxy paths and the tracker's run artifacts (no I/O,
no Flask).

The MLflow client in proxied mode sends every artifact call to
``/api/2.0/mlflow-artifacts/artifacts/<location>``, where ``<location>`` is the run's (or the
logged model's) ``artifact_uri`` after ``mlflow-artifacts:/`` plus the file's path:

* ``<experiment_id>/<run_id>/artifacts/<path>``: the run's artifact ``<path>``;
* ``<experiment_id>/models/<model_id>/artifacts/<path>``: a logged model's file, stored as the
  artifact ``mlflow-models/<model_id>/<path>`` of the model's source run (so the blobs share
  the run's root, its garbage collection and its Artifacts tab). MLflow's own listing of a
  run hides that folder, as a real MLflow server keeps models apart from run artifacts.

Documented in ``web/API.md`` ("MLflow compatibility", artifacts).
"""

from __future__ import annotations

import posixpath
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tracker.entities import ArtifactInfo
from tracker.rules.artifact_paths import check_artifact_path
from tracker.rules.ids import parse_id
from tracker.web.core.mlflow_compat import MlflowError

__all__ = [
    "MODELS_PREFIX",
    "Location",
    "check_model_id",
    "check_upload_id",
    "listing",
    "model_artifact_uri",
    "new_model_id",
    "new_upload_id",
    "parse_location",
    "run_prefix",
]

MODELS_PREFIX = "mlflow-models"  # run artifact folder that holds the run's logged models
MAX_PARTS = 10_000  # S3's limit, which the MLflow client's chunking follows
_MODEL_ID = re.compile(r"m-[0-9a-f]{32}")
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Location:
    """Where an MLflow artifact path points: a run's artifacts or a logged model's files.

    ``owner`` is the run id (``kind == "run"``) or the model id (``"model"``); ``path`` is
    relative to the run's or model's artifact root (``""``: the root itself)."""

    kind: str
    experiment_id: str
    owner: int | str
    path: str


def _missing(location: str) -> MlflowError:
    return MlflowError(
        "RESOURCE_DOES_NOT_EXIST",
        f"artifact location {location[:200]!r} does not exist on this server: use a run's "
        "artifact_uri ('<experiment_id>/<run_id>/artifacts/...') or a logged model's "
        "('<experiment_id>/models/<model_id>/artifacts/...')",
        field="path",
    )


def parse_location(location: str) -> Location:
    """Split an artifact proxy path into its run or model and the relative path.

    Raises:
        MlflowError (RESOURCE_DOES_NOT_EXIST): not under a run's or a model's artifact root.
        InvalidInput (INVALID_PARAMETER_VALUE): a relative path breaking the artifact path
            rule (``..``, backslash, ...; ``tracker.rules.artifact_paths``).
    """
    text = location.strip("/")
    parts = text.split("/")
    experiment = parts[0] if parts else ""
    if parse_id(experiment) is None and experiment != "0":
        raise _missing(location)
    owner: int | str
    if len(parts) >= 3 and parts[2] == "artifacts":
        run_id = parse_id(parts[1])
        if run_id is None:
            raise _missing(location)
        kind, owner, rest = "run", run_id, parts[3:]
    elif len(parts) >= 4 and parts[1] == "models" and parts[3] == "artifacts":
        kind, owner, rest = "model", check_model_id(parts[2]), parts[4:]
    else:
        raise _missing(location)
    path = "/".join(rest)
    if path:
        check_artifact_path(path)
    return Location(kind, experiment, owner, path)


def run_prefix(location: Location) -> str:
    """The run-artifact path of ``location``'s root (``""`` or ``mlflow-models/<id>``)."""
    return "" if location.kind == "run" else f"{MODELS_PREFIX}/{location.owner}"


def listing(infos: Iterable[ArtifactInfo], directory: str, *, hide_models: bool) -> list[dict]:
    """MLflow's ``files`` of a directory: its direct children, folders first by name, each as
    ``{"path": <basename>, "is_dir": bool[, "file_size": n]}``.

    ``directory`` is a run-artifact path (``""``: the run's root); ``hide_models`` leaves the
    models folder out of a run's root. A path that names a file lists as that one file (the
    client then returns an empty list, as MLflow does).
    """
    base = directory.rstrip("/")
    start = f"{base}/" if base else ""
    dirs: set[str] = set()
    files: dict[str, int] = {}
    for info in infos:
        if info.path == base:
            files[posixpath.basename(base)] = info.size
            continue
        if not info.path.startswith(start):
            continue
        head, sep, _ = info.path[len(start) :].partition("/")
        if sep:
            dirs.add(head)
        else:
            files[head] = info.size
    if hide_models and not base:
        dirs.discard(MODELS_PREFIX)
        files.pop(MODELS_PREFIX, None)
    out: list[dict[str, Any]] = [{"path": d, "is_dir": True} for d in sorted(dirs)]
    out += [{"path": f, "is_dir": False, "file_size": files[f]} for f in sorted(files)]
    return out


def check_model_id(raw: Any) -> str:
    """A logged model id of this server (``m-`` and 32 hex digits).

    Raises:
        MlflowError (RESOURCE_DOES_NOT_EXIST): anything else.
    """
    text = str(raw or "")
    if not _MODEL_ID.fullmatch(text):
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST",
            f"logged model {text[:64]!r} does not exist: this server's model ids are "
            "'m-' and 32 hex digits",
            field="model_id",
        )
    return text


def new_model_id() -> str:
    return "m-" + secrets.token_hex(16)


def model_artifact_uri(experiment_id: str, model_id: str) -> str:
    return f"mlflow-artifacts:/{experiment_id}/models/{model_id}/artifacts"


def new_upload_id() -> str:
    return secrets.token_hex(16)


def check_upload_id(raw: Any) -> str:
    """Raises MlflowError (RESOURCE_DOES_NOT_EXIST) for anything but one of our upload ids."""
    text = str(raw or "")
    if not _UPLOAD_ID.fullmatch(text):
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST",
            f"multipart upload {text[:64]!r} does not exist",
            field="upload_id",
        )
    return text


def part_numbers(parts: Any, num_parts: int) -> list[int]:
    """The part numbers of a multipart ``complete`` request: exactly ``1..num_parts``.

    Raises:
        MlflowError (INVALID_PARAMETER_VALUE): a malformed list, a missing or repeated part.
    """
    if not isinstance(parts, list) or not all(isinstance(p, Mapping) for p in parts):
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", "parts must be a list of {part_number, etag}", field="parts"
        )
    numbers = sorted(int(p.get("part_number") or 0) for p in parts)
    if numbers != list(range(1, num_parts + 1)):
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            f"parts must be numbered 1 to {num_parts} once each (the number created); got "
            f"{len(numbers)} parts",
            field="parts",
        )
    return numbers


def num_parts_of(raw: Any) -> int:
    """Raises MlflowError (INVALID_PARAMETER_VALUE) unless 1 <= num_parts <= MAX_PARTS."""
    try:
        number = int(raw if raw not in (None, "") else 1)
    except (TypeError, ValueError):
        number = -1
    if not 1 <= number <= MAX_PARTS:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE",
            f"num_parts must be from 1 to {MAX_PARTS}, not {str(raw)[:20]!r}",
            field="num_parts",
        )
    return number
