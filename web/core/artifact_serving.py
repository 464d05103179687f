"""How artifacts cross HTTP (no Flask): what a download may be shown as, the metadata header
of an upload, and a run's histograms over steps in one compact answer.

Downloads are the dashboard's most dangerous answer: an artifact is bytes anyone with a
``log`` token (or an MLflow client) wrote, served from the dashboard's own origin. A file
rendered inline as HTML, SVG or JavaScript would run with the dashboard's cookies. So
(``serving``): only raster images and ``text/plain`` are ever inline; every other type is an
attachment, and types a browser can execute (HTML, XHTML, SVG, XML, JavaScript, CSS) are
sent as ``application/octet-stream``. The view adds ``nosniff`` and a sandboxing CSP too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from tracker.errors import InvalidInput, NotFound
from tracker.rules.artifact_paths import media_path
from tracker.store import Store
from tracker.store import artifacts as store_artifacts

__all__ = [
    "INLINE_TYPES",
    "MAX_HISTOGRAM_STEPS",
    "Serving",
    "histogram_series",
    "parse_meta_header",
    "serving",
]

INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain"})
_ACTIVE_MARKERS = ("html", "svg", "xml", "javascript", "ecmascript", "css")
MAX_HISTOGRAM_STEPS = 1000


@dataclass(frozen=True)
class Serving:
    content_type: str  # the Content-Type header
    inline: bool  # Content-Disposition inline (else attachment)


def serving(media_type: str, *, download: bool = False) -> Serving:
    """How to send an artifact of ``media_type``; ``download`` forces an attachment."""
    base = media_type.split(";", 1)[0].strip().lower()
    if base in INLINE_TYPES:
        content_type = "text/plain; charset=utf-8" if base == "text/plain" else base
        return Serving(content_type, inline=not download)
    if any(marker in base for marker in _ACTIVE_MARKERS):
        return Serving("application/octet-stream", inline=False)
    return Serving(base or "application/octet-stream", inline=False)


def parse_meta_header(text: str | None) -> dict[str, Any] | None:
    """The ``X-Artifact-Meta`` header: a JSON object (caption, width, height, bins...).

    Raises:
        InvalidInput: not JSON, or not an object (field ``X-Artifact-Meta``).
    """
    if text is None or text == "":
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(
            f"X-Artifact-Meta is not JSON ({exc.args[0] if exc.args else exc})",
            field="X-Artifact-Meta",
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput(
            f"X-Artifact-Meta must be a JSON object, not a {type(value).__name__}",
            field="X-Artifact-Meta",
        )
    return value


def _evenly(steps: list[int], limit: int) -> list[int]:
    """At most ``limit`` steps spread evenly, first and last kept."""
    if len(steps) <= limit:
        return steps
    if limit == 1:
        return [steps[-1]]
    picks = {round(i * (len(steps) - 1) / (limit - 1)) for i in range(limit)}
    return [steps[i] for i in sorted(picks)]


def _histogram(raw: bytes) -> tuple[list[float], list[float]] | None:
    try:
        value = json.loads(raw)
        edges = [float(x) for x in value["edges"]]
        counts = [float(x) for x in value["counts"]]
    except (ValueError, TypeError, KeyError):
        return None
    if len(edges) != len(counts) + 1 or not all(map(math.isfinite, edges + counts)):
        return None
    return edges, counts


def histogram_series(
    store: Store, run_id: int, key: str, *, max_steps: int = MAX_HISTOGRAM_STEPS
) -> dict[str, Any]:
    """Every stored histogram of ``key`` (at most ``max_steps``, spread evenly):
    ``{"key", "steps": [...], "edges": [[...]], "counts": [[...]], "total_steps",
    "skipped": [steps whose file is not {"edges", "counts"}]}``.

    Raises:
        NotFound: no such run, or it has no histogram ``key``.
        InvalidMetricKey: ``key`` breaks the key rule.
    """
    media_path("histograms", key, 0, ".json")  # checks the key
    steps = store_artifacts.media_keys(store, run_id).get("histograms", {}).get(key)
    if not steps:
        raise NotFound(f"run {run_id} has no histogram {key!r}", field="key")
    out: dict[str, Any] = {"key": key, "steps": [], "edges": [], "counts": [], "skipped": []}
    out["total_steps"] = len(steps)
    for step in _evenly(steps, max_steps):
        path = media_path("histograms", key, step, ".json")
        with store_artifacts.open_artifact(store, run_id, path) as f:
            parsed = _histogram(f.read(16 * 1024 * 1024 + 1))
        if parsed is None:
            out["skipped"].append(step)
            continue
        out["steps"].append(step)
        out["edges"].append(parsed[0])
        out["counts"].append(parsed[1])
    return out
