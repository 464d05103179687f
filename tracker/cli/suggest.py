""" "Did you mean": every ``tracker`` command group answers a mistyped command with the
closest names it has (``tracker doctr`` -> ``did you mean 'doctor'?``).

Click suggests only from a group's registered commands, and only since 8.4; the top-level
group loads its commands lazily (it has none registered), so it never suggested anything.
Here the names come from ``list_commands``, which every group answers, lazy or not.
"""

from __future__ import annotations

import difflib

import click

__all__ = ["SuggestingGroup", "did_you_mean"]


def did_you_mean(name: str, choices: list[str]) -> str:
    """`` Did you mean 'x'?`` (or ``'x' or 'y'``) for the names close to ``name``; empty when
    none is (``difflib``'s similarity of at least 0.6)."""
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if not close:
        return ""
    return f" Did you mean {' or '.join(repr(c) for c in close)}?"


class SuggestingGroup(click.Group):
    """A click group whose "No such command" error names the closest commands (usage error,
    exit status 2, as click's own)."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        normalize = ctx.token_normalize_func
        if (
            not ctx.resilient_parsing
            and not name.startswith("-")  # an option: click parses it (--help ...)
            and self.get_command(ctx, name) is None
            and (normalize is None or self.get_command(ctx, normalize(name)) is None)
        ):
            hint = did_you_mean(name, self.list_commands(ctx))
            if hint:
                ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)
