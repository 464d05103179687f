"""``tracker runs tag|untag|rename|note|star`` against the database (``--uri`` a SQLite or
PostgreSQL URL) and against a dashboard over real HTTP (``--uri http://...`` with an admin
token): the same changes, the same output, the API's token rules."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from tracker.cli import main
from tracker.store import Store
from tracker.store.annotations import EVENT_KIND
from tracker.store.events import list_events
from tracker.store.runs import create_run, get_run
from tracker.store.tokens import create_token


def cli(*args: str, input: str | None = None) -> Result:
    env = {"TRACKER_URI": None, "TRACKER_TOKEN": None}
    return CliRunner().invoke(main, list(args), env=env, input=input)


def test_every_annotation_command(where: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, options = where
    run = str(create_run(store, "p", "r", tags=["base"]).id)

    def ok(*args: str, input: str | None = None) -> str:
        result = cli("runs", *args, *options, input=input)
        assert result.exit_code == 0, result.output
        return result.stdout

    assert ok("tag", run, "owner=ana", "sweep") == f"run {run} tags: base, owner=ana, sweep\n"
    # a key=value tag replaces the tag with that key where it stood
    assert ok("tag", run, "owner=bob") == f"run {run} tags: base, owner=bob, sweep\n"
    assert ok("untag", run, "sweep", "absent") == f"run {run} tags: base, owner=bob\n"
    assert ok("rename", run, "lr 3e-4") == f"run {run} is now named 'lr 3e-4'\n"
    assert ok("note", run, "warmup too short") == f"run {run} notes saved (16 characters)\n"
    assert ok("note", run, "-", input="from stdin\nline 2\n") == (
        f"run {run} notes saved (18 characters)\n")  # fmt: skip
    (tmp_path / "notes.md").write_text("# from a file\n", encoding="utf-8")
    assert ok("note", run, "--file", str(tmp_path / "notes.md")) == (
        f"run {run} notes saved (14 characters)\n")  # fmt: skip
    assert ok("star", run) == f"run {run} starred\n"
    shown = get_run(store, int(run))
    assert (shown.name, shown.tags, shown.notes, shown.starred) == (
        "lr 3e-4", ["base", "owner=bob"], "# from a file\n", True)  # fmt: skip
    assert '"starred": true' in ok("star", run, "--json")
    assert ok("star", run, "--off") == f"run {run} not starred\n"
    assert ok("note", run, "--clear") == f"run {run} notes cleared\n"
    listed = ok("ls", "-f", 'tags.owner = "bob" and not starred')
    assert "lr 3e-4" in listed
    events = [e for e in list_events(store, int(run)) if e.kind == EVENT_KIND]
    by = {e.data["by"] for e in events}
    assert by == (
        {"cli"} if options[1].startswith(("sqlite", "postgresql")) else {"dashboard token"}
    )
    assert len(events) == 10  # one per change (the --json star changed nothing)


def test_errors_exit_2_and_change_nothing(where: tuple[Store, list[str]]) -> None:
    store, options = where
    run = str(create_run(store, "p", "r").id)
    for args, fragment in [
        (("rename", run, "x" * 251), "at most 250"),
        (("tag", run, "mlflow.runName=x"), "MLflow's own tags"),
        (("note", run), "give the notes as TEXT"),
        (("note", run, "text", "--clear"), "give the notes as TEXT"),
        (("star", "999999"), "run 999999 does not exist"),
    ]:
        result = cli("runs", *args, *options)
        assert result.exit_code == 2, (args, result.output)
        assert fragment in result.output, (args, result.output)
    after = get_run(store, int(run))
    assert (after.name, after.tags, after.notes, after.starred) == ("r", [], None, False)


def test_over_http_a_log_token_is_refused(served: tuple[Store, str]) -> None:
    store, url = served
    _, log = create_token(store, "log", "trainer")
    run = str(create_run(store, "p", "r").id)
    refused = cli("runs", "star", run, "--uri", url, "--token", log)
    assert refused.exit_code != 0 and "'admin' scope" in refused.output
    anonymous = cli("runs", "star", run, "--uri", url)
    assert anonymous.exit_code != 0 and "token" in anonymous.output.lower()
    assert get_run(store, int(run)).starred is False
