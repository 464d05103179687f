"""Helpers shared by the dashboard backend tests (tests/web)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import Lines

TOKEN = "s3cret-token-for-tests-only-0123456789"  # strong enough for a public bind
MUTATING = ("POST", "PUT", "PATCH", "DELETE")
TRACKER = [sys.executable, "-c", "from tracker.cli import main; main()"]
SCRIPTS = Path(__file__).resolve().parents[1] / "web" / "scripts"


def envelope(response: Any) -> dict[str, Any]:
    """The error object of a response, after checking it is exactly the envelope."""
    assert response.mimetype == "application/json", response.data[:200]
    body = response.get_json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "field"} and {"code", "message"} <= set(error)
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    return error


# The MLflow-compatible routes (web/views/mlflow.py) answer errors in MLflow's own shape.
# (a tuple: str.startswith takes one)
MLFLOW_PREFIX = ("/api/2.0/mlflow/", "/api/2.0/mlflow-artifacts/", "/api/3.0/mlflow/")
MLFLOW_CODES = {  # our code -> MLflow's error_code on the MLflow routes
    "unauthorized": "UNAUTHENTICATED",
    "forbidden": "PERMISSION_DENIED",
    "forbidden_scope": "PERMISSION_DENIED",
    "unsupported_media_type": "BAD_REQUEST",
}


def error_of(response: Any, url: str) -> dict[str, str]:
    """The envelope's error -- or, on the MLflow routes, MLflow's body checked for exactly
    ``{"error_code", "message"}`` and returned as ``{"mlflow_code", "message"}``."""
    if not url.startswith(MLFLOW_PREFIX):
        return envelope(response)
    assert response.mimetype == "application/json", response.data[:200]
    body = response.get_json()
    assert set(body) == {"error_code", "message"}, body
    assert isinstance(body["message"], str) and body["message"]
    return {"mlflow_code": body["error_code"], "message": body["message"]}


def has(error: dict[str, str], code: str | None = None, field: str | None = None) -> bool:
    """The error has this code and names this field (MLflow's shape names it in the message)."""
    if "mlflow_code" in error:
        return (code is None or error["mlflow_code"] == MLFLOW_CODES[code]) and (
            field is None or field in error["message"]
        )
    return (code is None or error["code"] == code) and (field is None or error["field"] == field)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A local port that refuses connections while the block runs: bound by a socket that
    never listens, so no other test's server can take it (a port merely free a moment ago
    can be, with tests running in parallel)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


class Proc:
    """A real process in its own session; stdout lines can be awaited, output is kept."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.popen = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            cwd=cwd, start_new_session=True,
        )  # fmt: skip
        self.lines = Lines(self.popen.stdout)  # type: ignore[arg-type]

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        """Bounded wait for an output line starting with ``prefix``."""
        line = self.lines.wait_for(prefix, timeout)
        if line is None:
            self.kill()
            pytest.fail(f"no line starting {prefix!r} within {timeout} s; output:\n{self.output()}")
        return line

    def login_token(self, port: int, timeout: float = 60) -> str:
        """The token of the sign-in link ``tracker ui``/``up`` prints when none is set."""
        line = self.wait_for_line(f"http://127.0.0.1:{port}/login?token=", timeout)
        return line.split("token=", 1)[1]

    def output(self) -> str:
        """The output seen so far; all of it once the process has ended."""
        if self.popen.poll() is not None:
            return self.lines.rest()
        return "".join(self.lines.seen)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the process did not exit within {timeout} s:\n{self.output()}")

    def kill(self) -> None:
        """SIGKILL the whole session (a gunicorn master and its workers)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)
