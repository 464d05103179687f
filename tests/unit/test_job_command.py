"""How a submitted command is recorded relative to the project root
(tracker.cli.job_command.relative_to_root): path arithmetic only, table-driven."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.cli.job_command import find_project_root, relative_to_root


@pytest.mark.parametrize(
    ("argv", "cwd", "root", "recorded_argv", "recorded_cwd"),
    [
        (["python", "train.py"], "/p", "/p", ["python", "train.py"], "."),
        (["python", "train.py", "--x"], "/p/examples", "/p", ["python", "train.py", "--x"],
         "examples"),
        (["python", "/p/examples/train.py"], "/p/examples", "/p", ["python", "train.py"],
         "examples"),
        (["python", "/p/train.py"], "/p/examples", "/p", ["python", "../train.py"], "examples"),
        (["python", "/elsewhere/t.py"], "/p", "/p", ["python", "/elsewhere/t.py"], "."),
        (["/p/run.sh"], "/p", "/p", ["./run.sh"], "."),
        (["./run.sh"], "/p/a", "/p", ["./run.sh"], "a"),
        (["bash", "-c", "true"], "/p", "/p", ["bash", "-c", "true"], "."),
        (["python", "train.py"], "/other", "/p", ["python", "train.py"], "/other"),
        (["python", "train.py"], "/pp", "/p", ["python", "train.py"], "/pp"),  # not inside /p
    ],
)  # fmt: skip
def test_relative_to_root(argv: list[str], cwd: str, root: str, recorded_argv: list[str],
                          recorded_cwd: str) -> None:  # fmt: skip
    recorded = relative_to_root(argv, cwd, root)
    assert (recorded.argv, recorded.cwd) == (recorded_argv, recorded_cwd)


def test_the_default_root_is_the_git_work_tree_else_the_directory(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    assert find_project_root(str(tmp_path / "repo" / "a" / "b")) == str(tmp_path / "repo")
    assert find_project_root(str(tmp_path / "plain")) == str(tmp_path / "plain")
    assert find_project_root(str(tmp_path / "plain"), str(tmp_path)) == str(tmp_path)
