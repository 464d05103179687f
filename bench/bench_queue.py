"""The job queue: enqueue-to-start latency with an idle worker, and claim throughput.

    python bench/bench_queue.py --pg-url postgresql+psycopg://USER@HOST/DB --json queue.json

Workers are real ``tracker worker`` processes (default settings unless an option says
otherwise), the store a fresh SQLite file and a fresh PostgreSQL database.

* latency: one idle worker; one job at a time, queued at a random moment, whose first
  statement records ``time.time()``; the sample is that minus the time just before
  ``enqueue()``. The worker polls every ``--poll-interval`` (its default, 0.5 s) while the
  queue is empty, so about half of that is expected on top of the claim and the start of
  the process (a Python interpreter with ``-S``).
* throughput: ``--workers`` (8) idle workers, then ``--jobs`` no-op jobs (argv ``true``)
  queued in one transaction; reported: jobs/s from the enqueue to the last job's end, and
  claims/s between the first and the last claim (both from the times stored on the job
  rows); ms per job per worker = workers x elapsed / jobs, everything included (claim,
  spawning ``true``, reading its output, recording the end); and the CPU time per job of
  the workers, of their jobs, of this benchmark and of a PostgreSQL server on this machine.
  Every job must end ``succeeded`` with exactly one attempt, or the benchmark exits
  non-zero.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common

CLI = "import sys; sys.argv[0] = 'tracker'; from tracker.cli import main; main()"
TRACKER = [sys.executable, "-c", CLI]
STAMP = "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"


def start_workers(uri: str, n: int, args: list[str], logdir: Path) -> list[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = uri
    procs = []
    for i in range(n):
        log = open(logdir / f"worker-{i}.log", "wb")  # noqa: SIM115 - owned by the process
        procs.append(
            subprocess.Popen(
                [*TRACKER, "worker", "--gpus", "none", "-q", *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=logdir,
                # each worker in a process group of its own, as on separate hosts: a signal
                # to one never reaches another
                start_new_session=True,
            )
        )
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_until(predicate: Any, timeout: float, what: str, every: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def cpu_seconds(workers: list[subprocess.Popen]) -> dict[str, float]:
    """CPU time used so far by the workers, their finished jobs, this benchmark, and the
    PostgreSQL server processes of this machine (0 when the server runs elsewhere)."""
    import psutil

    own = psutil.Process().cpu_times()
    out = {"workers": 0.0, "jobs": 0.0, "benchmark": own.user + own.system, "postgres": 0.0}
    for w in workers:
        with contextlib.suppress(psutil.Error):
            t = psutil.Process(w.pid).cpu_times()
            out["workers"] += t.user + t.system
            out["jobs"] += t.children_user + t.children_system  # reaped jobs only
    for proc in psutil.process_iter(["name", "cpu_times"]):
        if (proc.info["name"] or "").startswith("postgres") and proc.info["cpu_times"]:
            out["postgres"] += proc.info["cpu_times"].user + proc.info["cpu_times"].system
    return out


def live_workers(store: Any) -> int:
    from tracker.store.workers import list_workers

    return len(list_workers(store, include_lost=False))


def measure_latency(uri: str, samples: int, poll: float, workdir: Path) -> dict[str, Any]:
    from tracker.entities import JobSpec
    from tracker.store import Store, queue

    store = Store(uri)
    workers = start_workers(uri, 1, ["--poll-interval", str(poll)], workdir)
    try:
        wait_until(lambda: live_workers(store) == 1, 60, "the worker to register")
        time.sleep(1.0)  # let it settle into its idle polling
        latencies = []
        rng = random.Random(0)
        for i in range(samples):
            stamp = workdir / f"started-{i}"
            spec = JobSpec(argv=[sys.executable, "-S", "-c", STAMP, str(stamp)])
            t0 = time.time()
            queue.enqueue(store, spec)
            wait_until(lambda p=stamp: p.exists() and p.stat().st_size > 0, 60, f"job {i}")
            latencies.append(float(stamp.read_text()) - t0)
            time.sleep(rng.uniform(0.0, 2 * poll))  # arrivals at random points of the poll cycle
    finally:
        stop_workers(workers)
        store.close()
    ordered = sorted(latencies)
    return {
        "samples": samples,
        "poll_interval_s": poll,
        "median_s": statistics.median(ordered),
        "p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "min_s": ordered[0],
        "max_s": ordered[-1],
    }


def measure_throughput(uri: str, jobs: int, n_workers: int, workdir: Path) -> dict[str, Any]:
    import sqlalchemy as sa

    from tracker.entities import JobSpec
    from tracker.store import Store, queue
    from tracker.store import jobs as store_jobs
    from tracker.store import models as m

    store = Store(uri)
    noop = shutil.which("true") or "/bin/true"
    workers = start_workers(uri, n_workers, [], workdir)
    try:
        wait_until(lambda: live_workers(store) == n_workers, 120, "every worker to register")
        before = store_jobs.count_jobs(store).get("succeeded", 0)
        cpu0 = cpu_seconds(workers)
        t0 = time.time()
        ids = [j.id for j in queue.enqueue_many(store, [JobSpec(argv=[noop])] * jobs)]
        done = before + jobs
        # Polled every 0.2 s: the times come from the job rows, and a tighter loop here
        # would take CPU from the workers it measures.
        succeeded = lambda: store_jobs.count_jobs(store).get("succeeded", 0) == done  # noqa: E731
        wait_until(succeeded, 600, "all jobs", every=0.2)
        cpu: dict[str, float | None] = {
            k: (v - cpu0[k]) * 1000 / jobs for k, v in cpu_seconds(workers).items()
        }
        if store.dialect != "postgresql":
            cpu["postgres"] = None
        mine = m.JobRow.id.in_(ids)
        with store.engine.connect() as conn:
            cols = (
                m.JobRow.created_at,
                m.JobRow.started_at,
                m.JobRow.ended_at,
                m.JobRow.attempt,
                m.JobRow.status,
            )
            rows = conn.execute(sa.select(*cols).where(mine)).all()
            owners = (
                conn.execute(
                    sa.select(m.JobAttemptRow.worker_id)
                    .where(m.JobAttemptRow.job_id.in_(ids))
                    .distinct()
                )
                .scalars()
                .all()
            )
    finally:
        stop_workers(workers)
        store.close()
    if any(r.attempt != 1 or r.status != "succeeded" for r in rows) or len(rows) != jobs:
        raise RuntimeError("a job ran more than once or is missing")
    starts = sorted(r.started_at for r in rows)
    last_end = max(r.ended_at for r in rows)
    held = [r.ended_at - r.started_at for r in rows]
    # enqueue -> start of every job under load (the queue drains in `elapsed`, so the later
    # jobs wait behind the earlier ones: this is queueing time plus claim, not idle latency)
    waited = sorted(r.started_at - r.created_at for r in rows)
    elapsed = last_end - t0
    cycle = n_workers * elapsed / jobs  # one worker's time per job, all included
    return {
        "jobs": jobs,
        "workers": n_workers,
        "workers_used": len(owners),
        "seconds": elapsed,
        "jobs_per_s": jobs / elapsed,
        "claims_per_s": (jobs - 1) / (starts[-1] - starts[0]) if starts[-1] > starts[0] else None,
        "cycle_ms_per_job_per_worker": cycle * 1000,
        "claim_to_end_ms_median": statistics.median(held) * 1000,
        "enqueue_to_start_s": {
            "median": statistics.median(waited),
            "p99": waited[min(len(waited) - 1, int(0.99 * len(waited)))],
            "max": waited[-1],
        },
        "between_jobs_ms": (cycle - statistics.mean(held)) * 1000,
        "cpu_ms_per_job": cpu,
    }


def run_backend(name: str, uri: str, args: Any, workdir: Path) -> dict[str, Any]:
    common.progress(f"{name}: latency, {args.samples} jobs, 1 idle worker")
    latency = measure_latency(uri, args.samples, args.poll_interval, workdir)
    common.progress(f"{name}: throughput, {args.jobs} jobs, {args.workers} workers")
    throughput = measure_throughput(uri, args.jobs, args.workers, workdir)
    return {"latency": latency, "throughput": throughput}


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30, help="latency samples")
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs for throughput")
    parser.add_argument("--workers", type=int, default=8, help="workers for throughput")
    parser.add_argument("--poll-interval", type=float, default=0.5, help="idle worker's poll")
    parser.add_argument("--pg-url", default=os.environ.get(common.PG_ENV))
    parser.add_argument("--no-sqlite", action="store_true", help="only PostgreSQL")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.jobs = min(args.samples, 5), min(args.jobs, 120)
    command = common.print_header("job queue: enqueue-to-start latency, claim throughput")
    results: dict[str, Any] = {}
    with common.workdir(args.workdir, args.keep) as work:
        if not args.no_sqlite:
            (work / "sqlite").mkdir(exist_ok=True)
            uri = f"sqlite:///{work / 'sqlite' / 'queue.db'}"
            results["sqlite"] = run_backend("sqlite", uri, args, work / "sqlite")
        if args.pg_url:
            (work / "pg").mkdir(exist_ok=True)
            with common.fresh_pg_database(args.pg_url) as uri:
                results["postgres"] = run_backend("postgres", uri, args, work / "pg")
        else:
            results["postgres"] = {"skipped": f"no --pg-url or {common.PG_ENV}"}
            print(f"\n(PostgreSQL skipped: give --pg-url or set {common.PG_ENV})")
    report(results)
    targets = {}
    pg = results.get("postgres", {})
    for name, doc in results.items():
        if "latency" in doc:
            value = doc["latency"]["median_s"]
            targets[f"{name}_latency_median_s"] = {"value": value, "target": 1.0,
                                                   "met": value <= 1.0}  # fmt: skip
    if "throughput" in pg:
        value = pg["throughput"]["claims_per_s"]
        targets["postgres_claims_per_s"] = {"value": value, "target": 200, "met": value >= 200}
    common.write_json(
        args.json,
        {"benchmark": "queue", "command": command, "environment": common.environment(),
         "params": vars(args) | {"pg_url": bool(args.pg_url)}, "results": results,
         "targets": targets},
    )  # fmt: skip


def report(results: dict[str, Any]) -> None:
    rows = [
        (name, d["latency"]["median_s"] * 1000, d["latency"]["p90_s"] * 1000,
         d["latency"]["max_s"] * 1000, d["latency"]["poll_interval_s"])
        for name, d in results.items() if "latency" in d
    ]  # fmt: skip
    common.print_table("enqueue -> job process start, idle worker (ms)",
                       ("store", "median", "p90", "max", "poll s"), rows)  # fmt: skip
    throughput_rows = [
        (name, t["jobs"], t["workers"], t["workers_used"], t["jobs_per_s"], t["claims_per_s"],
         t["cycle_ms_per_job_per_worker"], t["claim_to_end_ms_median"], t["between_jobs_ms"],
         t["enqueue_to_start_s"]["median"], t["enqueue_to_start_s"]["p99"])
        for name, d in results.items() if (t := d.get("throughput"))
    ]  # fmt: skip
    cpu_rows = [
        (name, c["workers"], c["jobs"], c["postgres"], c["benchmark"])
        for name, d in results.items() if (c := d.get("throughput", {}).get("cpu_ms_per_job"))
    ]  # fmt: skip
    common.print_table(
        "no-op jobs (argv `true`) through real workers",
        ("store", "jobs", "workers", "used", "jobs/s", "claims/s", "ms/job/worker",
         "claim->end ms", "between ms", "enqueue->start s median", "p99"),
        throughput_rows,
    )  # fmt: skip
    common.print_table(
        "CPU ms per job (PostgreSQL: the server's processes on this machine)",
        ("store", "workers", "their jobs", "postgres", "benchmark"),
        cpu_rows,
    )


if __name__ == "__main__":
    main()
