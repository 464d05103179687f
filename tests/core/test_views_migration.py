"""0021_saved_views: a downgrade drops the named views and their audit trail and keeps the
runs; upgrading again gives empty tables that equal the models."""

from __future__ import annotations

import sqlalchemy as sa

from tests.core.test_migrations import _down_and_up
from tracker.store import Store
from tracker.store.runs import create_run
from tracker.store.views import list_views, save_view, view_events


def test_saved_views_down_and_up_again(empty_store_url: str) -> None:
    store = Store(empty_store_url)
    run = create_run(store, "p", "r").id
    save_view(store, "p", "lr bands", {"ws_group": "config.lr"}, by="test")
    store.close()

    def while_down(conn: sa.Connection) -> None:
        tables = set(sa.inspect(conn).get_table_names())
        assert not tables & {"saved_views", "saved_view_events"}
        assert conn.execute(sa.text("SELECT id FROM runs")).scalars().all() == [run]

    _down_and_up(empty_store_url, "0020_run_annotations", while_down)
    store = Store(empty_store_url)
    assert list_views(store) == [] and view_events(store) == []
    save_view(store, "p", "lr bands", {"ws_group": "config.lr"})
    assert [v.name for v in list_views(store, "p")] == ["lr bands"]
    store.close()
