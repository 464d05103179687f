"""``GET /api/v1/runs.csv``: the runs table as the user sees it, as a CSV download.

The same arguments as ``GET /api/v1/runs`` (``q``, ``project``, ``tag``, ``sort``, ``order``,
``limit``, ``offset``, ``config``, ``metrics``, ``deleted``; parsed by the same
``search_spec``) give the same rows in the same order; the columns are the table's: id,
starred, name, status (and failure class), project, tags, started, duration, then one column per
chosen config key (``config.<key>``) and metric (``metrics.<key>``, the last value). Every
cell goes through :func:`tracker.rules.csv_cells.csv_cell`: quoted by the ``csv`` module,
text that a spreadsheet would run as a formula prefixed with ``'`` (OWASP).

Errors are the API's JSON envelope (a bad query: 400 naming the position), never a CSV.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response

from tracker.rules.csv_cells import csv_cell
from tracker.store import run_search
from tracker.store.run_search import RunHit, RunSearch
from tracker.web.plumbing.context import state
from tracker.web.views.runs import search_spec

__all__ = ["bp", "table_rows"]

bp = Blueprint("runs_csv", __name__, url_prefix="/api/v1")

ATTRIBUTE_HEADERS = (
    "id", "starred", "name", "status", "failure_class", "project", "tags", "started",
    "duration_s",
)  # fmt: skip


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def table_rows(spec: RunSearch, hits: Sequence[RunHit]) -> list[list[str]]:
    """The header and one row per run, as CSV cell text (times in UTC, ISO 8601)."""
    header = [
        *ATTRIBUTE_HEADERS,
        *(f"config.{key}" for key in spec.config_columns),
        *(f"metrics.{key}" for key in spec.metric_columns),
    ]
    rows = [[csv_cell(h) for h in header]]
    for hit in hits:
        values: list[Any] = [
            hit.id, hit.starred, hit.name, hit.status, hit.failure_class, hit.project,
            ", ".join(hit.tags), _iso(hit.started_at), hit.duration,
        ]  # fmt: skip
        values += [hit.config.get(key) for key in spec.config_columns]
        values += [hit.metrics.get(key) for key in spec.metric_columns]
        rows.append([csv_cell(v) for v in values])
    return rows


@bp.get("/runs.csv")
def runs_csv() -> Response:
    """The current runs table view as ``runs.csv`` (an attachment, never cached).

    400 for a bad query or argument (the JSON envelope), 503 when the store is down.
    """
    spec = search_spec()
    page = run_search.search_runs(state().store, spec)
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(table_rows(spec, page.runs))
    response = Response(out.getvalue(), mimetype="text/csv")
    response.headers["Content-Disposition"] = 'attachment; filename="runs.csv"'
    response.headers["X-Total-Count"] = str(page.total)
    return response
