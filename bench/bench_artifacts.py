"""Artifact storage throughput: the store, the HTTP routes, an S3-protocol server.

1. ``put_artifact`` of a ``--mib`` (256) MiB file into a directory root on SQLite (hash,
   copy, fsync, rename, row), then reading it back through ``open_artifact``.
2. The same file over HTTP: ``PUT /api/v1/runs/<id>/artifacts/<path>`` (streamed to the
   root's tmp/, hashed, stored) and a streamed ``GET`` back, against a real threaded
   werkzeug server on loopback (a single client; gunicorn is not involved).
3. With moto installed: ``put_file`` / ``open`` of the file against moto's S3 server
   (``python -m moto.server`` in a subprocess; multipart past 64 MiB). moto keeps objects in
   memory in Python, so this measures the client path and moto, not a real S3.

    python bench/bench_artifacts.py [--quick] [--json out.json] [--mib 256]

Every read-back is checked byte for byte (sha256); a mismatch exits non-zero.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import common

from tracker.store.runs import create_run


def _file(path: Path, mib: int) -> str:
    digest = hashlib.sha256()
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(mib):
            chunk = block[i % 13 :] + block[: i % 13]
            digest.update(chunk)
            f.write(chunk)
    return digest.hexdigest()


def _drain(stream: Any) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def _check(what: str, got: str, want: str) -> None:
    if got != want:
        sys.exit(f"{what}: read back sha256 {got}, expected {want}")


def bench_store(work: Path, src: Path, sha: str, mib: int) -> list[list[Any]]:
    from tracker.store import Store
    from tracker.store import artifacts as art

    store = Store(f"sqlite:///{work / 'store.db'}")
    run = create_run(store, "bench", "store").id
    t0 = time.perf_counter()
    art.put_artifact(store, run, "big.bin", src)
    put_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with art.open_artifact(store, run, "big.bin") as f:
        _check("store read", _drain(f), sha)
    get_s = time.perf_counter() - t0
    store.close()
    return [["store put_artifact (file)", mib / put_s], ["store open_artifact", mib / get_s]]


def bench_http(work: Path, src: Path, sha: str, mib: int) -> list[list[Any]]:
    from werkzeug.serving import make_server

    from tracker.web.app import create_app

    app = create_app({"STORE_URI": f"sqlite:///{work / 'web.db'}", "NO_AUTH": True})
    run = create_run(app.extensions["tracker"].store, "bench", "http").id
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/api/v1/runs/{run}/artifacts/big.bin"
    try:
        with open(src, "rb") as body:
            request = urllib.request.Request(
                url, data=body, method="PUT", headers={"Content-Length": str(src.stat().st_size)}
            )
            t0 = time.perf_counter()
            with urllib.request.urlopen(request) as resp:
                resp.read()
            put_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with urllib.request.urlopen(url) as resp:
            _check("HTTP GET", _drain(resp), sha)
        get_s = time.perf_counter() - t0
    finally:
        server.shutdown()
        app.extensions["tracker"].store.close()
    return [["HTTP PUT (streamed)", mib / put_s], ["HTTP GET (streamed)", mib / get_s]]


def bench_s3(src: Path, sha: str, mib: int) -> list[list[Any]]:
    try:
        import boto3
        import moto.server  # noqa: F401
    except ImportError:
        common.progress("moto or boto3 not installed: S3 part skipped")
        return []
    from tracker.store.blobs_s3 import S3BlobStore

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                sys.exit("moto server did not start within 60 s")
            time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                              aws_secret_access_key="bench", region_name="us-east-1")  # fmt: skip
        client.create_bucket(Bucket="bench")
        blobs = S3BlobStore("s3://bench/artifacts", client=client)
        t0 = time.perf_counter()
        blobs.put_file(src, sha)
        put_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with blobs.open(sha) as f:
            _check("S3 read", _drain(f), sha)
        get_s = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return [["S3 put_file (moto, multipart)", mib / put_s], ["S3 open (moto)", mib / get_s]]


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="file size in MiB")
    args = parser.parse_args()
    mib = 8 if args.quick else args.mib
    cmd = common.print_header(f"artifact storage throughput, a {mib} MiB file")
    rows: list[list[Any]] = []
    with common.workdir(args.workdir, args.keep) as work:
        src = work / "src.bin"
        sha = _file(src, mib)
        common.progress("store")
        rows += bench_store(work, src, sha, mib)
        common.progress("HTTP")
        rows += bench_http(work, src, sha, mib)
        common.progress("S3 (moto)")
        rows += bench_s3(src, sha, mib)
    common.print_table("throughput", ["path", "MiB/s"], rows)
    common.write_json(
        args.json,
        {"command": cmd, "env": common.environment(), "mib": mib,
         "mib_per_s": {name: value for name, value in rows}},
    )  # fmt: skip


if __name__ == "__main__":
    main()
