"""``tracker db``: schema migrations and spill-file replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracker.cli.common import uri_option


@click.group()
def db() -> None:
    """Manage the store's schema (Alembic migrations) and replay spilled points."""


@db.command()
@uri_option
@click.option("--revision", default="head", show_default=True, help="Target revision.")
def upgrade(uri: str | None, revision: str) -> None:
    """Apply migrations up to REVISION (safe to run from several machines at once)."""
    from tracker.store import Store

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
    from tracker.store import SCHEMA_HEAD, Store

    store = Store(uri, upgrade=False)
    rev = store.schema_revision()
    click.echo(f"database: {rev or '(empty)'}  code: {SCHEMA_HEAD}")


@db.command()
@uri_option
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def replay(uri: str | None, files: tuple[str, ...]) -> None:
    """Store the points of spill FILES (written when the store was unreachable at exit).

    Replaying is idempotent: a point already stored is overwritten with the same value.
    After a file's points, the run's final status recorded in it (finished, failed with its
    exit code, killed) is applied with its original end time, unless the run already has
    another final status (a run marked crashed meanwhile gets its true status). Each file is
    deleted once all of it is stored.
    """
    from tracker.client import final_status
    from tracker.client.sinks import SqlSink
    from tracker.client.writer import replay_spill_file

    sink = SqlSink.from_uri(uri)
    for name in files:
        finals = final_status.read(Path(name))
        count = replay_spill_file(sink, Path(name))
        click.echo(f"{name}: {count} points stored")
        try:
            for final in finals:
                click.echo(f"{name}: {_apply_final_status(sink.store, final)}")
        except BaseException:
            for final in finals:  # the file is gone: keep the statuses for the next replay
                final_status.append(Path(name), final)
            raise


def _apply_final_status(store: Any, final: Any) -> str:
    from tracker.client.final_status import REPLACEABLE

    current = store.get_run(final.run_id).status
    if current not in REPLACEABLE:
        return (
            f"run {final.run_id} is already {current}: its recorded final status "
            f"{final.describe()} is not applied"
        )
    store.finish_run(
        final.run_id, final.status, exit_code=final.exit_code, error=final.error,
        now=final.ended_at,
    )  # fmt: skip
    return f"run {final.run_id} is now {final.describe()} (was {current})"
