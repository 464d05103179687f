"""The dashboard under an abusive upload: health latency and server memory (issue 9).

The production server (gunicorn, one gthread worker with 8 threads, as ``tracker ui``
starts it) on a fresh SQLite file. For each abusive body -- ~200 MiB of JSON metric records
as a ~38 MiB gzip body, and as a ~3 MiB "zip bomb" -- a thread POSTs it to
``/api/v1/runs/<id>/metrics`` while the main thread times ``GET /api/v1/health`` every 20 ms
and samples the worker's resident memory. Reported: the upload's answer and duration, health
latency p50/p99/max, and the worker's RSS before and at its peak.

Then the upload paths (issue 27, item 2), against a server with a 1 MiB upload limit
(``MAX_ARTIFACT_BYTES``): a 16 MiB body PUT to ``/api/v1`` and to MLflow's artifact route,
each announced (Content-Length) and streamed (chunked, no length), and 16 multipart parts
of 1 MiB to one MLflow multipart upload. Reported per path: the answers, the worker's RSS
before and at its peak, and the artifact root's bytes before, at their peak and after
(sampled every 10 ms): a body past the limit is refused while streaming, so neither grows.

    python bench/bench_abuse.py [--quick] [--json out.json]
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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


def _serve(db: Path, port: int, config: str = "") -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = f"sqlite:///{db}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1",
            "--worker-class", "gthread", "--threads", "8", "--log-level", "warning",
            f"tracker.web.app:create_app({{'TOKEN': {ABUSER_TOKEN!r}{config}}})"]  # fmt: skip
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


class Sampler:
    """Samples a process's RSS and a directory's bytes every 10 ms from a thread."""

    def __init__(self, pid: int, root: Path) -> None:
        self.process, self.root = psutil.Process(pid), root
        self.rss_peak = self.rss_before = self.process.memory_info().rss
        self.disk_peak = self.disk_before = _bytes_under(root)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.rss_peak = max(self.rss_peak, self.process.memory_info().rss)
            self.disk_peak = max(self.disk_peak, _bytes_under(self.root))

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {
            "rss_before_mib": round(self.rss_before / MIB, 1),
            "rss_peak_mib": round(self.rss_peak / MIB, 1),
            "disk_before_mib": round(self.disk_before / MIB, 2),
            "disk_peak_mib": round(self.disk_peak / MIB, 2),
            "disk_after_mib": round(_bytes_under(self.root) / MIB, 2),
        }


def _bytes_under(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def _send(url: str, method: str, path: str, size: int, *, chunked: bool) -> int | str:
    """One body of ``size`` bytes; the answer's status, or the error when the server closed
    the connection on a body it would not read."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        conn.putrequest(method, path)
        conn.putheader("Authorization", f"Bearer {ABUSER_TOKEN}")
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(size))
        conn.endheaders()
        block = b"x" * (256 * 1024)
        try:
            for offset in range(0, size, len(block)):
                piece = block[: min(len(block), size - offset)]
                conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                conn.send(b"0\r\n\r\n")
        except OSError:
            pass  # refused mid-body: the answer may still be readable
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError as exc:
        return type(exc).__name__
    finally:
        conn.close()


def _post_json(url: str, path: str, doc: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url + path, data=json.dumps(doc).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {ABUSER_TOKEN}"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def measure_upload_paths(work: Path, size: int) -> dict[str, Any]:
    """Each upload path against a 1 MiB limit (see the module doc)."""
    root = work / "blobs"
    root.mkdir()
    port = _free_port()
    server = _serve(work / "uploads.db", port, f", 'MAX_ARTIFACT_BYTES': {MIB}, "
                    f"'ARTIFACT_ROOT': {str(root)!r}")  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    results: dict[str, Any] = {}
    try:
        _wait_healthy(url)
        worker = psutil.Process(server.pid).children()[0]
        run = HttpSink(url, ABUSER_TOKEN).create_run("abuse", None, {}, [])
        puts = {
            "v1 PUT": f"/api/v1/runs/{run.id}/artifacts/big.bin",
            "MLflow PUT": f"/api/2.0/mlflow-artifacts/artifacts/0/{run.id}/artifacts/big.bin",
        }
        for name, path in puts.items():
            for chunked in (False, True):
                sampler = Sampler(worker.pid, root)
                started = time.monotonic()
                status = _send(url, "PUT", path, size, chunked=chunked)
                seconds = time.monotonic() - started
                how = "streamed" if chunked else "announced"
                results[f"{name}, {how}"] = {
                    "answers": str(status), "seconds": round(seconds, 3), **sampler.stop(),
                }  # fmt: skip
        where = f"0/{run.id}/artifacts/parts"
        parts = size // MIB
        created = _post_json(url, f"/api/2.0/mlflow-artifacts/mpu/create/{where}",
                             {"path": "/x/m.bin", "num_parts": parts})  # fmt: skip
        sampler = Sampler(worker.pid, root)
        started = time.monotonic()
        answers: dict[str, int] = {}
        for number in range(1, parts + 1):
            status = _send(url, "PUT", f"/api/2.0/mlflow-artifacts/mpu/part/"
                           f"{created['upload_id']}/{number}", MIB, chunked=False)  # fmt: skip
            answers[str(status)] = answers.get(str(status), 0) + 1
        seconds = time.monotonic() - started
        results[f"MLflow multipart, {parts} x 1 MiB parts"] = {
            "answers": ", ".join(f"{n} x {s}" for s, n in sorted(answers.items())),
            "seconds": round(seconds, 3), **sampler.stop(),
        }  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    return results


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
    with common.workdir(args.workdir, args.keep) as work:
        doc["upload_paths"] = measure_upload_paths(work, 16 * MIB)
    rows = [
        [name, r["answers"], r["seconds"], r["rss_before_mib"], r["rss_peak_mib"],
         r["disk_before_mib"], r["disk_peak_mib"], r["disk_after_mib"]]
        for name, r in doc["upload_paths"].items()
    ]  # fmt: skip
    common.print_table(
        "16 MiB through each upload path against a 1 MiB limit (MAX_ARTIFACT_BYTES)",
        ["path", "answers", "seconds", "RSS before MiB", "RSS peak MiB", "disk before MiB",
         "disk peak MiB", "disk after MiB"], rows,
    )  # fmt: skip
    common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
