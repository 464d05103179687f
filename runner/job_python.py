"""Which Python a job runs with: the worker's own, or -- ``tracker worker --env venv`` -- a
virtual environment built from the job's own requirements, once per distinct file.

The requirements are the project root's ``requirements.txt`` (installed with ``pip install
-r``, from the root, so relative paths and ``-e .`` work), else the ``[project]
dependencies`` of its ``pyproject.toml``; a project with neither runs with the worker's
Python. An environment is keyed by the file's bytes and the worker's interpreter, built under
``--env-dir`` (default: ``envs`` beside the snapshot directory) while a lock file keeps two
jobs from building the same one, and marked ready only when ``pip`` succeeded: a build cut
off by a crash is started again from scratch. It sees the worker's own packages (torch, the
tracker's client) through a ``.pth`` file, after its own: what the requirements pin wins.

Failure mode: :class:`EnvBuildError` with the end of pip's output; the worker fails the
attempt as ``missing_module`` with it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

__all__ = ["REQUIREMENT_FILES", "EnvBuildError", "ensure_env", "requirements_of"]

REQUIREMENT_FILES = ("requirements.txt", "pyproject.toml")
READY = ".tracker-env-ready"
BUILD_TIMEOUT_S = 1800.0


class EnvBuildError(Exception):
    """Building a job's environment failed; the message ends with pip's last lines."""


def requirements_of(root: Path) -> tuple[str, bytes] | None:
    """(file name, bytes) of the first requirements file at the project root, or None."""
    for name in REQUIREMENT_FILES:
        path = root / name
        if path.is_file():
            return name, path.read_bytes()
    return None


def _dependencies(pyproject: bytes) -> list[str]:
    try:
        doc = tomllib.loads(pyproject.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EnvBuildError(f"pyproject.toml cannot be read: {exc}") from None
    deps = (doc.get("project") or {}).get("dependencies") or []
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise EnvBuildError("pyproject.toml: [project] dependencies must be a list of strings")
    return deps


def ensure_env(root: Path, env_dir: Path, python: str = sys.executable) -> str | None:
    """The interpreter of the environment for the project at ``root`` (built now if need
    be), or None when the project names no requirements.

    Raises:
        EnvBuildError: ``venv`` or ``pip`` failed, or timed out.
    """
    found = requirements_of(root)
    if found is None:
        return None
    name, content = found
    key = hashlib.sha256(name.encode() + b"\0" + content + b"\0" + python.encode()).hexdigest()
    target = env_dir / key[:24]
    interpreter = target / "bin" / "python"
    if (target / READY).exists():
        return str(interpreter)
    env_dir.mkdir(parents=True, exist_ok=True)
    with open(env_dir / f"{key[:24]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another job may be building it: wait for it
        if (target / READY).exists():
            return str(interpreter)
        shutil.rmtree(target, ignore_errors=True)  # a build cut off half way
        _run([python, "-m", "venv", str(target)], root, "python -m venv")
        _see_worker_packages(target)
        if name == "requirements.txt":
            _run([str(interpreter), "-m", "pip", "install", "--disable-pip-version-check",
                  "-r", str(root / name)], root, "pip install -r requirements.txt")  # fmt: skip
        else:
            deps = _dependencies(content)
            if deps:
                _run([str(interpreter), "-m", "pip", "install", "--disable-pip-version-check",
                      *deps], root, "pip install (pyproject.toml dependencies)")  # fmt: skip
        (target / READY).write_text(f"{name}\n")
    return str(interpreter)


def _see_worker_packages(target: Path) -> None:
    """A ``.pth`` file that puts the worker's site-packages after the environment's own."""
    site = Path(sysconfig.get_paths(vars={"base": str(target), "platbase": str(target)})["purelib"])
    own = sysconfig.get_paths()
    paths = dict.fromkeys(p for p in (own["purelib"], own["platlib"]) if p)
    # ``site.addsitedir``, not a bare path: the worker's own .pth files (an editable install's
    # finder) run too
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in paths)
    (site / "zz-tracker-worker.pth").write_text(lines)


def _run(argv: list[str], cwd: Path, what: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise EnvBuildError(f"{what} took over {BUILD_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise EnvBuildError(f"{what} could not start: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[-1500:]
        raise EnvBuildError(f"{what} failed (exit {done.returncode}): {said}")
