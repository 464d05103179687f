"""A run's name, tags, notes and star in the store (tracker.store.annotations): each change
recorded as an ``annotation`` event, searchable with the query language; the MLflow note
is the same notes; the 0020 migration down and up again keeps every note. Real SQLite and
PostgreSQL (the ``store`` and ``empty_store_url`` fixtures)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from tracker.entities import RunMeta
from tracker.errors import InvalidInput, NotFound
from tracker.rules.query import QueryError
from tracker.store import Store
from tracker.store import mlflow as mstore
from tracker.store.annotations import EVENT_KIND, rename_run, set_notes, set_starred, tag_run
from tracker.store.engine import _migrations_dir
from tracker.store.events import list_events
from tracker.store.run_search import NOTES_PREVIEW, RunSearch, search_runs
from tracker.store.runs import create_run, get_run
from tracker.web.core import mlflow_compat as compat


def _events(store: Store, run_id: int) -> list[tuple[str, dict]]:
    return [(e.message, e.data) for e in list_events(store, run_id) if e.kind == EVENT_KIND]


def _ids(store: Store, query: str, **more: object) -> list[int]:
    return [
        r.id
        for r in search_runs(store, RunSearch(query=query, sort="id", order="asc", **more)).runs
    ]


def test_each_change_is_stored_and_recorded_once(store: Store) -> None:
    run = create_run(store, "p", "first", tags=["base"])
    assert run.notes is None and run.starred is False
    renamed = rename_run(store, run.id, "  lr 3e-4, warmup 500 ", by="token 4")
    assert renamed.name == "lr 3e-4, warmup 500"
    tagged = tag_run(store, run.id, ["owner=ana", "sweep"], by="cli")
    assert tagged.tags == ["base", "owner=ana", "sweep"]
    tagged = tag_run(store, run.id, ["owner=bob"], ["sweep", "absent"], by="cli")
    assert tagged.tags == ["base", "owner=bob"]
    noted = set_notes(store, run.id, "warmup too short:\nloss spikes at 1k", by="cli")
    assert noted.notes == "warmup too short:\nloss spikes at 1k"
    assert set_starred(store, run.id, True, by="cli").starred is True
    again = get_run(store, run.id)  # as read back, not as returned
    assert (again.name, again.tags, again.notes, again.starred) == (
        "lr 3e-4, warmup 500",
        ["base", "owner=bob"],
        "warmup too short:\nloss spikes at 1k",
        True,
    )
    # changing nothing records nothing
    rename_run(store, run.id, "lr 3e-4, warmup 500")
    tag_run(store, run.id, ["owner=bob"], ["absent"])
    set_notes(store, run.id, "warmup too short:\nloss spikes at 1k")
    set_starred(store, run.id, True)
    events = _events(store, run.id)
    assert [m for m, _ in events] == [
        "renamed to 'lr 3e-4, warmup 500'",
        "tags +owner=ana +sweep",
        "tags +owner=bob -owner=ana -sweep",
        "notes edited (35 characters)",
        "starred",
    ]
    assert events[0][1] == {"field": "name", "from": "first", "to": "lr 3e-4, warmup 500",
                            "by": "token 4"}  # fmt: skip
    assert events[2][1]["added"] == ["owner=bob"] and events[2][1]["removed"] == [
        "owner=ana",
        "sweep",
    ]
    set_notes(store, run.id, "  ")  # blank: cleared
    set_starred(store, run.id, False)
    assert get_run(store, run.id).notes is None and not get_run(store, run.id).starred
    assert [m for m, _ in _events(store, run.id)][-2:] == ["notes cleared", "unstarred"]


def test_bad_input_and_unknown_runs_change_nothing(store: Store) -> None:
    run = create_run(store, "p", "kept", tags=["a"])
    for change, fragment in [
        (lambda: rename_run(store, run.id, "x" * 251), "251 characters"),
        (lambda: rename_run(store, run.id, "a\nb"), "control character"),
        (lambda: tag_run(store, run.id, ["ok", "mlflow.runName=x"], ["a"]), "MLflow's own"),
        (lambda: tag_run(store, run.id, [], [""]), "non-empty"),
        (lambda: set_notes(store, run.id, "x" * 65_537), "at most 65,536"),
    ]:
        with pytest.raises(InvalidInput, match=fragment):
            change()
    after = get_run(store, run.id)
    assert (after.name, after.tags, after.notes, after.starred) == ("kept", ["a"], None, False)
    assert _events(store, run.id) == []
    for change in (
        lambda: rename_run(store, 999_999, "x"),
        lambda: tag_run(store, 999_999, ["x"]),
        lambda: set_notes(store, 999_999, "x"),
        lambda: set_starred(store, 999_999, True),
    ):
        with pytest.raises(NotFound, match="run 999999 does not exist"):
            change()


def test_the_query_language_finds_notes_stars_and_tag_values(store: Store) -> None:
    a = create_run(store, "p", "a", tags=["owner=ana"]).id
    b = create_run(store, "p", "b", tags=["owner=bob", "x"]).id
    c = create_run(store, "q", "c").id
    set_notes(store, a, "Warmup too short; LR 3e-4")
    set_notes(store, b, "fine. 100% of GPUs busy")
    set_starred(store, b, True)
    set_starred(store, c, True)
    assert _ids(store, 'notes ~ "warmup"') == [a]  # case-insensitive substring
    assert _ids(store, 'notes ~ "100%"') == [b]  # % and _ are plain characters here
    assert _ids(store, 'notes ilike "%gpu%"') == [b]
    assert _ids(store, "notes == null") == [c]
    assert _ids(store, 'not notes ~ "warmup"') == [b, c]  # a run without notes included
    assert _ids(store, "starred") == [b, c]
    assert _ids(store, "not starred") == [a]
    assert _ids(store, "starred == false") == [a]
    assert _ids(store, 'starred and tags.owner = "bob"') == [b]
    assert _ids(store, 'tags.owner = "ana" or starred and project == q') == [a, c]
    by_star = search_runs(store, RunSearch(sort="starred", order="desc"))
    assert [r.id for r in by_star.runs][:2] == [c, b]  # starred first, ties newest first
    hit = next(r for r in by_star.runs if r.id == a)
    assert hit.starred is False and hit.notes_preview == "Warmup too short; LR 3e-4"
    with pytest.raises(QueryError, match="did you mean 'starred'"):
        _ids(store, "starrd")


def test_search_hits_carry_a_preview_of_long_notes(store: Store) -> None:
    run = create_run(store, "p", "long").id
    set_notes(store, run, "é" * (NOTES_PREVIEW + 5))
    hit = search_runs(store, RunSearch()).runs[0]
    assert hit.notes_preview == "é" * NOTES_PREVIEW and hit.notes_truncated is True
    assert get_run(store, run).notes == "é" * (NOTES_PREVIEW + 5)  # the run has them all


def test_the_mlflow_note_tag_is_the_runs_notes(store: Store) -> None:
    """What the MLflow-compatible API does with set_tag / delete_tag of mlflow.note.content
    (apply_meta inside the store's locked read-modify-write), and reads back as tags."""
    meta = compat.apply_meta(RunMeta("m", {}, []), tags={"mlflow.note.content": "from mlflow"})
    run = mstore.create_run(store, "p", meta, 1.0)
    assert run.notes == "from mlflow" and "_mlflow_tags" not in run.config
    set_notes(store, run.id, "edited in the dashboard")
    tags = compat.mlflow_tags(get_run(store, run.id))
    assert tags["mlflow.note.content"] == "edited in the dashboard"
    mstore.update_run_meta(
        store, run.id, lambda m: compat.apply_meta(m, tags={"mlflow.note.content": "again"})
    )
    assert get_run(store, run.id).notes == "again"
    mstore.update_run_meta(
        store, run.id, lambda m: compat.apply_meta(m, deleted_tags=["mlflow.note.content"])
    )
    after = get_run(store, run.id)
    assert after.notes is None and "mlflow.note.content" not in compat.mlflow_tags(after)
    with pytest.raises(compat.MlflowError, match=r"no tag 'mlflow\.note\.content'"):
        mstore.update_run_meta(
            store, run.id, lambda m: compat.apply_meta(m, deleted_tags=["mlflow.note.content"])
        )
    set_notes(store, run.id, "findable")
    assert _ids(store, 'tags."mlflow.note.content" ~ "FIND"') == [run.id]


def _alembic() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_migrations_dir()))
    return cfg


