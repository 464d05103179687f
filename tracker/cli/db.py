"""``tracker db``: schema migrations and spill-file replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracker.cli.common import say_store, uri_option
from tracker.cli.remote import refuse_http
from tracker.cli.suggest import SuggestingGroup
from tracker.store.runs import finish_run, get_run


@click.group(cls=SuggestingGroup)
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
    from tracker.store import Store, resolve_uri, schema_head

    refuse_http(uri)
    say_store(resolve_uri(uri))
    store = Store(uri, upgrade=False, create=False)
    rev = store.schema_revision()
    click.echo(f"database: {rev or '(empty)'}  code: {schema_head()}")


@db.command()
@uri_option
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def replay(uri: str | None, files: tuple[str, ...]) -> None:
    """Store the points of spill FILES (written when the store was unreachable at exit).

    Replaying is idempotent: a point already stored is overwritten with the same value.
    Each file is deleted once all of its points are stored. A record the store refuses
    (a poison record) is set aside in FILE's `.rejected.jsonl` (with the error) and the rest
    is stored; the exit status is then 1 and the message names the file and the error.
    After a file's points, the run's final status recorded in it (finished, failed with its
    exit code, killed) is applied with its original end time, unless the run already has
    another final status (a run marked crashed meanwhile gets its true status).
    The file of an offline run (its store was down when the script started) creates the
    run first, then stores the rest under its new id.
    """
    import warnings

    from tracker.client import final_status
    from tracker.client.poison import Isolator
    from tracker.client.sinks import SqlSink
    from tracker.client.writer import replay_spill_file
    from tracker.errors import TrackerError
    from tracker.store import resolve_uri

    say_store(resolve_uri(uri))
    sink = SqlSink.from_uri(uri)
    refused_any = False
    for name in files:
        path = Path(name)
        finals = final_status.read(path)
        isolator = Isolator(sink, path.with_suffix(".rejected.jsonl"), trust_after_success=True)
        run_ids: dict[int, int] = {}  # an offline run's placeholder id -> the run created
        try:
            with warnings.catch_warnings():  # each refused record is reported below
                warnings.simplefilter("ignore", RuntimeWarning)
                count = replay_spill_file(sink, path, write=isolator.write, run_ids=run_ids)
        except TrackerError:
            raise  # the store is away or refuses: the CLI's error message, exit status 2
        except Exception as exc:  # a batch refused whole: not a poison record
            click.echo(
                f"{name}: not replayed, the store refused a whole batch "
                f"({type(exc).__name__}: {exc}); the file is kept, fix the cause and "
                f"replay it again (points already stored are not duplicated)",
                err=True,
            )
            refused_any = True
            continue
        for new_id in run_ids.values():
            click.echo(f"{name}: created run {new_id} (the run was offline: see tracker.init)")
        refused = isolator.points_rejected
        if not refused:
            click.echo(f"{name}: {count} points stored")
        else:
            refused_any = True
            errors = sorted(set(isolator.errors))
            click.echo(
                f"{name}: {count - refused} points stored, {refused} refused by the store and "
                f"set aside in {isolator.rejected_path}: {'; '.join(errors[:3])}"
                + (f" (and {len(errors) - 3} more errors)" if len(errors) > 3 else ""),
                err=True,
            )
        finals = [_created(final, run_ids) for final in finals]
        try:
            for final in finals:
                click.echo(f"{name}: {_apply_final_status(sink.store, final)}")
        except BaseException:
            for final in finals:  # the file is gone: keep the statuses for the next replay
                final_status.append(path, final)
            raise
    if refused_any:
        raise SystemExit(1)


def _created(final: Any, run_ids: dict[int, int]) -> Any:
    """``final`` of the run that an offline run's line created, if it is one."""
    import dataclasses

    if final.run_id not in run_ids:
        return final
    return dataclasses.replace(final, run_id=run_ids[final.run_id])


def _apply_final_status(store: Any, final: Any) -> str:
    from tracker.client.final_status import REPLACEABLE

    current = get_run(store, final.run_id).status
    if current not in REPLACEABLE:
        return (
            f"run {final.run_id} is already {current}: its recorded final status "
            f"{final.describe()} is not applied"
        )
    finish_run(store,
        final.run_id, final.status, exit_code=final.exit_code, error=final.error,
        now=final.ended_at,
    )  # fmt: skip
    return f"run {final.run_id} is now {final.describe()} (was {current})"


