"""Where a job runs on this worker: its recorded paths resolved against the project root.

Jobs submitted by ``tracker submit`` record their directory relative to a project root
(``.``, ``examples``) and their interpreter as plain ``python`` (see
:mod:`tracker.cli.job_command`), so that the same job runs on any worker holding a copy of
the project. :func:`resolve_job_paths` turns them into this host's paths:

* a relative directory is joined to the worker's project root (``tracker worker
  --project-root DIR``); a worker given no ``--project-root`` uses the submitting host's
  project root (recorded with the job) when the job's directory exists there -- the same
  host, or a shared file system -- and else the directory it was started in
  (:func:`choose_project_root`);
* ``python`` becomes this worker's interpreter (``sys.executable``); a pinned interpreter
  path is kept (one that does not exist here is replaced later, as before);
* an absolute directory (jobs stored before this rule, or outside the project root) is used
  as is; no directory means the worker's own.

Failure mode: a directory or ``.py`` script that is not there raises
:class:`~tracker.runner.execution.SpawnError` naming the full path on this host and the
project root, which the worker records as ``missing_file``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from tracker.runner.execution import SpawnError

PYTHON = "python"


def choose_project_root(
    worker_root: str, given: bool, submitted_root: str | None, cwd: str | None
) -> str:
    """The project root a job's relative directory resolves against on this worker.

    An explicit ``--project-root`` (``given``) always wins; otherwise the submitting host's
    root when the job's directory exists under it here, else the worker's own directory.
    """
    if given or submitted_root is None or cwd is None or os.path.isabs(cwd):
        return worker_root
    if os.path.isdir(os.path.join(submitted_root, cwd)):
        return submitted_root
    return worker_root


def resolve_job_paths(
    argv: Sequence[str], cwd: str | None, project_root: str, host: str,
    python: str = sys.executable,
) -> tuple[list[str], str | None]:  # fmt: skip
    """(argv, directory) to start the job with on this host.

    Raises:
        SpawnError: the job's directory, or its ``.py`` script, does not exist here.
    """
    argv = list(argv)
    if argv and argv[0] == PYTHON:
        argv[0] = python
    where = ""
    if cwd is not None and not os.path.isabs(cwd):
        where = f" (the job's directory {cwd!r} under this worker's project root {project_root})"
        cwd = os.path.normpath(os.path.join(project_root, cwd))
    fix = (
        "; start the worker in a copy of the project, or give it --project-root DIR"
        if where
        else ""
    )
    if cwd is not None and not os.path.isdir(cwd):
        raise SpawnError(f"the working directory {cwd} does not exist on {host}{where}{fix}")
    script = argv[1] if len(argv) > 1 and _runs_python(argv[0]) else None
    if script is not None and script.endswith(".py"):
        path = os.path.join(cwd or os.getcwd(), script)
        if not os.path.isfile(path):
            raise SpawnError(f"the script {path} does not exist on {host}{where}{fix}")
    return argv, cwd


def _runs_python(program: str) -> bool:
    name = os.path.basename(program)
    return name.startswith("python") and not name.endswith((".py", "-config"))
