"""Soft delete, restore and purge of runs from the command line (``tracker runs delete`` /
``restore``, ``runs ls --deleted``, ``tracker gc``), against a real SQLite file and a real
PostgreSQL database, checked through the store."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from tracker.cli import main
from tracker.errors import NotFound
from tracker.store import Store
from tracker.store import models as m
from tracker.store.events import add_event
from tracker.store.lifecycle import delete_runs
from tracker.store.metrics import log_metrics
from tracker.store.projects import delete_project, find_project, list_project_names
from tracker.store.purge import purge_deleted
from tracker.store.run_search import RunSearch, search_runs
from tracker.store.runs import create_run, get_run, list_runs


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _seed(store: Store) -> tuple[int, int, int]:
    a = create_run(store, "digits", "a", {"lr": 0.1}, ["baseline"])
    b = create_run(store, "digits", "b", {"lr": 0.2}, [])
    c = create_run(store, "other", "c", {"lr": 0.3}, [])
    for run in (a, b, c):
        log_metrics(store, run.id, 0, {"loss": 1.0})
        log_metrics(store, run.id, 1, {"loss": 0.5})
        add_event(store, run.id, "note", "hello")
    return a.id, b.id, c.id


def _ids(store_url: str, *args: str) -> list[int]:
    result = invoke("runs", "ls", "--uri", store_url, "--json", *args)
    assert result.exit_code == 0, result.output
    return [r["id"] for r in json.loads(result.output)]


def _count(store: Store, table: type, run_id: int) -> int:
    query = sa.select(sa.func.count()).select_from(table).where(table.run_id == run_id)  # type: ignore[attr-defined]
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def test_delete_hides_and_restore_brings_back(store_url: str) -> None:
    store = Store(store_url)
    a, b, c = _seed(store)
    result = invoke("runs", "delete", "--uri", store_url, str(a), str(b))
    assert result.exit_code == 0, result.output
    assert f"run {a} deleted" in result.output and f"run {b} deleted" in result.output
    assert _ids(store_url) == [c]
    assert _ids(store_url, "--deleted") == [b, a]
    assert _ids(store_url, "--deleted", "-f", "config.lr > 0.15") == [b]
    assert _ids(store_url, "-f", "deleted == false or deleted == true") == [c, b, a]
    assert [r.id for r in list_runs(store)] == [c]
    assert [r.id for r in list_runs(store, deleted=None)] == [c, b, a]
    assert get_run(store, a).deleted_at is not None  # still readable by id
    show = invoke("runs", "show", "--uri", store_url, str(a))
    assert "deleted:" in show.output and f"tracker runs restore {a}" in show.output
    again = invoke("runs", "delete", "--uri", store_url, str(a))
    assert again.exit_code == 0 and f"run {a} was deleted already" in again.output

    result = invoke("runs", "restore", "--uri", store_url, str(a), str(c))
    assert result.exit_code == 0, result.output
    assert f"run {a} restored" in result.output and f"run {c} is not deleted" in result.output
    assert _ids(store_url) == [c, a]
    assert get_run(store, a).deleted_at is None
    store.close()


def test_an_unknown_id_changes_nothing(store_url: str) -> None:
    store = Store(store_url)
    a, _, _ = _seed(store)
    result = invoke("runs", "delete", "--uri", store_url, str(a), "999999")
    assert result.exit_code == 2
    assert "999999" in result.output and "do not exist" in result.output
    assert get_run(store, a).deleted_at is None
    store.close()


def test_query_field_deleted_takes_true_or_false_only(store_url: str) -> None:
    Store(store_url).close()
    result = invoke("runs", "ls", "--uri", store_url, "-f", "deleted == 1")
    assert result.exit_code == 2 and "deleted compares with true or false" in result.output


def test_gc_is_a_dry_run_until_yes_and_keeps_the_grace_period(store_url: str) -> None:
    store = Store(store_url)
    a, b, c = _seed(store)
    long_ago = time.time() - 40 * 86400
    delete_runs(store, [a], now=long_ago)
    delete_runs(store, [b])  # deleted just now: inside the 30-day grace period
    assert _count(store, m.MetricPointRow, a) == 2

    dry = invoke("gc", "--uri", store_url)
    assert dry.exit_code == 0, dry.output
    assert "would purge 1 deleted run(s) (2 metric points)" in dry.output
    assert f"run {a}  digits/a" in dry.output and "nothing was removed" in dry.output
    assert get_run(store, a).deleted_at is not None and _count(store, m.MetricPointRow, a) == 2

    done = invoke("gc", "--uri", store_url, "--yes", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["dry_run"] is False and [r["id"] for r in report["runs"]["runs"]] == [a]
    with pytest.raises(NotFound):
        get_run(store, a)
    for table in (m.MetricPointRow, m.MetricRollupRow, m.MetricSummaryRow, m.RunEventRow):
        assert _count(store, table, a) == 0, table
    assert get_run(store, b).deleted_at is not None  # kept: deleted too recently
    assert _count(store, m.MetricPointRow, c) == 2  # others untouched

    shorter = invoke("gc", "--uri", store_url, "--older-than", "0", "--yes")
    assert shorter.exit_code == 0 and "purged 1 deleted run(s)" in shorter.output
    with pytest.raises(NotFound):
        get_run(store, b)
    bad = invoke("gc", "--uri", store_url, "--older-than", "soon")
    assert bad.exit_code == 2 and "duration" in bad.output
    store.close()


def test_purge_removes_a_deleted_project_once_its_runs_are_gone(store_url: str) -> None:
    store = Store(store_url)
    _, _, c = _seed(store)
    project = find_project(store, "other")
    assert project is not None
    long_ago = time.time() - 40 * 86400
    delete_project(store, project.id, now=long_ago)
    assert get_run(store, c).deleted_at == pytest.approx(long_ago)
    assert "other" not in list_project_names(store)

    dry = purge_deleted(store, older_than=time.time() - 30 * 86400)
    assert [r.id for r in dry.runs] == [c] and dry.projects == ["other"]
    assert find_project(store, "other") is not None
    done = purge_deleted(store, older_than=time.time() - 30 * 86400, dry_run=False)
    assert [r.id for r in done.runs] == [c] and done.projects == ["other"]
    assert find_project(store, "other") is None
    page = search_runs(store, RunSearch(deleted=None))
    assert sorted(r.project for r in page.runs) == ["digits", "digits"]
    store.close()


def test_a_run_restored_meanwhile_is_not_purged(store_url: str) -> None:
    store = Store(store_url)
    a, _, _ = _seed(store)
    delete_runs(store, [a], now=time.time() - 40 * 86400)
    with store.engine.begin() as conn:  # restored after the candidates were listed
        conn.execute(sa.update(m.RunRow).where(m.RunRow.id == a).values(deleted_at=None))
    from tracker.store.purge import _purge_run

    assert _purge_run(store, a, time.time()) is False
    assert get_run(store, a).deleted_at is None
    store.close()


def test_purging_a_run_leaves_its_blobs_to_the_blob_gc(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracker.store import artifacts as art

    monkeypatch.setenv(art.ARTIFACT_ROOT_ENV, str(tmp_path / "artifacts"))
    store = Store(store_url)
    a, b, _ = _seed(store)
    art.put_artifact(store, a, "model.txt", b"only in a")
    art.put_artifact(store, a, "shared.txt", b"in both")
    art.put_artifact(store, b, "shared.txt", b"in both")
    delete_runs(store, [a], now=time.time() - 40 * 86400)
    purge_deleted(store, older_than=time.time() - 30 * 86400, dry_run=False)
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(m.ArtifactRow.run_id, m.ArtifactRow.path)).all()
    assert [tuple(r) for r in rows] == [(b, "shared.txt")]
    report = art.gc_blobs(store, dry_run=True, grace_seconds=0)
    assert (report.blobs, report.unreferenced) == (2, 1)  # a's own blob; the shared one stays
    assert art.open_artifact(store, b, "shared.txt").read() == b"in both"
    store.close()


def test_a_new_run_in_a_deleted_project_shows_the_project_again(store_url: str) -> None:
    store = Store(store_url)
    a, b, _ = _seed(store)
    project = find_project(store, "digits")
    assert project is not None
    delete_project(store, project.id)
    assert "digits" not in list_project_names(store)
    fresh = create_run(store, "digits", "after")  # tracker.init in a project deleted meanwhile
    assert "digits" in list_project_names(store) and fresh.deleted_at is None
    assert get_run(store, a).deleted_at is not None and get_run(store, b).deleted_at is not None
    assert _ids(store_url, "-p", "digits") == [fresh.id]
    store.close()
