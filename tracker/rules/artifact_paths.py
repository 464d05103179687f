"""Artifact paths: the one rule every package checks them with (pure, no I/O).

An artifact path names a file of a run, relative to the run: 1 to 1024 characters (2048
UTF-8 bytes, for PostgreSQL's index) of posix
segments joined by ``/``. It is untrusted input (HTTP, MLflow clients, file names on disk), so
it must be canonical: not absolute (no leading ``/``, no ``C:``), no empty, ``.`` or ``..``
segment (``a//b``, ``./a``, ``a/../b``, a trailing ``/``), no backslash, no NUL or other
control character. The bytes never live at this path (blobs are content addressed), but the
path is shown, put in headers and written on disk by ``tracker artifacts get``.

Media are artifacts at fixed paths, so the dashboard can list them without a second table:
``media/images/<key>/<step:09d>.png|.jpg``, ``media/figures/<key>/<step:09d>.plotly.json|.png``
and ``media/histograms/<key>/<step:09d>.json``, where ``<key>`` follows the metric-key rule
(:mod:`tracker.rules.keys`) and ``step`` is ``>= 0``.

MLflow 3's ``log_image(image, key=..., step=...)`` writes its own layout, which the Media tab
reads too (:func:`parse_mlflow_image_path`): ``images/<key>+step+<step>+timestamp+<ms>+<uuid>.png``
(``%`` instead of ``+`` before MLflow 3.x; ``/`` in the key written as ``~``, formerly ``#``),
beside a ``...+compressed.webp`` thumbnail that is not listed again.
"""

from __future__ import annotations

import re

from tracker.errors import InvalidInput, InvalidMetricKey
from tracker.rules.keys import check_key

__all__ = [
    "MAX_PATH_BYTES",
    "MAX_PATH_LENGTH",
    "MEDIA_EXTENSIONS",
    "MEDIA_KINDS",
    "PATH_RULE",
    "check_artifact_path",
    "check_prefix",
    "media_path",
    "parse_media_path",
    "parse_mlflow_image_path",
]

MAX_PATH_LENGTH = 1024
MAX_PATH_BYTES = 2048  # UTF-8; keeps the (run, path) unique index within PostgreSQL's limit
PATH_RULE = (
    "artifact paths are 1-1024 characters (at most 2048 bytes in UTF-8), relative posix "
    "('dir/file.txt'): no leading '/', no drive letter, no empty, '.' or '..' segment, "
    "no backslash, no NUL or control character"
)
MEDIA_KINDS = ("images", "figures", "histograms")
MEDIA_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "images": (".png", ".jpg"),
    "figures": (".plotly.json", ".png"),
    "histograms": (".json",),
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"[A-Za-z]:")
_STEP_FILE = re.compile(r"(\d{9,})(\..+)")
MLFLOW_IMAGES = "images/"  # the folder MLflow's log_image(key=...) writes into
# images/<key><s>step<s><step><s>timestamp<s><ms><s><uuid>.png, <s> one of '+' or '%'
_MLFLOW_IMAGE = re.compile(
    r"images/(?P<key>[^/]+?)(?P<s>[+%])step(?P=s)(?P<step>\d{1,18})(?P=s)timestamp(?P=s)\d{1,18}"
    r"(?P=s)[0-9a-fA-F-]{8,64}\.(?:png|jpe?g)"
)


def check_artifact_path(path: object, *, field: str = "path") -> str:
    """Return ``path`` if it follows :data:`PATH_RULE`, else raise InvalidInput naming it."""
    if not isinstance(path, str):
        raise InvalidInput(
            f"artifact path {path!r} is a {type(path).__name__}: {PATH_RULE}", field=field
        )
    shown = _CONTROL.sub("?", path[:80])
    if not path or len(path) > MAX_PATH_LENGTH:
        raise InvalidInput(
            f"artifact path {shown!r} has {len(path)} characters: {PATH_RULE}", field=field
        )
    try:
        encoded = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(
            f"artifact path {shown!r} is not valid UTF-8: {PATH_RULE}", field=field
        ) from None
    if encoded > MAX_PATH_BYTES:
        raise InvalidInput(
            f"artifact path {shown!r} has {encoded} bytes in UTF-8: {PATH_RULE}", field=field
        )
    problem = _problem(path)
    if problem:
        raise InvalidInput(f"artifact path {shown!r} {problem}: {PATH_RULE}", field=field)
    return path


def check_prefix(prefix: object, *, field: str = "prefix") -> str:
    """A listing prefix: empty, a path, or a path ending in ``/`` (a directory)."""
    if prefix == "":
        return ""
    if isinstance(prefix, str) and prefix.endswith("/") and len(prefix) > 1:
        check_artifact_path(prefix[:-1], field=field)
        return prefix
    return check_artifact_path(prefix, field=field)


def _problem(path: str) -> str | None:
    if "\x00" in path:
        return "contains a NUL byte"
    if _CONTROL.search(path):
        return "contains a control character"
    if "\\" in path:
        return "contains a backslash"
    if path.startswith("/") or _DRIVE.match(path):
        return "is absolute"
    for part in path.split("/"):
        if part == "":
            return "has an empty segment ('//' or a leading or trailing '/')"
        if part in (".", ".."):
            return f"has a {part!r} segment"
    return None


def media_path(kind: str, key: str, step: int, extension: str) -> str:
    """The artifact path of one media item, e.g. ``media/images/samples/000000012.png``.

    Raises:
        InvalidInput: an unknown kind or extension for it, or a negative step.
        InvalidMetricKey: ``key`` breaks the metric-key rule.
    """
    if kind not in MEDIA_EXTENSIONS:
        raise InvalidInput(
            f"media kind {kind!r} is not one of {', '.join(MEDIA_KINDS)}", field="kind"
        )
    if extension not in MEDIA_EXTENSIONS[kind]:
        allowed = ", ".join(MEDIA_EXTENSIONS[kind])
        raise InvalidInput(f"{kind} are stored as {allowed}, not {extension!r}", field="extension")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InvalidInput(f"media step {step!r} must be an integer >= 0", field="step")
    check_key(key)
    return f"media/{kind}/{key}/{step:09d}{extension}"


def parse_media_path(path: str) -> tuple[str, str, int] | None:
    """``(kind, key, step)`` of a media path made by :func:`media_path`, else None."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != "media" or parts[1] not in MEDIA_EXTENSIONS:
        return None
    match = _STEP_FILE.fullmatch(parts[-1])
    if match is None or match.group(2) not in MEDIA_EXTENSIONS[parts[1]]:
        return None
    key = "/".join(parts[2:-1])
    try:
        check_key(key)
    except InvalidMetricKey:
        return None
    return parts[1], key, int(match.group(1))


def parse_mlflow_image_path(path: str) -> tuple[str, int] | None:
    """``(key, step)`` of an image MLflow's ``log_image(image, key=..., step=...)`` stored
    (``images/loss+step+3+timestamp+1733371200000+<uuid>.png``), else None: other files
    under ``images/``, the ``+compressed.webp`` thumbnail beside each, and keys that break the
    metric-key rule (:mod:`tracker.rules.keys`). ``~`` (and the older ``#``) in the file name
    stand for ``/`` in the key."""
    match = _MLFLOW_IMAGE.fullmatch(path)
    if match is None:
        return None
    key = match.group("key").replace("~", "/").replace("#", "/")
    try:
        check_key(key)
    except InvalidMetricKey:
        return None
    return key, int(match.group("step"))
