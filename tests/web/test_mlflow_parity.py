"""MLflow drop-in parity: one representative real-world MLflow script (``tests/support/
mlflow_script.py``: the fluent API and the client end to end, 100+ calls) runs unchanged
against a real ``mlflow server`` and against ours, and every call's observable result must be
the same. The documented, deliberate differences live in ``DELIBERATE`` below, each listed in
web/API.md ("Deliberate differences from MLflow"), and nowhere else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from tests.support.mlflow_reference import MlflowReference
from tests.support.servers import ServerThread

# a real mlflow server and the script twice: minutes on a busy machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
CLAMPED_INF = "1.7976931348623157e+308"


def clamp_infinities(value: Any) -> Any:
    """MLflow's SQL store clamps ±Inf to ±max float; ours keeps ±Inf exactly."""
    if value in ("inf", "-inf"):
        return value.replace("inf", CLAMPED_INF)
    if isinstance(value, dict):
        return {k: clamp_infinities(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clamp_infinities(v) for v in value]
    return value


# name (as written in web/API.md) -> what it does to OUR record before the comparison
DELIBERATE: dict[str, Callable[[Any], Any]] = {
    "±Inf kept exactly": clamp_infinities,
}


def run_script(tracking_uri: str, out: Path) -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "120",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    for var in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        env.pop(var, None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.mlflow_script", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    records: list[dict[str, Any]] = json.loads(out.read_text())
    return records


@pytest.fixture(scope="module")
def reference_records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("mlflow-reference")
    server = MlflowReference(directory / "server")
    try:
        yield run_script(server.url, directory / "records.json")
    finally:
        server.stop()


def observable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "message"}


def test_the_script_is_representative(reference_records: list[dict[str, Any]]) -> None:
    assert len(reference_records) >= 80
    labels = " ".join(r["label"] for r in reference_records)
    for needed in (
        "experiment", "nested", "log_param", "set_tag", "no step", "search_runs filter",
        "order", "delete_run", "restore_run", "rename", "log_input", "log_model",
    ):  # fmt: skip
        assert needed in labels or (needed == "nested" and "child" in labels), needed


def test_the_deliberate_differences_are_documented() -> None:
    api = (ROOT / "web" / "API.md").read_text()
    section = api.split("Deliberate differences from MLflow", 1)
    assert len(section) == 2, "web/API.md lacks its 'Deliberate differences from MLflow' list"
    for name in DELIBERATE:
        assert name in section[1], f"{name!r} is not documented in web/API.md"


def test_our_server_answers_the_script_as_mlflow_does(
    reference_records: list[dict[str, Any]],
    make_app: Callable[..., Flask],
    serve: Callable[[Flask], ServerThread],
    tmp_path: Path,
) -> None:
    # PostgreSQL has no default artifact root (nothing sits next to the database)
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "artifacts"))
    ours = run_script(serve(app).url, tmp_path / "ours.json")
    mismatches = []
    for theirs, mine in zip(reference_records, ours, strict=True):
        adjusted = observable(mine)
        for adjust in DELIBERATE.values():
            adjusted = adjust(adjusted)
        if adjusted != observable(theirs):
            mismatches.append(
                f"{theirs['label']}:\n   mlflow: {json.dumps(theirs)[:400]}\n"
                f"   ours:   {json.dumps(mine)[:400]}"
            )
    assert not mismatches, f"{len(mismatches)} calls differ:\n" + "\n".join(mismatches)
