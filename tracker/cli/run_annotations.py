"""``tracker runs tag|untag|rename|note|star``: what a person writes on a run.

Against the database (``--uri`` a SQLite or PostgreSQL URL, or the store found as for every
command) the change goes through :mod:`tracker.store.annotations`; against a dashboard
(``--uri http://host:port``) through its API (``PATCH /api/v1/runs/<id>/...``, an ``admin``
token: ``--token`` / ``TRACKER_TOKEN``). Either way the rules are those of
:mod:`tracker.rules.annotations` and the change is recorded as a run event (``tracker runs
show`` lists it), naming ``cli`` or the token as who made it.

Errors: a value breaking a rule, an unknown run: exit status 2 with the message; over HTTP
also 401 (no token) and 403 (a ``log`` token).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import click

from tracker.cli.common import echo_json, json_option, open_store
from tracker.cli.reading import reader_options
from tracker.cli.remote import is_http, run_from_json
from tracker.entities import RunInfo
from tracker.errors import InvalidInput, TrackerError

__all__ = ["ANNOTATION_COMMANDS"]

RETRY_FOR_S = 5.0  # as the CLI's other requests: a restarting dashboard is asked again


class Annotator(Protocol):
    def rename(self, run_id: int, name: str) -> RunInfo: ...

    def tag(self, run_id: int, add: Sequence[str], remove: Sequence[str]) -> RunInfo: ...

    def notes(self, run_id: int, text: str | None) -> RunInfo: ...

    def star(self, run_id: int, starred: bool) -> RunInfo: ...


class StoreAnnotator:
    """Changes written to the database directly."""

    by = "cli"

    def __init__(self, uri: str | None) -> None:
        self.store = open_store(uri)

    def rename(self, run_id: int, name: str) -> RunInfo:
        from tracker.store.annotations import rename_run

        return rename_run(self.store, run_id, name, by=self.by)

    def tag(self, run_id: int, add: Sequence[str], remove: Sequence[str]) -> RunInfo:
        from tracker.store.annotations import tag_run

        return tag_run(self.store, run_id, add, remove, by=self.by)

    def notes(self, run_id: int, text: str | None) -> RunInfo:
        from tracker.store.annotations import set_notes

        return set_notes(self.store, run_id, text, by=self.by)

    def star(self, run_id: int, starred: bool) -> RunInfo:
        from tracker.store.annotations import set_starred

        return set_starred(self.store, run_id, starred, by=self.by)


class HttpAnnotator:
    """Changes sent to a dashboard's API (``web/API.md``: Annotations)."""

    def __init__(self, uri: str, token: str | None) -> None:
        from tracker.client.http import ApiClient

        self.client = ApiClient(uri, token, retry_for=RETRY_FOR_S)

    def _patch(self, run_id: int, what: str, body: dict[str, Any]) -> RunInfo:
        from tracker.rules import jsonvalues

        data = jsonvalues.dumps(body, separators=(",", ":")).encode()
        doc = self.client.call(
            "PATCH", f"/runs/{run_id}/{what}", data=data,
            headers={"Content-Type": "application/json"}, idempotent=True,
        )  # fmt: skip
        if not isinstance(doc, dict) or "id" not in doc:
            raise TrackerError(
                f"{self.client.base_url} answered PATCH /runs/{run_id}/{what} with something "
                "that is not the tracker's JSON: is this a tracker dashboard (`tracker ui`)?"
            )
        return run_from_json(doc)

    def rename(self, run_id: int, name: str) -> RunInfo:
        return self._patch(run_id, "name", {"name": name})

    def tag(self, run_id: int, add: Sequence[str], remove: Sequence[str]) -> RunInfo:
        return self._patch(run_id, "tags", {"add": list(add), "remove": list(remove)})

    def notes(self, run_id: int, text: str | None) -> RunInfo:
        return self._patch(run_id, "notes", {"notes": text})

    def star(self, run_id: int, starred: bool) -> RunInfo:
        return self._patch(run_id, "star", {"starred": starred})


def _annotator(uri: str | None, token: str | None) -> Annotator:
    if uri is not None and is_http(uri):
        return HttpAnnotator(uri, token)
    return StoreAnnotator(uri)


def _done(run: RunInfo, as_json: bool, message: str) -> None:
    if as_json:
        echo_json(run)
    else:
        click.echo(message)


def _tags_text(run: RunInfo) -> str:
    return ", ".join(run.tags) or "none"


