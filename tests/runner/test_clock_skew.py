"""Machines whose clocks disagree share one PostgreSQL store: leases and heartbeats are
stamped with the store's clock (tracker/store/clock.py), not each machine's.

The skewed machine is a real process under libfaketime (Debian's ``faketime``): its
``time.time()`` runs 10 minutes behind or ahead. Before the store clock, a worker 10 minutes
behind wrote leases that had expired before they were written, and every other process's
reaper took its job away at once (crashed, killed, retried, again and again).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import create_pg_database, drop_pg_database
from tests.support.polling import wait_for
from tests.support.runner import FAST, REAP, TRACKER, Proc, Procs
from tracker.entities import JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store.runs import get_run

pytestmark = pytest.mark.skipif(
    not glob.glob("/usr/lib/*/faketime/libfaketime.so.1"),
    reason="needs libfaketime (apt-get install faketime)",
)

SKEW = 600  # seconds


def _libfaketime() -> str | None:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return found[0] if found else None


def _skewed_env(env: dict[str, str], skew: int) -> dict[str, str]:
    """The environment of a process whose wall clock is ``skew`` seconds off: libfaketime
    preloaded into that very process (not through the ``faketime`` wrapper, which forks the
    command and leaves it behind when the test kills the wrapper); only the wall clock is
    skewed, as on a machine whose clock is off."""
    lib = _libfaketime()
    assert lib is not None
    return {**env, "LD_PRELOAD": lib, "FAKETIME": f"{skew:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}  # fmt: skip


@pytest.fixture
def pg_url(pg_template_url: str | None) -> Iterator[str]:
    if pg_template_url is None:
        pytest.skip("needs PostgreSQL (./scripts/test.sh starts a server)")
    server = os.environ["TRACKER_TEST_PG_URL"]
    url = create_pg_database(server, template=sa.make_url(pg_template_url).database)
    yield url
    drop_pg_database(server, url)


READ_CLOCKS = """
import json, logging, time
from tracker.store import Store
logging.basicConfig(level=logging.WARNING)
store = Store()
print(json.dumps({"local": time.time(), "store": store.now()}))
"""


@pytest.mark.parametrize("skew", [-SKEW, SKEW])
def test_a_skewed_process_reads_the_store_clock(pg_url: str, skew: int) -> None:
    env = _skewed_env({**os.environ, "TRACKER_URI": pg_url}, skew)
    ran = subprocess.run(
        [sys.executable, "-c", READ_CLOCKS],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    real = time.time()
    assert ran.returncode == 0, ran.stderr
    clocks = json.loads(ran.stdout)
    assert abs(clocks["local"] - (real + skew)) < 30  # faketime did skew it
    assert abs(clocks["store"] - real) < 5, clocks  # the store's clock did not move
    assert "clock is" in ran.stderr and "off the store's" in ran.stderr, ran.stderr  # said once
    assert ran.stderr.count("off the store's") == 1


def test_sqlite_store_clock_is_this_machines(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        assert store.clock.offset == 0.0
        assert abs(store.now() - time.time()) < 1
    finally:
        store.close()


SLEEPER = "import time; time.sleep(6); print('done', flush=True)"


def test_a_worker_whose_clock_is_behind_keeps_its_job(pg_url: str, tmp_path: Path) -> None:
    """Its leases (3 s) would read as 10 minutes expired by the reaper of a machine with the
    right time, which runs beside it."""
    store = Store(pg_url)
    procs = Procs(pg_url, tmp_path)
    try:
        # the job itself runs on the right clock (libfaketime breaks its time.sleep)
        argv = ["env", "-u", "LD_PRELOAD", "-u", "FAKETIME", sys.executable, "-c", SLEEPER]
        job = queue.enqueue(store, JobSpec(argv=argv))
        procs.scheduler()  # the reaper, every 0.5 s, on this machine's clock
        worker = Proc(
            [*TRACKER, "worker", *FAST, "--gpus", "none",
             "--lease-seconds", "3", "--exit-when-idle", "--no-housekeeping"],
            tmp_path / "skewed-worker.log", _skewed_env(procs.env(), -SKEW), tmp_path,
        )  # fmt: skip
        procs.started.append(worker)
        done = wait_for(
            lambda: (j := store_jobs.get_job(store, job.id)).is_final and j, 90, "the job to end"
        )
        assert (done.status, done.attempt) == ("succeeded", 1), (done.failure_hint,
                                                                 worker.output())  # fmt: skip
        assert worker.wait(30) == 0, worker.output()
        assert "lease lost" not in worker.output()
    finally:
        procs.close()
        store.close()


def test_a_reaper_whose_clock_is_ahead_leaves_a_live_job_alone(pg_url: str, tmp_path: Path) -> None:
    """A worker on the right clock runs a job under 3 s leases; a ``tracker scheduler`` (the
    lease reaper and crash watch) 10 minutes ahead runs beside it: before the store clock it
    read every lease as long expired and crashed the job at once."""
    store = Store(pg_url)
    procs = Procs(pg_url, tmp_path)
    try:
        job = queue.enqueue(store, JobSpec(argv=[sys.executable, "-c", SLEEPER]))
        reaper = Proc(
            [*TRACKER, "scheduler", *REAP],
            tmp_path / "skewed-scheduler.log", _skewed_env(procs.env(), SKEW), tmp_path,
        )  # fmt: skip
        procs.started.append(reaper)
        worker = procs.worker("--gpus", "none", "--lease-seconds", "3", "--exit-when-idle",
                              "--no-housekeeping")  # fmt: skip
        done = wait_for(
            lambda: (j := store_jobs.get_job(store, job.id)).is_final and j, 90, "the job to end"
        )
        assert (done.status, done.attempt) == ("succeeded", 1), (done.failure_hint,
                                                                 reaper.output())  # fmt: skip
        assert get_run(store, done.run_id).status == "finished"
        assert worker.wait(30) == 0, worker.output()
        assert reaper.popen.poll() is None, reaper.output()  # it was reaping all along
    finally:
        procs.close()
        store.close()
