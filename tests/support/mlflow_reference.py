"""A real MLflow tracking server (``mlflow server``) as a subprocess, for parity tests and
the ingest benchmark: SQLite backend and a local artifact destination in a directory of the
caller's, on a free loopback port, serving artifacts in proxied mode (``mlflow-artifacts:``)
exactly as a team's shared server does."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowReference:
    """``mlflow server`` on ``url`` until ``stop()``; its output goes to ``<dir>/server.log``."""

    def __init__(self, directory: Path, startup_timeout: float = 120.0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = directory / "server.log"
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
        argv = [
            sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
            "--artifacts-destination", str(directory / "artifacts"),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not start: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=20)
