"""The run page's logs API shows the console output of a run started by hand.

A real training process (``tests/core/scripts/signals_script.py``) prints and fails; its
teed output is then read through ``GET /api/v1/runs/<id>/logs`` (SQLite and PostgreSQL).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from flask.testing import FlaskClient

SCRIPT = str(Path(__file__).parents[1] / "core" / "scripts" / "signals_script.py")
pytestmark = pytest.mark.slow


def test_logs_api_shows_a_direct_runs_console(client: FlaskClient, store_url: str) -> None:
    done = subprocess.run(
        [sys.executable, SCRIPT, store_url, "raise"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 1
    run_id = int(done.stdout.splitlines()[0].split()[1])
    doc = client.get(f"/api/v1/runs/{run_id}/logs").json
    assert doc["job_id"] is None
    text = "".join(c["text"] for c in doc["chunks"])
    assert "line one on stdout\n" in text and "ValueError: bad batch shape (3, 4)" in text
    assert {c["stream"] for c in doc["chunks"]} == {"stdout", "stderr"}
    err = client.get(f"/api/v1/runs/{run_id}/logs?stream=stderr").json
    assert all(c["stream"] == "stderr" for c in err["chunks"])
    first = client.get(f"/api/v1/runs/{run_id}/logs?limit=1").json
    rest = client.get(f"/api/v1/runs/{run_id}/logs?after={first['next_after']}").json
    assert [c["id"] for c in first["chunks"] + rest["chunks"]] == [c["id"] for c in doc["chunks"]]
    tail = client.get(f"/api/v1/runs/{run_id}/logs?tail=1&limit=1").json
    assert tail["chunks"] == doc["chunks"][-1:]
    run = client.get(f"/api/v1/runs/{run_id}").json
    assert run["failure_class"] == "python_exception"
