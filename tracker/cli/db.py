"""``tracker db``: schema migrations and spill-file replay."""

from __future__ import annotations

from pathlib import Path

import click

from tracker.cli.common import say_store, uri_option
from tracker.cli.remote import refuse_http


@click.group()
def db() -> None:
    """Manage the store's schema (Alembic migrations) and replay spilled points."""


@db.command()
@uri_option
@click.option("--revision", default="head", show_default=True, help="Target revision.")
def upgrade(uri: str | None, revision: str) -> None:
    """Apply migrations up to REVISION (safe to run from several machines at once)."""
    from tracker.store import Store, resolve_uri

    refuse_http(uri)
    say_store(resolve_uri(uri))
    store = Store(uri, upgrade=False)
    before, after = store.upgrade(revision)
    if before == after:
        click.echo(f"{store}: already at revision {after}")
    else:
        click.echo(f"{store}: upgraded {before or '(empty)'} -> {after}")


@db.command()
@uri_option
def current(uri: str | None) -> None:
    """Print the database's schema revision and the one this code expects."""
    from tracker.store import SCHEMA_HEAD, Store, resolve_uri

    refuse_http(uri)
    say_store(resolve_uri(uri))
    store = Store(uri, upgrade=False, create=False)
    rev = store.schema_revision()
    click.echo(f"database: {rev or '(empty)'}  code: {SCHEMA_HEAD}")


@db.command()
@uri_option
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def replay(uri: str | None, files: tuple[str, ...]) -> None:
    """Store the points of spill FILES (written when the store was unreachable at exit).

    Replaying is idempotent: a point already stored is overwritten with the same value.
    Each file is deleted once all of its points are stored.
    """
    from tracker.client.sinks import SqlSink
    from tracker.client.writer import replay_spill_file
    from tracker.store import resolve_uri

    say_store(resolve_uri(uri))
    sink = SqlSink.from_uri(uri)
    for name in files:
        count = replay_spill_file(sink, Path(name))
        click.echo(f"{name}: {count} points stored")
