"""The ``tracker`` command. Subcommands load lazily, so ``tracker --help`` stays fast and
the runner and dashboard packages are imported only by the commands that need them.

``pip install tracker`` brings the client, the store and the store commands; the dashboard
and the worker/scheduler come as extras (``tracker[server]``, ``tracker[runner]``). A command
whose extra is not installed is still listed, and running it (or asking for its ``--help``)
fails with exit status 1 and a message naming the extra to install, before any of its code
is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from tracker.cli.suggest import SuggestingGroup
from tracker.errors import TrackerError

# extra -> the top-level modules it installs that the commands import. Keep in step with
# [project.optional-dependencies] in pyproject.toml.
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("flask", "gunicorn", "apscheduler"),
    "runner": ("apscheduler", "tzlocal"),
}

# command name -> ("module:attribute", extras it needs); each module owns its commands.
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "artifacts": ("tracker.cli.artifacts:artifacts", ()),
    "db": ("tracker.cli.db:db", ()),
    "doctor": ("tracker.cli.doctor:doctor", ()),
    "gc": ("tracker.cli.gc:gc", ()),
    "profile": ("tracker.cli.profile:profile", ()),
    "runs": ("tracker.cli.runs:runs", ()),
    "submit": ("tracker.cli.jobs:submit", ()),
    "sweep": ("tracker.cli.jobs:sweep", ()),
    "sweeps": ("tracker.cli.sweeps:sweeps", ()),
    "jobs": ("tracker.cli.jobs:jobs", ()),
    "workers": ("tracker.cli.jobs:workers", ()),
    "worker": ("tracker.cli.worker:worker", ("runner",)),
    "dispatcher": ("tracker.cli.dispatcher:dispatcher", ("runner",)),
    "schedule": ("tracker.cli.schedule:schedule", ("runner",)),
    "scheduler": ("tracker.cli.schedule:scheduler", ("runner",)),
    "token": ("tracker.cli.token:token", ()),
    "ui": ("tracker.cli.ui:ui", ("server",)),
    "up": ("tracker.cli.ui:up", ("server", "runner")),
}


def missing_extra(extras: tuple[str, ...]) -> tuple[str, str] | None:
    """The first (extra, module) among ``extras`` whose module cannot be imported, or None.

    Only looks the modules up (``importlib.util.find_spec``); nothing is imported.
    """
    for extra in extras:
        for module in EXTRAS[extra]:
            if importlib.util.find_spec(module) is None:
                return extra, module
    return None


def _needs_extra(name: str, extra: str, module: str) -> click.Command:
    """A stand-in for command ``name`` that only says which extra to install."""
    install = f"pip install 'tracker[{extra}]'"
    message = f"`tracker {name}` needs the {extra} extra ({module} is not installed): {install}"

    def fail(args: tuple[str, ...]) -> None:
        raise click.ClickException(message)

    return click.Command(
        name,
        callback=fail,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=message,
        short_help=f"(not installed: {install})",
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
    )


def load_command(name: str) -> click.Command:
    """Import the module of a ``COMMANDS`` entry and return its command (extras installed).

    A missing module or attribute is an error (``ImportError`` / ``AttributeError``), never
    a command silently left out of ``--help``; a test imports every entry.
    """
    target, _ = COMMANDS[name]
    module_name, attr = target.split(":")
    command = getattr(importlib.import_module(module_name), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is a {type(command).__name__}, not a click command")
    return command


class LazyGroup(SuggestingGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        missing = missing_extra(COMMANDS[cmd_name][1])
        if missing is not None:
            return _needs_extra(cmd_name, *missing)
        return load_command(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TrackerError as exc:
            click.echo(f"error [{exc.code}]: {exc.message}", err=True)
            sys.exit(2)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracker")
@click.option("-v", "--verbose", is_flag=True,
              help="Print the store each command uses (on stderr).")  # fmt: skip
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """Experiment tracker for PyTorch training.

    The store is chosen by --uri or TRACKER_URI (default: a SQLite file under ./.tracker/).
    SQLite paths: sqlite:///relative/path.db (relative to the current directory) or
    sqlite:////absolute/path.db. Commands that only read never create a store.
    """
    from tracker.cli.common import VERBOSE_KEY

    ctx.meta[VERBOSE_KEY] = verbose
