"""Shared helpers for the benchmarks: options, timing statistics, tables, JSON, file sizes.

The benchmarks are scripts (``python bench/bench_log.py``), so this module is imported as
``common`` from the ``bench/`` folder. Nothing here measures anything by itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import sqlite3
import sys
import tempfile
import uuid
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tracker.store.metrics import count_points

PG_ENV = "TRACKER_BENCH_PG_URL"
KEYS = ("train/loss", "train/acc", "lr", "grad_norm", "tokens_per_s")


def base_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark has: --quick, --json, --no-mlflow, --workdir, --keep."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="a small version (< 30 s) for smoke tests"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument(
        "--no-mlflow", action="store_true", help="skip the MLflow side of the comparison"
    )
    parser.add_argument(
        "--workdir", metavar="DIR", help="put the databases here (default: a temporary folder)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the databases after the run (with --workdir)"
    )
    return parser


def command_line() -> str:
    """The command that started this process, as it can be pasted into a shell."""
    return shlex.join(["python", *sys.argv])


def environment() -> dict[str, Any]:
    """Versions and machine facts that numbers depend on."""
    import sqlalchemy

    import tracker

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "tracker": tracker.__version__,
        "sqlalchemy": sqlalchemy.__version__,
        "sqlite": sqlite3.sqlite_version,
        "loadavg_at_end": _loadavg(),
    }
    for name in ("numpy", "torch", "mlflow", "psycopg"):
        module = sys.modules.get(name)
        if module is not None:
            env[name] = getattr(module, "__version__", "?")
    return env


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def print_header(title: str) -> str:
    """Print the exact command first, so every pasted result says how it was made."""
    cmd = command_line()
    print(f"$ {cmd}")
    print(f"# {title}")
    print(f"# python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs")
    print(f"# load average at start: {_loadavg()} (other work on the machine skews timings)")
    sys.stdout.flush()
    return cmd


@contextlib.contextmanager
def workdir(path: str | None, keep: bool) -> Iterator[Path]:
    """A folder for the benchmark's databases; a temporary one is always removed."""
    if path is None:
        with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
            yield Path(tmp)
        return
    target = Path(path)
    target.mkdir(parents=True, exist_ok=True)
    try:
        yield target
    finally:
        if not keep:
            shutil.rmtree(target, ignore_errors=True)


# ---------------------------------------------------------------- workload


def metric_values(i: int) -> tuple[float, float, float, float, float]:
    """Five non-integral floats for step ``i`` (SQLite stores integral REALs compactly)."""
    base = i * 1e-4
    return base + 0.1234567, base + 0.2345678, base + 0.3456789, base + 0.4567891, base + 0.5678912


# ---------------------------------------------------------------- statistics


def new_samples(n: int) -> array[int]:
    """A preallocated buffer of ``n`` nanosecond samples (no GC-tracked objects)."""
    return array("q", bytes(8 * n))


def call_stats(samples_ns: Sequence[int]) -> dict[str, float]:
    """Median, p99, p99.9, max and mean of per-call durations, in microseconds."""
    ordered = sorted(samples_ns)
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")

    def pct(p: float) -> float:
        return ordered[min(n - 1, int(p * n))] / 1000.0

    return {
        "calls": n,
        "median_us": pct(0.5),
        "p99_us": pct(0.99),
        "p999_us": pct(0.999),
        "max_us": ordered[-1] / 1000.0,
        "mean_us": sum(ordered) / n / 1000.0,
    }


def timer_overhead_ns(clock: Callable[[], int], n: int = 100_000) -> float:
    """Median cost of an empty timed region (two clock reads), to read small numbers right."""
    samples = new_samples(n)
    for i in range(n):
        t0 = clock()
        samples[i] = clock() - t0
    return call_stats(samples)["median_us"] * 1000.0


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return numerator / denominator


# ---------------------------------------------------------------- checks and sizes


def check_stored(uri: str, run_id: int, expected: int, *, at_least: bool = False) -> None:
    """Count the run's points in the store (a fresh connection); raise if any is missing.

    ``at_least``: the run also holds points the client added itself (step time, RSS)."""
    from tracker.store import Store

    store = Store(uri)
    try:
        stored = count_points(store, run_id)
    finally:
        store.close()
    if stored < expected if at_least else stored != expected:
        raise RuntimeError(f"run {run_id}: {stored:,} points stored, {expected:,} logged")


def sqlite_file_bytes(db_path: Path) -> int:
    """Main database file size after moving the WAL into it (``wal_checkpoint(TRUNCATE)``)."""
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            raise RuntimeError(f"wal_checkpoint(TRUNCATE) on {db_path.name} was blocked")
    finally:
        conn.close()
    return db_path.stat().st_size


@contextlib.contextmanager
def fresh_pg_database(server_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the server at ``server_url``; dropped afterwards."""
    import sqlalchemy as sa

    url = sa.make_url(server_url)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    name = "tracker_bench_" + uuid.uuid4().hex[:10]
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# ---------------------------------------------------------------- output


def fmt(value: Any) -> str:
    """Numbers as people read them in a table: 3 significant-ish digits, thousands split."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value >= 10_000:
            return f"{value:,.0f}"
        if value >= 100:
            return f"{value:.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print(
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        )
    )
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    sys.stdout.flush()


def write_json(path: str | None, doc: dict[str, Any]) -> None:
    if path is None:
        return
    Path(path).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nwrote {path}")


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)