def test_migration_down_and_up_keeps_the_notes(empty_store_url: str) -> None:
    """0020_run_annotations: down, the notes wait in the config as MLflow's note tag (where a
    note an MLflow client set before 0020 is); up again, they are the run's notes."""
    store = Store(empty_store_url)
    noted = create_run(store, "p", "noted").id
    plain = create_run(store, "p", "plain", {"_mlflow_tags": {"mlflow.user": "ana"}}).id
    set_notes(store, noted, "keep me ✓")
    set_starred(store, noted, True)
    store.close()
    cfg = _alembic()
    engine = sa.create_engine(empty_store_url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0019_job_tokens")
        columns = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
        assert "notes" not in columns and "starred" not in columns
        configs = dict(conn.execute(sa.text("SELECT id, config FROM runs")).all())
        command.upgrade(cfg, "head")
        command.check(cfg)  # equals the models again
    engine.dispose()
    import json

    def loaded(raw: object) -> dict:
        return json.loads(raw) if isinstance(raw, str) else dict(raw)  # type: ignore[arg-type]

    assert loaded(configs[noted]) == {"_mlflow_tags": {"mlflow.note.content": "keep me ✓"}}
    assert loaded(configs[plain]) == {"_mlflow_tags": {"mlflow.user": "ana"}}
    store = Store(empty_store_url)
    back = get_run(store, noted)
    assert back.notes == "keep me ✓" and back.config == {} and back.starred is False
    assert get_run(store, plain).config == {"_mlflow_tags": {"mlflow.user": "ana"}}
    store.close()
