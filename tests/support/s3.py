"""A real S3-protocol server for the tests: moto's server mode in a subprocess on a free
loopback port (``python -m moto.server``), spoken to over HTTP by the real boto3 client.

``s3_server`` (session) starts it once; ``s3_env`` points boto3 and the tracker at it
(dummy credentials, ``TRACKER_S3_ENDPOINT_URL``) and gives each test a bucket of its own.
Skipped with a reason where moto or boto3 is not installed (the ``dev`` extra has both).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.polling import wait_for
from tests.support.web import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen[bytes]

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, **_boto_kwargs())


def _boto_kwargs() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    pytest.importorskip("boto3", reason="the s3 extra (boto3) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] (dev extra) is not installed")
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **CREDENTIALS},
    )
    try:
        wait_for(
            lambda: process.poll() is not None or _listening(port),
            60,
            f"the moto S3 server on port {port}",
        )
        if process.poll() is not None:
            pytest.fail(f"moto server exited with {process.returncode}; see {log.name}")
        yield S3Server(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh bucket; boto3 (credentials, region) and the tracker (endpoint) point at the
    server. Yields ``s3://<bucket>/<prefix>``."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TRACKER_S3_ENDPOINT_URL", s3_server.endpoint)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    bucket = "t-" + uuid.uuid4().hex[:12]
    s3_server.client().create_bucket(Bucket=bucket)
    yield f"s3://{bucket}/artifacts"
