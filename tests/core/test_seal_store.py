"""Sealing a store's series (issue 30): the periodic work seals runs that ended over a
minute ago, a second's worth per pass, and nothing else; ``tracker db seal`` does a store's
backlog with progress, survives a SIGKILL between any two batches (reads answer the same,
a second run finishes the job) and refuses a run that has not ended; ``tracker db unseal``
moves every chunk back to rows, and only then may the schema go below revision 0025. A
real ``tracker`` process each time, on SQLite and PostgreSQL."""

from __future__ import annotations

import math
import signal
import subprocess
import time
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from tests.support.polling import wait_for
from tests.support.runner import TRACKER
from tests.support.series_tables import head_rows
from tracker import periodic
from tracker.store import Store, chunks
from tracker.store.engine import _migrations_dir, read_conn
from tracker.store.lifecycle import delete_runs
from tracker.store.metrics import count_points, intern_keys, metric_history, write_points
from tracker.store.runs import create_run, finish_run


def _points(store: Store, run: int, keys: dict[str, int], n: int, *, start: int = 0) -> None:
    rows = [
        (run, k, s, 1_000 + s, math.nan if s % 701 == 0 else math.sin(s / 40) + i)
        for i, k in enumerate(keys.values())
        for s in range(start, start + n)
    ]
    write_points(store, rows)


def _read(store: Store, run: int) -> list[Any]:
    out: list[Any] = []
    for key in ("loss", "acc"):
        out.append([(p.step, p.wall_time, repr(p.value)) for p in metric_history(store, run, key)])
    return [*out, count_points(store, run)]


def _ended(store: Store, keys: dict[str, int], n: int, ended_at: float) -> int:
    run = create_run(store, "seal").id
    _points(store, run, keys, n)
    finish_run(store, run, "finished", now=ended_at)
    return run


def test_the_periodic_work_seals_only_runs_that_ended_a_while_ago(store: Store) -> None:
    keys = intern_keys(store, ["loss", "acc"])
    now = time.time()
    old = _ended(store, keys, 500, now - 120)
    failed = create_run(store, "seal").id
    _points(store, failed, keys, 50)
    finish_run(store, failed, "failed", now=now - 3600)
    recent = _ended(store, keys, 50, now - 10)  # its writer may still refresh rollups
    running = create_run(store, "seal").id
    _points(store, running, keys, 50)
    deleted = _ended(store, keys, 50, now - 120)
    delete_runs(store, [deleted])  # left to purge
    before = {r: _read(store, r) for r in (old, failed, recent, running, deleted)}

    done = periodic.seal_series_once(store, now=now)
    assert sorted(done) == [(old, 1000), (failed, 100)]
    assert head_rows(store, old) == head_rows(store, failed) == 0
    assert [head_rows(store, r) for r in (recent, running, deleted)] == [100, 100, 100]
    assert {r: _read(store, r) for r in before} == before
    assert periodic.seal_series_once(store, now=now) == []  # nothing left: one small read


def test_a_pass_stops_at_its_budget_and_the_next_goes_on(store: Store) -> None:
    keys = intern_keys(store, ["loss", "acc"])
    run = _ended(store, keys, 400, time.time() - 120)
    before = _read(store, run)
    sealed = []
    while head_rows(store, run):
        done = periodic.seal_series_once(store, budget_s=1e-9, batch_points=100)
        assert [r for r, _n in done] == [run]  # one batch, then the budget is spent
        sealed.append(done[0][1])
        assert _read(store, run) == before
    # 100 rows read, the last step's left for the next batch (it may hold more values)
    assert sealed == [99, 99, 99, 99, 4] * 2


def _tracker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRACKER, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_tracker_db_seal_and_unseal(store_url: str) -> None:
    store = Store(store_url)
    keys = intern_keys(store, ["loss", "acc"])
    ended = [_ended(store, keys, 300, time.time() - 120) for _ in range(3)]
    running = create_run(store, "seal").id
    _points(store, running, keys, 10)
    before = {r: _read(store, r) for r in [*ended, running]}

    refused = _tracker("db", "seal", "--uri", store_url, "--run", str(running))
    assert refused.returncode == 2, refused.stderr
    assert f"--run {running}: the run has not ended" in refused.stderr
    assert chunks.sealed_series(store, running) == []

    sealed = _tracker("db", "seal", "--uri", store_url)
    assert sealed.returncode == 0, sealed.stderr
    lines = sealed.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == [
        f"[{i}/3] run {r}" for i, r in enumerate(ended, start=1)
    ]
    assert all("600 points sealed" in line for line in lines[:3])
    assert lines[3].startswith("sealed 1,800 points of 3 runs in ")
    assert all(head_rows(store, r) == 0 for r in ended) and head_rows(store, running) == 20
    assert {r: _read(store, r) for r in before} == before
    again = _tracker("db", "seal", "--uri", store_url)
    assert again.stdout.strip() == "nothing to seal: every ended run's points are in chunks"

    # the schema cannot go below the chunks while they hold points
    with pytest.raises(RuntimeError, match="run `tracker db unseal` first"):
        _downgrade(store, "0024_sweeps")
    assert {r: _read(store, r) for r in before} == before

    unsealed = _tracker("db", "unseal", "--uri", store_url)
    assert unsealed.returncode == 0, unsealed.stderr
    assert len(unsealed.stdout.splitlines()) == 3
    assert all(chunks.sealed_series(store, r) == [] for r in ended)
    assert {r: _read(store, r) for r in before} == before
    _downgrade(store, "0024_sweeps")
    with read_conn(store.engine) as conn:
        assert "metric_chunks" not in sa.inspect(conn).get_table_names()
    assert [head_rows(store, r) for r in ended] == [600, 600, 600]  # (this code reads 0025 up)


def _downgrade(store: Store, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(_migrations_dir()))
    with store.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        conn.commit()


def test_a_seal_killed_between_batches_loses_nothing(store_url: str) -> None:
    store = Store(store_url)
    keys = intern_keys(store, ["loss", "acc"])
    run = _ended(store, keys, 60_000, time.time() - 120)
    before = _read(store, run)
    proc = subprocess.Popen(
        [*TRACKER, "db", "seal", "--uri", store_url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: chunks.sealed_series(store, run), 60, "the first sealed batch")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = head_rows(store, run)
    assert 0 < left < 120_000, "killed between the first and the last batch"
    assert _read(store, run) == before
    finished = _tracker("db", "seal", "--uri", store_url)
    assert finished.returncode == 0, finished.stderr
    assert f"run {run}: {left:,} points sealed" in finished.stdout
    assert head_rows(store, run) == 0 and _read(store, run) == before
