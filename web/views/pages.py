"""The dashboard's HTML pages: thin shells that load their data from the JSON API.

Each page renders a template with the ids it needs (as ``data-`` attributes, since the
Content-Security-Policy forbids inline scripts); the page's script in ``web/static/``
fetches everything else from ``/api/v1``. plotly.js is vendored, never loaded from a CDN:
the pages load :data:`PLOTLY_JS`, a partial bundle of version :data:`PLOTLY_JS_VERSION`
(``scripts/build_plotly.sh``); the full bundle :data:`PLOTLY_FULL_JS` is loaded only when a
logged figure needs a trace type the partial one lacks (``web/static/vendor/README.md``).
Both, like every static file, are served with a content hash in the URL and a year-long
cache (``tracker.web.plumbing.assets``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, render_template

from tracker.web.plumbing.params import int_list_arg

__all__ = ["MAX_COMPARE", "PLOTLY_FULL_JS", "PLOTLY_JS", "PLOTLY_JS_VERSION", "bp"]

bp = Blueprint("pages", __name__, static_folder=None)  # templates: the app's web/templates

MAX_COMPARE = 200


# plotly.js as vendored (web/static/vendor/README.md says how each file was made and how to
# upgrade); a test checks that each file's own header names this version.
PLOTLY_JS_VERSION = "4.1.1"
VENDOR = Path(__file__).resolve().parent.parent / "static" / "vendor"
PLOTLY_JS = VENDOR / "plotly-charts.min.js"  # scatter, heatmap, bar, ...: what the pages draw
PLOTLY_FULL_JS = VENDOR / "plotly.min.js"  # every trace type: for logged figures only


@bp.get("/")
def runs() -> Any:
    return render_template("runs.html", page="runs")


@bp.get("/runs/<int:run_id>")
def run(run_id: int) -> Any:
    return render_template("run.html", page="runs", run_id=run_id)


@bp.get("/compare")
def compare() -> Any:
    ids = int_list_arg("runs", limit=MAX_COMPARE)
    return render_template("compare.html", page="runs", run_ids=",".join(map(str, ids)))


@bp.get("/jobs")
def jobs() -> Any:
    return render_template("jobs.html", page="jobs")


@bp.get("/jobs/<int:job_id>")
def job(job_id: int) -> Any:
    return render_template("job.html", page="jobs", job_id=job_id)


@bp.get("/sweeps")
def sweeps() -> Any:
    return render_template("sweeps.html", page="sweeps")


@bp.get("/sweeps/<int:sweep_id>")
def sweep(sweep_id: int) -> Any:
    return render_template("sweep.html", page="sweeps", sweep_id=sweep_id)
