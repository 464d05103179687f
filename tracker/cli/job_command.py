"""What a submitted job runs: checked at submit time, recorded relative to a project root.

Checked at submit (:func:`build_command`; every failure is ``InvalidInput``, field
``command``, exit status 2):

* ``SCRIPT.py ARGS`` runs with the Python interpreter; the script must be a file.
* Anything else is the program itself (``-- ./train.sh --fast``): a path must be an
  existing, executable file (``README.md`` is refused with the fix: run it through its
  interpreter, or ``chmod +x``); a bare name must be on ``PATH`` or, when it names an
  executable file in the job's directory, is run as ``./NAME``.

Recorded so that a worker on another machine can run it (:func:`relative_to_root`): the
*project root* is ``--project-root``, else the git work tree that holds the job's directory,
else that directory itself. The job's directory is stored relative to the root (``.``,
``examples``), the interpreter as plain ``python`` (each worker runs its own
``sys.executable``), and a script or program path inside the root relative to the job's
directory. A worker resolves a relative directory against its own ``--project-root``
(default: the directory it was started in; see :mod:`tracker.runner.project_root`). A
directory outside the project root stays absolute, as do jobs stored before this rule.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from tracker.errors import InvalidInput

PYTHON = "python"  # the recorded interpreter: a worker runs its own sys.executable for it


@dataclass(frozen=True)
class JobCommand:
    argv: list[str]
    cwd: str  # relative to the project root, or absolute when outside it
    root: str | None = None  # the project root (absolute) when ``cwd`` is relative to it


def build_command(args: Sequence[str], cwd: str, project_root: str | None = None) -> JobCommand:
    """The checked argv and directory of a job submitted from ``cwd`` (absolute).

    Raises:
        InvalidInput: nothing to run, a missing script or program, a file that is neither
            a ``.py`` script nor executable, a project root that does not exist.
    """
    if not args:
        raise InvalidInput("give a script (train.py) or a command after --", field="command")
    first = args[0]
    if first.endswith(".py"):
        _check_script(first, cwd)
        argv = [PYTHON, first, *args[1:]]
    else:
        argv = [_check_program(first, cwd), *args[1:]]
    root = find_project_root(cwd, project_root)
    return relative_to_root(argv, cwd, root)


def _check_script(script: str, cwd: str) -> None:
    path = os.path.join(cwd, script)
    if not os.path.exists(path):
        raise InvalidInput(f"script {script} does not exist in {cwd}", field="command")
    if not os.path.isfile(path):
        raise InvalidInput(f"script {script}: {path} is not a file", field="command")


def _check_program(program: str, cwd: str) -> str:
    """``program`` as it will be exec'd (``./NAME`` for an executable file in ``cwd``)."""
    if os.sep not in program:
        local = os.path.join(cwd, program)
        if os.path.isfile(local) and os.access(local, os.X_OK):
            return "." + os.sep + program  # exec never searches the working directory
        if shutil.which(program) is not None:
            return program
        if not os.path.exists(local):
            raise InvalidInput(
                f"{program}: no such file in {cwd}, and no program of that name on PATH",
                field="command",
            )
    path = os.path.join(cwd, program)
    if not os.path.exists(path):
        raise InvalidInput(f"{program}: no such file (looked in {cwd})", field="command")
    if not os.path.isfile(path):
        raise InvalidInput(f"{program}: {path} is a directory, not a program", field="command")
    if not os.access(path, os.X_OK):
        raise InvalidInput(
            f"{program} is not a Python script (.py) and is not executable, so it cannot "
            f"run: run it through its interpreter (tracker submit -- bash {program}), or "
            f"make it executable (chmod +x {program})",
            field="command",
        )
    return program if os.sep in program else "." + os.sep + program


def find_project_root(cwd: str, explicit: str | None = None) -> str:
    """``explicit`` (must be a directory), else the git work tree holding ``cwd``, else
    ``cwd``; absolute.

    Raises:
        InvalidInput: ``explicit`` is not an existing directory.
    """
    if explicit is not None:
        root = os.path.abspath(explicit)
        if not os.path.isdir(root):
            raise InvalidInput(
                f"--project-root {explicit}: no such directory", field="project_root"
            )
        return root
    here = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return os.path.abspath(cwd)
        here = parent


def relative_to_root(argv: Sequence[str], cwd: str, root: str) -> JobCommand:
    """Record ``argv`` run in ``cwd`` relative to ``root`` (pure path arithmetic).

    ``cwd`` inside ``root`` becomes relative (``.`` for the root itself); an absolute
    script or program path inside ``root`` becomes relative to ``cwd``. Anything outside
    ``root`` stays absolute.
    """
    cwd = os.path.abspath(cwd)
    root = os.path.abspath(root)
    if not _inside(cwd, root):
        return JobCommand(list(argv), cwd)
    argv = list(argv)
    target = 1 if argv[0] == PYTHON and len(argv) > 1 else 0
    path = argv[target]
    if os.path.isabs(path) and _inside(path, root):
        rel = os.path.relpath(path, cwd)
        argv[target] = rel if target == 1 or os.sep in rel else "." + os.sep + rel
    return JobCommand(argv, os.path.relpath(cwd, root), root)


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), root]) == root
