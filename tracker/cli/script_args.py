"""``ScriptCommand``: the click command class of ``submit``, ``sweep`` and ``schedule add``.

Their trailing arguments are the job's command, so an option meant for the training script
(``tracker submit train.py --epochs 3``) reaches click as an unknown tracker option. Click
alone answers "No such option: --epochs"; this class adds the fix: script options go after
``--``, with the corrected command line (``tracker submit train.py -- --epochs 3``).
"""

from __future__ import annotations

import shlex
from typing import Any

import click


class ScriptCommand(click.Command):
    """A command whose unknown options get the "put script arguments after --" hint."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        original = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            raise click.UsageError(self._hint(exc, original), ctx) from exc

    def _hint(self, exc: click.NoSuchOption, args: list[str]) -> str:
        option = exc.option_name
        at = next((i for i, a in enumerate(args) if a == option or a.startswith(option + "=")),
                  None)  # fmt: skip
        message = exc.format_message()
        if at is None or "--" in args[:at]:
            return message
        fixed = [*args[:at], "--", *args[at:]]
        path = _command_path(exc.ctx)
        return (
            f"{message}\n{option} is not an option of `{path}`: arguments for the script go "
            f"after '--', e.g.\n    {path} {shlex.join(fixed)}"
        )


def _command_path(ctx: Any) -> str:
    return ctx.command_path if isinstance(ctx, click.Context) else "tracker submit"
