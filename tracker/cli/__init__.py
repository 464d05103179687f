"""The ``tracker`` command. Subcommands load lazily, so ``tracker --help`` stays fast and
the runner and dashboard packages are imported only by the commands that need them."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from tracker.errors import TrackerError

# command name -> "module:attribute"; each module owns its commands.
COMMANDS = {
    "db": "tracker.cli.db:db",
    "runs": "tracker.cli.runs:runs",
    "submit": "tracker.cli.jobs:submit",
    "sweep": "tracker.cli.jobs:sweep",
    "jobs": "tracker.cli.jobs:jobs",
    "workers": "tracker.cli.jobs:workers",
    "worker": "tracker.cli.worker:worker",
    "schedule": "tracker.cli.schedule:schedule",
    "scheduler": "tracker.cli.schedule:scheduler",
    "ui": "tracker.cli.ui:ui",
    "up": "tracker.cli.ui:up",
}


def load_command(name: str) -> click.Command:
    """Import the module of a ``COMMANDS`` entry and return its command.

    A missing module or attribute is an error (``ImportError`` / ``AttributeError``), never
    a command silently left out of ``--help``; a test imports every entry.
    """
    module_name, attr = COMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{COMMANDS[name]} is a {type(command).__name__}, not a click command")
    return command


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TrackerError as exc:
            click.echo(f"error [{exc.code}]: {exc.message}", err=True)
            sys.exit(2)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracker")
def main() -> None:
    """Experiment tracker for PyTorch training.

    The store is chosen by TRACKER_URI (default: a SQLite file under ./.tracker/).
    """