@click.command("tag")
@reader_options
@click.argument("run_id", metavar="RUN", type=int)
@click.argument("tags", metavar="TAG...", nargs=-1, required=True)
@json_option
def tag(uri: str | None, token: str | None, run_id: int, tags: tuple[str, ...],
        as_json: bool) -> None:  # fmt: skip
    """Add tags to a run: `baseline` or `key=value` (replacing the run's tag with that key).

    Tags are 1-100 characters; keys starting with `mlflow.` are MLflow's own. Find tagged
    runs with --filter 'tags contains baseline' or 'tags.owner == "ana"'.
    --uri may be a dashboard's http://host:port, with an admin --token.
    """
    run = _annotator(uri, token).tag(run_id, list(tags), [])
    _done(run, as_json, f"run {run.id} tags: {_tags_text(run)}")


@click.command("untag")
@reader_options
@click.argument("run_id", metavar="RUN", type=int)
@click.argument("keys", metavar="KEY...", nargs=-1, required=True)
@json_option
def untag(uri: str | None, token: str | None, run_id: int, keys: tuple[str, ...],
          as_json: bool) -> None:  # fmt: skip
    """Remove tags from a run, by key (`owner` removes `owner=ana`) or whole tag.

    Naming a tag the run does not have changes nothing.
    --uri may be a dashboard's http://host:port, with an admin --token.
    """
    run = _annotator(uri, token).tag(run_id, [], list(keys))
    _done(run, as_json, f"run {run.id} tags: {_tags_text(run)}")


@click.command("rename")
@reader_options
@click.argument("run_id", metavar="RUN", type=int)
@click.argument("name")
@json_option
def rename(uri: str | None, token: str | None, run_id: int, name: str, as_json: bool) -> None:
    """Give a run a new name (1-250 characters on one line).

    --uri may be a dashboard's http://host:port, with an admin --token.
    """
    run = _annotator(uri, token).rename(run_id, name)
    _done(run, as_json, f"run {run.id} is now named {run.name!r}")


def _read_notes(text: str | None, file: Path | None, clear: bool) -> str | None:
    given = sum(x for x in (text is not None, file is not None, clear))
    if given != 1:
        raise InvalidInput(
            "give the notes as TEXT, '-' to read them from stdin, --file PATH, or --clear",
            field="notes",
        )
    if clear:
        return None
    if file is not None:
        try:
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"--file {file}: cannot read it as UTF-8 text: {exc}",
                               field="file") from exc  # fmt: skip
    return sys.stdin.read() if text == "-" else text


@click.command("note")
@reader_options
@click.argument("run_id", metavar="RUN", type=int)
@click.argument("text", required=False)
@click.option(
    "--file", "file", type=click.Path(dir_okay=False, path_type=Path),
    help="Read the notes from this UTF-8 file.",
)  # fmt: skip
@click.option("--clear", is_flag=True, help="Remove the run's notes.")
@json_option
def note(uri: str | None, token: str | None, run_id: int, text: str | None, file: Path | None,
         clear: bool, as_json: bool) -> None:  # fmt: skip
    """Set a run's notes: TEXT, `-` to read stdin, --file PATH; --clear removes them.

    The notes replace what the run had (at most 65,536 characters); they show on the run's
    page, in the runs table, and to MLflow clients as the tag mlflow.note.content. Find
    runs by them with --filter 'notes ~ "warmup"'.
    --uri may be a dashboard's http://host:port, with an admin --token.
    """
    notes = _read_notes(text, file, clear)
    run = _annotator(uri, token).notes(run_id, notes)
    said = "cleared" if run.notes is None else f"saved ({len(run.notes):,} characters)"
    _done(run, as_json, f"run {run.id} notes {said}")


@click.command("star")
@reader_options
@click.argument("run_id", metavar="RUN", type=int)
@click.option("--off", is_flag=True, help="Remove the star.")
@json_option
def star(uri: str | None, token: str | None, run_id: int, off: bool, as_json: bool) -> None:
    """Star a run (--off: unstar it). Find starred runs with --filter starred.

    --uri may be a dashboard's http://host:port, with an admin --token.
    """
    run = _annotator(uri, token).star(run_id, not off)
    _done(run, as_json, f"run {run.id} {'starred' if run.starred else 'not starred'}")


ANNOTATION_COMMANDS = (tag, untag, rename, note, star)
