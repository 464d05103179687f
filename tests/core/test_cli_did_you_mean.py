"""A mistyped command gets "Did you mean" (issue 24, item 6): at the top level, whose
commands load lazily, and in every command group; a usage error, exit status 2."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from tracker.cli import COMMANDS, load_command, main


def _groups() -> list[tuple[list[str], click.Group]]:
    """Every command group under ``tracker``, with the words that reach it."""
    found: list[tuple[list[str], click.Group]] = []
    for name in sorted(COMMANDS):
        command = load_command(name)
        if isinstance(command, click.Group):
            found.append(([name], command))
    return found


def test_a_top_level_typo_names_the_command_as_a_real_process() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from tracker.cli import main; main()", "doctr"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Error: No such command 'doctr'. Did you mean 'doctor'?" in result.stderr


@pytest.mark.parametrize(
    ("args", "typo", "meant"),
    [(["run", "ls"], "run", "runs"), (["jobs", "lss"], "lss", "ls"),
     (["runs", "lss"], "lss", "ls"), (["db", "upgrad"], "upgrad", "upgrade"),
     (["workers", "lss"], "lss", "ls")],
)  # fmt: skip
def test_typos_get_did_you_mean(args: list[str], typo: str, meant: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"No such command {typo!r}. Did you mean {meant!r}?" in result.output


def test_every_top_level_command_is_suggested() -> None:
    for name in COMMANDS:
        result = CliRunner().invoke(main, [name + "z"])
        assert result.exit_code == 2 and repr(name) in result.output, (name, result.output)


@pytest.mark.parametrize(("words", "group"), _groups(), ids=lambda v: " ".join(v)
                         if isinstance(v, list) else "")  # fmt: skip
def test_every_group_suggests_its_commands(words: list[str], group: click.Group) -> None:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        result = CliRunner().invoke(main, [*words, name + "z"])
        assert result.exit_code == 2, result.output
        assert "Did you mean" in result.output and repr(name) in result.output, result.output


def test_nothing_close_is_click_s_plain_error() -> None:
    result = CliRunner().invoke(main, ["xyzzy"])
    assert result.exit_code == 2
    assert "No such command 'xyzzy'." in result.output and "Did you mean" not in result.output
    assert CliRunner().invoke(main, ["runs", "--bogus"]).exit_code == 2
