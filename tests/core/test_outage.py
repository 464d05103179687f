"""A store that goes away while a run logs: nothing is lost, nothing is duplicated."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import tracker
from tests.support import pg_cluster
from tests.support.polling import wait_for
from tracker.cli import main
from tracker.client.sinks import SqlSink
from tracker.errors import StoreUnavailable
from tracker.store import Store
from tracker.store.metrics import count_points, metric_history
from tracker.store.runs import get_run


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_stopped_and_restarted_during_logging(own_pg_cluster: tuple[Path, str]) -> None:
    directory, url = own_pg_cluster
    run = tracker.init(project="outage", uri=url, system_interval=None)
    for step in range(1000):
        run.log({"a": float(step), "b": 1.0}, step=step)
    run.flush()
    pg_cluster.pause_server(directory)
    for step in range(1000, 3000):  # logged while the database is down
        run.log({"a": float(step), "b": 1.0}, step=step)
    pg_cluster.resume_server(directory)
    for step in range(3000, 4000):
        run.log({"a": float(step), "b": 1.0}, step=step)
    run.finish(timeout=60)
    store = Store(url)
    assert count_points(store, run.id) == 8000
    steps = [p.step for p in metric_history(store, run.id, "a")]
    assert steps == list(range(4000))
    assert get_run(store, run.id).status == "finished"


def test_sqlite_locked_for_a_while_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    run = tracker.init(project="locked", uri=url, system_interval=None)
    holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # another process holding the write lock
    release = threading.Timer(1.5, holder.execute, args=("COMMIT",))
    release.start()
    for step in range(5000):
        run.log({"a": float(step)}, step=step)
    run.finish(timeout=60)
    release.join()
    assert count_points(Store(url), run.id) == 5000


class FlakySink(SqlSink):
    """A real SQL sink that can be switched 'unreachable' (raises StoreUnavailable)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.down = False
        self.failures = 0

    def write_metrics(self, run_id: int, records: Any) -> None:
        if self.down:
            self.failures += 1
            raise StoreUnavailable("connection refused (switched off by the test)")
        super().write_metrics(run_id, records)


def test_long_outage_spills_to_disk_and_replays(store_url: str, tmp_path: Path) -> None:
    sink = FlakySink(Store(store_url))
    run = tracker.init(
        project="spill", uri=store_url, sink=sink, system_interval=None,
        max_memory_points=2_000, spill_dir=tmp_path / "spill", flush_interval=0.05,
    )  # fmt: skip
    sink.down = True
    for step in range(10_000):
        run.log({"a": float(step)}, step=step)
    with pytest.raises(StoreUnavailable, match="flush timed out"):
        run.flush(timeout=1.0)
    assert sink.failures > 0
    # memory stays bounded: past max_memory_points the rest goes to disk (on a busy machine
    # the writer may still be draining the queue when the flush gives up)
    wait_for(run._writer.spill_path.exists, 60, "the writer to spill past its limit")
    assert run._writer._kept_points <= 2_000
    sink.down = False
    run.flush(timeout=60)
    assert not run._writer.spill_path.exists()
    store = Store(store_url)
    assert [p.step for p in metric_history(store, run.id, "a")] == list(range(10_000))
    run.finish()


def test_store_down_at_exit_leaves_a_spill_file_that_replays(
    store_url: str, tmp_path: Path
) -> None:
    sink = FlakySink(Store(store_url))
    run = tracker.init(
        project="spill", uri=store_url, sink=sink, system_interval=None,
        spill_dir=tmp_path / "spill",
    )  # fmt: skip
    for step in range(500):
        run.log({"a": float(step)}, step=step)
    sink.down = True
    with pytest.raises(StoreUnavailable, match="spill"):
        run.finish(timeout=0.5)
    spill = run._writer.spill_path
    assert spill.exists()
    result = CliRunner().invoke(main, ["db", "replay", "--uri", store_url, str(spill)])
    assert result.exit_code == 0, result.output
    assert "500 points stored" in result.output
    assert count_points(Store(store_url), run.id) == 500
    assert not spill.exists()


def test_unavailable_detection_on_a_dead_server() -> None:
    store = Store.__new__(Store)
    store.engine = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:9/none")
    from tracker.store.points import write_rows

    with pytest.raises(StoreUnavailable, match="writing 1 metric points failed"):
        write_rows(store.engine, [(1, 1, 1, 1, 1.0)])


def _dashboard_reads() -> dict[str, Any]:
    from tracker.store import jobs, logs, mlflow, projects, run_reads, run_search, series

    return {
        "search_runs": lambda s: run_search.search_runs(s, run_search.RunSearch()),
        "run_columns": lambda s: run_search.run_columns(s),
        "read_many": lambda s: series.read_many(s, [(1, "loss")]),
        "runs_by_ids": lambda s: run_reads.runs_by_ids(s, [1]),
        "run_detail": lambda s: run_reads.run_detail(s, 1),
        "metric_summaries": lambda s: run_reads.metric_summaries(s, [1]),
        "events_after": lambda s: run_reads.events_after(s, 1),
        "get_checkpoint": lambda s: run_reads.get_checkpoint(s, 1),
        "job_page": lambda s: jobs.job_page(s),
        "get_job": lambda s: jobs.get_job(s, 1),
        "run_logs": lambda s: logs.run_logs(s, 1),
        "logs_after": lambda s: logs.logs_after(s, 1),
        "get_project": lambda s: projects.get_project(s, 1),
        "search_projects": lambda s: projects.search_projects(
            s, name=None, like=None, limit=1, offset=0
        ),
        "metric_page": lambda s: mlflow.metric_page(s, 1, "loss", after_step=0, limit=1),
    }


@pytest.mark.parametrize("read", list(_dashboard_reads()))
def test_reads_of_the_dashboard_and_cli_are_store_unavailable_on_a_dead_server(read: str) -> None:
    store = Store.__new__(Store)
    store.engine = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:9/none")
    with pytest.raises(StoreUnavailable, match="the store is unavailable"):
        _dashboard_reads()[read](store)
