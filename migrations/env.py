"""Alembic environment: migrates the tracker store (target: tracker.store.models.metadata).

Called by ``tracker db upgrade`` and by the automatic upgrade on first use, which pass an open
connection in ``config.attributes["connection"]``; plain ``alembic -x url=...`` works too.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from tracker.store.models import metadata

config = context.config


def _configure(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        from tracker.store.engine import resolve_uri

        url = resolve_uri()
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        _configure(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run `tracker db upgrade`")
run_migrations_online()
