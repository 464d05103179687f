"""Fresh virtual environments installed from the project's wheel alone, as a user installs.

:func:`build_wheel` builds the wheel once from a copy of the working tree (``pip wheel
--no-deps``; the copy keeps the build's ``build/`` folder out of the checkout).
:func:`make_venv` creates ``python -m venv`` and installs ``<wheel>[extras]`` with the pins of
constraints.txt, never editable and never the ``dev`` extra; where the line's users have
torch, torch first, the way scripts/install.sh does it (the CPU index, then the package index).
Packages come from pip's own configuration (index, find-links, cache); bytecode is not
compiled at install (``PIP_NO_COMPILE``): it halves the torch install, and nothing that
is imported goes without it.

:class:`Server` is a long-running command (``tracker ui``/``up``) in its own process group,
its output in a file (a pipe nobody reads would fill up and stop it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"
TORCH_INDEX_URL = os.environ.get("TORCH_INDEX_URL", "https://download.pytorch.org/whl/cpu")
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "build", "dist", "*.egg-info", ".tracker", "*_cache",
    ".pytest_cache", "test-artifacts", "out", "node_modules",
)  # fmt: skip
PIP_TIMEOUT_S = 600
# What the installs must not see from the test's own process: its venv, its store, its token.
DROP = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "TRACKER_URI",
    "TRACKER_TOKEN",
    "TRACKER_STRICT",
    "TRACKER_ARTIFACT_ROOT",
    "TRACKER_PROJECT",
    "MLFLOW_TRACKING_URI",
)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROP}
    env.update(PIP_NO_COMPILE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    env.update(extra)
    return env


def run(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float = PIP_TIMEOUT_S,
        what: str = "") -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run to the end; fail the test with the command's output when it exits non-zero."""
    try:
        done = subprocess.run(
            argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what or argv} did not finish within {timeout} s:\n{exc.output}")
    if done.returncode != 0:
        pytest.fail(
            f"{what or ' '.join(argv)} exited with {done.returncode}\n"
            f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"
        )
    return done


def build_wheel(workdir: Path) -> Path:
    """The project's wheel, built from a copy of the working tree (symlinks kept, as git
    keeps them: tracker/web, tracker/runner and tracker/demo/train_digits.py are links)."""
    source = workdir / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    dist = workdir / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        env=clean_env(), cwd=workdir, what="pip wheel --no-deps")  # fmt: skip
    (wheel,) = dist.glob("tracker-*.whl")
    return wheel


@dataclass(frozen=True)
class Venv:
    path: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> str:
        return str(self.bin / "python")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of an activated venv (its bin/ first on PATH)."""
        return clean_env(PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                         VIRTUAL_ENV=str(self.path), **extra)  # fmt: skip

    def run(self, *argv: str, cwd: Path, timeout: float = 300, what: str = "",
            **env: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run ``argv`` (``tracker ...`` or ``python ...`` resolve inside the venv)."""
        exe = argv[0]
        if exe in ("python", "tracker"):
            exe = str(self.bin / exe)
        return run([exe, *argv[1:]], env=self.env(**env), cwd=cwd, timeout=timeout, what=what)

    def json(self, *argv: str, cwd: Path) -> Any:
        return json.loads(self.run(*argv, "--json", cwd=cwd).stdout)


def make_venv(path: Path, wheel: Path, extras: str, *, torch: bool) -> Venv:
    """``python -m venv path``, torch first if asked, then ``<wheel>[extras]`` with the pins
    (``extras`` like ``server,runner``; '' for the base install)."""
    run([sys.executable, "-m", "venv", str(path)], env=clean_env(), cwd=path.parent,
        what="python -m venv")  # fmt: skip
    venv = Venv(path)
    pip = [venv.python, "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS)]
    if torch:  # as scripts/install.sh: the CPU wheel of the pinned version, else the index
        try:
            run([*pip, "--retries", "0", "--timeout", "15", "--index-url", TORCH_INDEX_URL,
                 "torch"], env=venv.env(), cwd=path.parent, what="pip install torch")  # fmt: skip
        except pytest.fail.Exception:
            run([*pip, "torch"], env=venv.env(), cwd=path.parent, what="pip install torch")
    requirement = f"tracker[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
    run([*pip, requirement], env=venv.env(), cwd=path.parent, what=f"pip install {requirement}")
    return venv


class Server:
    """``argv`` in its own process group (what a terminal's Ctrl-C reaches), output to a file."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.log = cwd / f"server-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                start_new_session=True,
            )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        """Bounded poll of the output for a line that starts with ``prefix``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.popen.poll() is None:
            for line in self.output().splitlines():
                if line.startswith(prefix):
                    return line.strip()
            time.sleep(0.2)
        self.kill()
        pytest.fail(f"no line starting {prefix!r} within {timeout} s; output:\n{self.output()}")

    def interrupt(self, timeout: float) -> int:
        """Ctrl-C: SIGINT to the process group; its exit status, bounded by ``timeout``."""
        os.killpg(self.popen.pid, signal.SIGINT)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {timeout} s after Ctrl-C; output:\n{self.output()}")

    def kill(self) -> None:
        """SIGKILL the whole group (a gunicorn master, its workers, a worker and its jobs)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=30)