@db.command()
@uri_option
@click.option("--fix", is_flag=True, help="Make the store private: directory 0700, files 0600.")
def permissions(uri: str | None, fix: bool) -> None:
    """Show who may read the SQLite store: only its owner should (it holds job environments
    and the installation secret). A store this tracker creates is private; one made by an
    older version may not be: --fix takes every group and other permission off. Exit status
    1 when the store is readable by others and --fix was not given."""
    from tracker.errors import InvalidInput
    from tracker.rules.store_uri import sqlite_path
    from tracker.store import permissions as perms
    from tracker.store import resolve_uri

    refuse_http(uri)
    resolved = resolve_uri(uri)
    say_store(resolved)
    path = sqlite_path(resolved)
    if path is None:
        raise InvalidInput(
            "tracker db permissions: only a SQLite store has files on this host; a "
            "PostgreSQL store's access is the database server's (roles, pg_hba.conf)",
            field="uri",
        )
    database = Path(path)
    if not database.exists():
        raise click.ClickException(f"no store at {database}")
    entries = perms.modes(database)
    for entry in entries:
        click.echo(f"{'ok  ' if entry.private else 'OPEN'} {entry}")
    if fix:
        changed = perms.make_private(database)
        for entry in changed:
            click.echo(f"fixed {entry.path}: {entry.mode:04o} -> private")
        if not changed:
            click.echo("already private")
    elif not all(e.private for e in entries):
        click.echo("other accounts on this host can reach the store: run with --fix", err=True)
        raise SystemExit(1)


@db.command()
@uri_option
@click.option(
    "--settle",
    "settle_s",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seal runs that ended at least this many seconds ago.",
)
@click.option(
    "--run",
    "run_ids",
    type=int,
    multiple=True,
    help="Seal only these runs (repeatable); each must have ended.",
)
def seal(uri: str | None, settle_s: float, run_ids: tuple[int, ...]) -> None:  # fmt: skip
    """Pack the points of ended runs into compressed chunks now (docs/CHUNK_FORMAT.md).

    `tracker ui` and `tracker worker` do this by themselves, a second's worth every 10 s;
    this command does a store's backlog at once (a store from before chunks, a bulk
    import) and prints its progress. Every batch is committed, so it may be stopped at
    any point (Ctrl-C) and run again: it goes on where it stopped. Reads answer the same
    during and after; a later write to a sealed step moves that chunk back to rows.
    """
    import time

    from tracker.errors import InvalidInput
    from tracker.store import Store, chunks, resolve_uri
    from tracker.store.runs import get_run

    refuse_http(uri)
    say_store(resolve_uri(uri))
    store = Store(uri)
    if run_ids:
        for run_id in run_ids:
            if get_run(store, run_id).status in ("queued", "running"):
                raise InvalidInput(
                    f"--run {run_id}: the run has not ended; a running run is sealed after "
                    "it ends", field="run",
                )  # fmt: skip
        todo = list(dict.fromkeys(run_ids))
    else:
        todo = chunks.sealable_runs(store, time.time() - settle_s)
    if not todo:
        click.echo("nothing to seal: every ended run's points are in chunks")
        return
    started = time.monotonic()
    total = 0
    for i, run_id in enumerate(todo, start=1):
        sealed, _whole = chunks.seal_run(store, run_id)
        total += sealed
        rate = total / max(time.monotonic() - started, 1e-9)
        click.echo(f"[{i}/{len(todo)}] run {run_id}: {sealed:,} points sealed ({rate:,.0f}/s)")
    click.echo(f"sealed {total:,} points of {len(todo)} runs in {time.monotonic() - started:.1f} s")


@db.command()
@uri_option
@click.option(
    "--run",
    "run_ids",
    type=int,
    multiple=True,
    help="Unseal only these runs (repeatable); default: every run.",
)
def unseal(uri: str | None, run_ids: tuple[int, ...]) -> None:  # fmt: skip
    """Move sealed chunks back into one row per point: what a downgrade of the schema
    below revision 0025 (`tracker db upgrade --revision 0024_sweeps`) needs first, or that
    revision drops the chunks table with the points in it. Resumable like `seal`; stop
    `tracker ui` and the workers first, or they seal ended runs again."""
    from tracker.store import Store, chunks, resolve_uri

    refuse_http(uri)
    say_store(resolve_uri(uri))
    store = Store(uri)
    todo = list(dict.fromkeys(run_ids)) if run_ids else chunks.sealed_runs(store)
    if not todo:
        click.echo("nothing to unseal: no run has chunks")
        return
    for i, run_id in enumerate(todo, start=1):
        moved = chunks.unseal_run(store, run_id)
        click.echo(f"[{i}/{len(todo)}] run {run_id}: {moved:,} chunks back to rows")
