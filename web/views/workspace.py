"""JSON API of the runs page's workspace: ``GET /api/v1/workspace/series`` (many runs x many
metrics in one request, downsampled, optionally grouped) and the named views
(``GET/POST /api/v1/views``, ``POST /api/v1/views/delete``). Documented in ``web/API.md``.

Each view parses, makes one store call (``tracker.store.workspace``, ``tracker.store.views``)
and serializes. Saving and deleting a view need the ``admin`` scope, the dashboard's origin
and a JSON body (``tracker.web.plumbing.security``); the store records who asked
(``saved_view_events``).

Errors: 400 naming the field and the bound or rule, 404 for an unknown run id or view, 403
for a ``log`` token saving or deleting, 503 when the store cannot be reached.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from flask import Blueprint, request

from tracker.errors import InvalidInput
from tracker.rules.config import flatten
from tracker.rules.group_series import GroupSeries
from tracker.store import views as store_views
from tracker.store.run_search import RunSearch
from tracker.store.series import AlignedRead, SeriesRead
from tracker.store.workspace import WorkspaceRead, WorkspaceRequest, read_workspace
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import int_arg, int_list_arg, json_body, list_arg
from tracker.web.views.annotations import who

bp = Blueprint("workspace", __name__, url_prefix="/api/v1")

FIELDS = ("min", "max", "wall_time")  # columns sent only when asked (``fields=``)


def _round(value: float | None) -> float | None:
    """7 significant digits: what a chart and its hover show, in half the bytes of JSON."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.7g}")


def compact_series(read: SeriesRead, fields: set[str]) -> dict[str, Any]:
    """A run's series for the workspace: ``step`` (each bucket's last step), ``last`` (its
    last value, null when not finite), ``nonfinite`` (NaN/±Inf in the bucket), and the
    columns of ``fields`` (``min``, ``max``, ``wall_time`` in seconds) when asked."""
    c = read.series.columns()  # no Bucket objects from packed points: ~70,000 per workspace
    out: dict[str, Any] = {
        "step": c.last_step,
        "last": [_round(x) for x in c.last],
        "nonfinite": c.nonfinite,
    }
    if "min" in fields:
        out["min"] = [_round(x) for x in c.min]
    if "max" in fields:
        out["max"] = [_round(x) for x in c.max]
    if "wall_time" in fields:
        out["wall_time"] = [None if w is None else w / 1000.0 for w in read.wall_ms]
    return out


def group_json(g: GroupSeries) -> dict[str, Any]:
    return {
        "step": list(g.step),
        "center": [_round(v) for v in g.center],
        "lo": [_round(v) for v in g.lo],
        "hi": [_round(v) for v in g.hi],
        "n": list(g.n),
    }


def _key_json(
    read: AlignedRead, found: WorkspaceRead, fields: set[str], series: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": read.key,
        "lo": None if read.grid is None else read.grid.lo,
        "hi": None if read.grid is None else read.grid.hi,
        "series": {str(i): compact_series(s, fields) for i, s in read.reads.items()}
        if series
        else {},
    }
    if found.groups:
        out["groups"] = [group_json(g) for g in found.group_series[read.key]]
    return out


def workspace_json(found: WorkspaceRead, fields: set[str], series: bool = True) -> dict[str, Any]:
    """The answer of ``/workspace/series``; ``series=False`` leaves each run's series out
    (a grouped chart draws only the groups)."""
    differing = set(found.differing)
    return {
        "total": found.total,
        "runs": [
            {
                "id": r.id,
                "name": r.name,
                "project": r.project,
                "status": r.status,
                "tags": r.tags,
                # only the keys that differ between the drawn runs: what tells them apart
                "config": {k: v for k, v in flatten(r.config).items() if k in differing},
            }
            for r in found.runs
        ],
        "differing": found.differing,
        "unknown_keys": found.unknown_keys,
        "keys": [_key_json(read, found, fields, series) for read in found.series],
        "groups": [
            {"label": g.label, "value": g.value, "size": g.size, "runs": list(g.run_ids)}
            for g in found.groups
        ],
    }


def _request() -> WorkspaceRequest:
    ids = int_list_arg("runs", limit=10_000) or None
    return WorkspaceRequest(
        keys=tuple(dict.fromkeys(list_arg("keys"))),
        search=RunSearch(
            query=request.args.get("q", ""),
            project=request.args.get("project") or None,
            tags=tuple(list_arg("tag", split=False)),
            sort=request.args.get("sort", "created"),
            order=request.args.get("order", "desc"),
            deleted=request.args.get("deleted") in ("1", "true"),
        ),
        run_ids=None if ids is None else tuple(ids),
        limit=int_arg("limit", 100, -(2**31), 2**31),
        max_buckets=int_arg("max_buckets", 200, -(2**31), 2**31),
        group=request.args.get("group") or None,
        agg=request.args.get("agg", "mean"),
        band=request.args.get("band", "minmax"),
    )


@bp.get("/workspace/series")
def workspace_series() -> Any:
    fields = set(list_arg("fields"))
    unknown = fields - set(FIELDS)
    if unknown:
        raise InvalidInput(
            f"fields: {sorted(unknown)[0]!r} is not a column; use {', '.join(FIELDS)}",
            field="fields",
        )
    found = read_workspace(state().store, _request())
    return workspace_json(found, fields, series=request.args.get("series") != "0")


def view_json(view: store_views.SavedView) -> dict[str, Any]:
    return dataclasses.asdict(view)


@bp.get("/views")
def views() -> Any:
    """``?project=``: the views of that project (``""``: of all projects); none: every view."""
    project = request.args.get("project")
    found = store_views.list_views(state().store, project)
    return {"views": [view_json(v) for v in found]}


@bp.post("/views")
def save_view() -> Any:
    """``{"project": "", "name": "...", "state": {...}}``: create or replace."""
    body = json_body()
    view = store_views.save_view(
        state().store, body.get("project", ""), body.get("name"), body.get("state"), by=who()
    )
    return view_json(view), 201


@bp.post("/views/delete")
def delete_view() -> Any:
    """``{"project": "", "name": "..."}``."""
    body = json_body()
    project, name = body.get("project", ""), body.get("name")
    if not isinstance(project, str) or not isinstance(name, str):
        raise InvalidInput("project and name must be strings", field="name")
    store_views.delete_view(state().store, project, name, by=who())
    return {"deleted": True, "project": project, "name": name}
