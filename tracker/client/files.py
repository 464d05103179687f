"""Files as artifacts: ``log_artifact`` (a file or a directory), ``log_text``, ``log_dict``.

Called in the training thread; each returns :class:`~tracker.client.media.Pending` entries
for the upload queue. A file of at most ``SNAPSHOT_MAX_BYTES`` is read now, so a script
that rewrites ``preds.csv`` every epoch stores each epoch's content; a larger file is read
when uploaded (do not change it before ``flush()``/``finish()``).
"""

from __future__ import annotations

import json
import mimetypes
import os
from pathlib import Path
from typing import Any

from tracker.client.media import Artifact, Pending
from tracker.errors import InvalidInput
from tracker.rules.artifact_paths import check_artifact_path as rule

SNAPSHOT_MAX_BYTES = 16 * 1024 * 1024

__all__ = ["SNAPSHOT_MAX_BYTES", "check_artifact_path", "prepare_dict", "prepare_files",
           "prepare_text"]  # fmt: skip


def check_artifact_path(path: str, field: str = "name") -> str:
    """The artifact path rule (:mod:`tracker.rules.artifact_paths`), naming ``field``."""
    return rule(path, field=field)


def media_type_of(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def prepare_files(local: str | os.PathLike[str], name: str | None) -> list[Pending]:
    """A file (stored as ``name``, default its file name) or a directory (each file under
    ``name/``, default the directory's name, keeping its relative path)."""
    source = Path(local)
    if source.is_dir():
        prefix = check_artifact_path(name if name is not None else source.resolve().name)
        entries: list[Pending] = []
        for root, dirs, files in os.walk(source):
            dirs.sort()
            for file in sorted(files):
                full = Path(root) / file
                rel = full.relative_to(source).as_posix()
                entries.append(_file_entry(full, check_artifact_path(f"{prefix}/{rel}")))
        return entries
    if not source.is_file():
        raise InvalidInput(f"log_artifact: {local} is neither a file nor a directory",
                           field="path")  # fmt: skip
    return [_file_entry(source, check_artifact_path(name if name is not None else source.name))]


def _file_entry(source: Path, path: str) -> Pending:
    what = f"artifact {path!r} ({source})"
    try:
        size = source.stat().st_size
        data: bytes | Path = source.read_bytes() if size <= SNAPSHOT_MAX_BYTES else source
    except OSError as exc:
        raise InvalidInput(f"{what}: cannot read it: {exc.strerror or exc}", field="path") from exc
    art = Artifact(path, data, media_type_of(path))
    return Pending(what, lambda: [art], len(data) if isinstance(data, bytes) else 0)


def prepare_text(name: str, text: str) -> Pending:
    path = check_artifact_path(name)
    if not isinstance(text, str):
        raise InvalidInput(f"log_text({name!r}): text is a {type(text).__name__}, not a str",
                           field="text")  # fmt: skip
    data = text.encode("utf-8")
    media_type = media_type_of(path)
    if media_type == "application/octet-stream":
        media_type = "text/plain"
    art = Artifact(path, data, media_type)
    return Pending(f"text {path!r}", lambda: [art], len(data))


def prepare_dict(name: str, obj: Any) -> Pending:
    """JSON, or YAML for a name ending in ``.yaml``/``.yml`` (PyYAML, imported then)."""
    path = check_artifact_path(name)
    what = f"dict {path!r}"
    plain = _plain(obj, what)
    if path.lower().endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError as exc:
            raise InvalidInput(f"{what}: YAML needs PyYAML: pip install pyyaml") from exc
        data = yaml.safe_dump(plain, sort_keys=False, allow_unicode=True).encode("utf-8")
        media_type = "application/yaml"
    else:
        data = json.dumps(plain, indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8")
        media_type = "application/json"
    art = Artifact(path, data, media_type)
    return Pending(what, lambda: [art], len(data))


def _plain(value: Any, what: str) -> Any:
    """JSON-ready: numpy/torch scalars and arrays as numbers and lists; NaN/±Inf as the
    strings "NaN", "Infinity", "-Infinity" (as :mod:`tracker.rules.jsonvalues` writes them)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, what) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        item = value.detach().cpu().tolist() if hasattr(value, "detach") else value.tolist()
        return _plain(item, what)
    raise InvalidInput(
        f"{what}: a {type(value).__name__} cannot be written as JSON/YAML (use dicts, "
        f"lists, strings, numbers, bools and None)"
    )
