"""``tracker submit`` checks the command when it is given (issue 14, item 4), through the
real ``tracker`` command against a real store: nothing is queued for a command that could
not run, and each refusal says what to do instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runner import Procs
from tracker.store import Store
from tracker.store.jobs import list_jobs


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "README.md").write_text("# not a program\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho ok\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "data").mkdir()
    return tmp_path


def refused(procs: Procs, *args: str) -> str:
    result = procs.run(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("submit", "README.md"),
         "README.md is not a Python script (.py) and is not executable"),
        (("submit", "--", "README.md"), "tracker submit -- bash README.md"),
        (("submit", "--", "./nope.sh"), "./nope.sh: no such file (looked in "),
        (("submit", "--", "nope-program"), "no program of that name on PATH"),
        (("submit", "missing.py"), "script missing.py does not exist in "),
        (("submit", "--", "data"), "is a directory, not a program"),
        (("submit", "train.py", "-c", "lr="), "-c lr=: the value is empty"),
        (("sweep", "train.py", "--random", "2", "-c", "lr=logunifrom(1e-5,1e-3)"),
         "unknown distribution 'logunifrom': did you mean loguniform(...)?"),
        (("submit", "train.py", "-c", "lr=nan"), "config.lr is nan: config values must be finite"),
        (("submit", "train.py", "--fail-on", "divergense"),
         "--fail-on 'divergense': unknown diagnosis kind 'divergense' (did you mean divergence?)"),
        (("sweep", "train.py", "-c", "lr=1,2", "--fail-on", "none,errors"),
         "--fail-on 'none,errors': none cannot be combined with other kinds"),
        (("schedule", "add", "0 3 * * *", "train.py", "--fail-on", ""), "--fail-on is empty"),
    ],
)  # fmt: skip
def test_refused_at_submit_and_nothing_queued(
    procs: Procs, project: Path, store: Store, args: tuple[str, ...], says: str
) -> None:
    assert says in refused(procs, *args)
    assert list_jobs(store) == []


def test_script_options_before_double_dash_get_the_fix(procs: Procs, project: Path,
                                                       store: Store) -> None:  # fmt: skip
    err = refused(procs, "submit", "train.py", "--epochs", "3")
    assert "No such option '--epochs'" in err
    assert "arguments for the script go after '--'" in err
    assert "tracker submit train.py -- --epochs 3" in err
    mixed = refused(procs, "submit", "train.py", "--epochs=3", "-c", "lr=1", "--lr", "3",
                    "--gpus", "1")  # fmt: skip
    assert "tracker submit train.py -c lr=1 --gpus 1 -- --epochs=3 --lr 3" in mixed
    assert list_jobs(store) == []
    done = procs.run("submit", "train.py", "--", "--epochs", "3")
    assert done.returncode == 0, done.stderr
    assert list_jobs(store)[0].argv == ["python", "train.py", "--epochs", "3"]


def test_runnable_commands_are_accepted(procs: Procs, project: Path, store: Store) -> None:
    for args in (
        ("submit", "--", "./run.sh"),
        ("submit", "--", "run.sh"),
        ("submit", "--", "bash", "README.md"),
        ("submit", "train.py", "-c", "lr=0.1"),
    ):
        result = procs.run(*args)
        assert result.returncode == 0, (args, result.stderr)
    argvs = [j.argv for j in reversed(list_jobs(store))]
    assert argvs == [["./run.sh"], ["./run.sh"], ["bash", "README.md"], ["python", "train.py"]]


def test_sweep_help_lists_the_distributions(procs: Procs) -> None:
    out = procs.run("sweep", "--help").stdout
    for text in ("choice(a, b, c)", "uniform(low, high)", "loguniform(low, high)",
                 "randint(low, high)"):  # fmt: skip
        assert text in out


def test_inf_in_a_dry_run_sweep_is_a_float(procs: Procs, project: Path) -> None:
    result = procs.run("sweep", "train.py", "-c", "x=inf,-inf,1", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    assert '"Infinity"' in result.stdout and '"-Infinity"' in result.stdout  # floats, encoded
