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
        fixed = self._script_args_last(args, at)
        path = _command_path(exc.ctx)
        return (
            f"{message}\n{option} is not an option of `{path}`; if it is meant for the "
            f"script, arguments for the script go after '--', e.g.\n    {path} "
            f"{shlex.join(fixed)}"
        )

    def _script_args_last(self, args: list[str], at: int) -> list[str]:
        """``args`` with every token from ``at`` on that is not one of this command's
        options (or an option's value) moved after ``--``."""
        takes_value = {
            name: not p.is_flag
            for p in self.params
            if isinstance(p, click.Option)
            for name in (*p.opts, *p.secondary_opts)
        }
        ours, script = list(args[:at]), []
        i = at
        while i < len(args):
            token = args[i]
            name = token.split("=", 1)[0]
            if name in takes_value:
                ours.append(token)
                if takes_value[name] and "=" not in token and i + 1 < len(args):
                    ours.append(args[i + 1])
                    i += 1
            else:
                script.append(token)
            i += 1
        return [*ours, "--", *script]


def _command_path(ctx: Any) -> str:
    return ctx.command_path if isinstance(ctx, click.Context) else "tracker submit"
