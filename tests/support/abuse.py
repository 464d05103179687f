"""Abusive uploads and what a server does meanwhile (shared by the ingest-limit test and
``bench/bench_abuse.py``): gzip bodies that inflate to far more than any limit, and a probe
that sends one from a thread while it times ``GET /api/v1/health`` and samples the server
process's resident memory."""

from __future__ import annotations

import http.client
import random
import threading
import time
import zlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import psutil

MIB = 1024 * 1024


def _records(count: int, start: int, rng: random.Random) -> bytes:
    parts = [
        f'[{start + i},1700000000000,{{"loss":{rng.random():.3f},"acc":{rng.random():.3f}}}]'
        for i in range(count)
    ]
    return (",".join(parts) + ",").encode()


def gzip_records(inflated: int, *, dense: bool) -> bytes:
    """A gzip body ``{"records": [...]}`` of about ``inflated`` bytes of JSON metric records.

    ``dense``: values vary (about 5:1: 200 MiB of JSON is ~38 MiB on the wire); otherwise
    a few KiB repeated (a "zip bomb": 200 MiB of JSON is ~3 MiB on the wire).
    """
    rng = random.Random(9)
    deflate = zlib.compressobj(1, zlib.DEFLATED, 31)
    out = [deflate.compress(b'{"records":[')]
    pool = (
        [_records(20_000, 20_000 * i, rng) for i in range(8)] if dense else [_records(50, 0, rng)]
    )
    written, index = 0, 0
    while written < inflated:
        chunk = pool[index % len(pool)]
        out.append(deflate.compress(chunk))
        written += len(chunk)
        index += 1
    out.append(deflate.compress(b'[0,0,{"x":1}]]}'))
    out.append(deflate.flush())
    return b"".join(out)


@dataclass
class AbuseReport:
    """Health latencies (seconds) while the upload ran, the server's peak RSS and growth."""

    health_s: list[float] = field(default_factory=list)
    health_failures: int = 0
    rss_before: int = 0
    rss_peak: int = 0
    upload_status: int | str = "not sent"
    upload_s: float = 0.0

    @property
    def rss_growth(self) -> int:
        return self.rss_peak - self.rss_before

    def percentile(self, q: float) -> float:
        ordered = sorted(self.health_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# The abusive client holds a `log` token (the worst case SECURITY.md names: an anonymous
# request never reaches the body); servers started for these tests and the benchmark take it.
ABUSER_TOKEN = "abuse-" + "0123456789abcdefghijklmnopqrstuvwxyz"


def _post(url: str, path: str, body: bytes, report: AbuseReport) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    started = time.monotonic()
    try:
        conn.request(
            "POST",
            path,
            body=body,
            headers={
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "Authorization": f"Bearer {ABUSER_TOKEN}",
            },
        )
        response = conn.getresponse()
        response.read()
        report.upload_status = response.status
    except OSError as exc:  # the server may close the socket on a body it will not read
        report.upload_status = type(exc).__name__
    finally:
        report.upload_s = time.monotonic() - started
        conn.close()


def _health(url: str) -> float | None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    started = time.monotonic()
    try:
        conn.request("GET", "/api/v1/health")
        response = conn.getresponse()
        response.read()
        return time.monotonic() - started if response.status == 200 else None
    except OSError:
        return None
    finally:
        conn.close()


def upload_while_probing(
    url: str, pid: int, path: str, body: bytes, *, min_probes: int = 20, interval: float = 0.02
) -> AbuseReport:
    """POST ``body`` to ``path`` from a thread; meanwhile time ``/api/v1/health`` every
    ``interval`` seconds and sample the RSS of process ``pid`` (at least ``min_probes``
    probes, and until the upload has its answer)."""
    process = psutil.Process(pid)
    report = AbuseReport(rss_before=process.memory_info().rss)
    report.rss_peak = report.rss_before
    sender = threading.Thread(target=_post, args=(url, path, body, report), daemon=True)
    sender.start()
    probes = 0
    while sender.is_alive() or probes < min_probes:
        latency = _health(url)
        if latency is None:
            report.health_failures += 1
        else:
            report.health_s.append(latency)
        report.rss_peak = max(report.rss_peak, process.memory_info().rss)
        probes += 1
        time.sleep(interval)
    sender.join(timeout=120)
    return report
