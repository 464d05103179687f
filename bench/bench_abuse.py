"""The dashboard under an abusive upload: health latency and server memory (issue 9).

The production server (gunicorn, one gthread worker with 8 threads, as ``tracker ui``
starts it) on a fresh SQLite file. For each abusive body -- ~200 MiB of JSON metric records
as a ~38 MiB gzip body, and as a ~3 MiB "zip bomb" -- a thread POSTs it to
``/api/v1/runs/<id>/metrics`` while the main thread times ``GET /api/v1/health`` every 20 ms
and samples the worker's resident memory. Reported: the upload's answer and duration, health
latency p50/p99/max, and the worker's RSS before and at its peak.

    python bench/bench_abuse.py [--quick] [--json out.json]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import common
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.abuse import ABUSER_TOKEN, MIB, gzip_records, upload_while_probing  # noqa: E402
from tracker.client.http_sink import HttpSink  # noqa: E402


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(db: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = f"sqlite:///{db}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1",
            "--worker-class", "gthread", "--threads", "8", "--log-level", "warning",
            f"tracker.web.app:create_app({{'TOKEN': {ABUSER_TOKEN!r}}})"]  # fmt: skip
    return subprocess.Popen(argv, env=env)


def _wait_healthy(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/api/v1/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the server at {url} did not answer /api/v1/health in {timeout} s")


def measure(inflated: int, dense: bool, work: Path) -> dict[str, Any]:
    body = gzip_records(inflated, dense=dense)
    port = _free_port()
    server = _serve(work / f"abuse-{int(dense)}.db", port)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url)
        worker = psutil.Process(server.pid).children()[0]
        run = HttpSink(url, ABUSER_TOKEN).create_run("abuse", None, {}, [])
        report = upload_while_probing(url, worker.pid, f"/api/v1/runs/{run.id}/metrics", body)
    finally:
        server.terminate()
        server.wait(timeout=30)
    ms = [s * 1000 for s in report.health_s]
    return {
        "body_mib": round(len(body) / MIB, 1),
        "inflated_mib": round(inflated / MIB),
        "upload_status": report.upload_status,
        "upload_ms": round(report.upload_s * 1000, 1),
        "health_probes": len(ms),
        "health_failures": report.health_failures,
        "health_p50_ms": round(report.percentile(0.5) * 1000, 2),
        "health_p99_ms": round(report.percentile(0.99) * 1000, 2),
        "health_max_ms": round(max(ms), 2),
        "rss_before_mib": round(report.rss_before / MIB, 1),
        "rss_peak_mib": round(report.rss_peak / MIB, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = common.base_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    inflated = (50 if args.quick else 200) * MIB
    cmd = common.print_header("dashboard under an abusive upload: health latency, server RSS")
    doc: dict[str, Any] = {"benchmark": "abuse", "command": cmd,
                           "params": {"quick": args.quick, "inflated_mib": inflated // MIB},
                           "environment": common.environment()}  # fmt: skip
    with common.workdir(args.workdir, args.keep) as work:
        doc["gzip_body"] = measure(inflated, True, work)
        doc["zip_bomb"] = measure(inflated, False, work)
    rows = [
        [name, r["body_mib"], r["inflated_mib"], r["upload_status"], r["upload_ms"],
         r["health_p50_ms"], r["health_p99_ms"], r["health_max_ms"], r["rss_before_mib"],
         r["rss_peak_mib"]]
        for name, r in (("gzip body", doc["gzip_body"]), ("zip bomb", doc["zip_bomb"]))
    ]  # fmt: skip
    common.print_table(
        f"abusive uploads (each ~{inflated // MIB} MiB of JSON)",
        ["upload", "MiB sent", "MiB JSON", "answer", "upload ms", "health p50 ms",
         "health p99 ms", "health max ms", "RSS before MiB", "RSS peak MiB"], rows
    )  # fmt: skip
    common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
