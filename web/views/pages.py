"""The dashboard's HTML pages: thin shells that load their data from the JSON API.

Each page renders a template with the ids it needs (as ``data-`` attributes, since the
Content-Security-Policy forbids inline scripts); the page's script in ``web/static/``
fetches everything else from ``/api/v1``. plotly.js is vendored
(``web/static/vendor/plotly.min.js``, version :data:`PLOTLY_JS_VERSION`) and served from
here with a year-long cache, never from a CDN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, render_template, send_file

from tracker.web.plumbing.params import int_list_arg

__all__ = ["MAX_COMPARE", "PLOTLY_JS", "PLOTLY_JS_VERSION", "bp"]

bp = Blueprint("pages", __name__, static_folder=None)  # templates: the app's web/templates

MAX_COMPARE = 200
ONE_YEAR = 365 * 24 * 3600


# plotly.js as vendored, unchanged, from the plotly Python wheel (web/static/vendor/README.md
# says how to upgrade it); a test checks the file's own header names this version.
PLOTLY_JS_VERSION = "4.1.1"
PLOTLY_JS = Path(__file__).resolve().parent.parent / "static" / "vendor" / "plotly.min.js"


@bp.app_context_processor
def _asset_versions() -> dict[str, Any]:
    # The version in the URL busts the year-long browser cache when plotly.js is upgraded.
    return {"plotly_version": PLOTLY_JS_VERSION}


# This fixed rule wins over the app's static route (``/static/<path:filename>``), which would
# serve the same file without the immutable cache header.
@bp.get("/static/vendor/plotly.min.js")
def plotly_js() -> Any:
    response = send_file(PLOTLY_JS, mimetype="text/javascript", max_age=ONE_YEAR)
    response.headers["Cache-Control"] = f"public, max-age={ONE_YEAR}, immutable"
    return response


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
