"""Distributed jobs: launch ``--nproc-per-node N`` jobs through torchrun (pure argv rewriting).

``python script.py args`` becomes ``python -m torch.distributed.run --nproc-per-node N
--standalone script.py args`` (the same interpreter, so the same environment); ``python -m
pkg args`` keeps ``-m``; any other program runs under ``--no-python``. torchrun sets RANK,
LOCAL_RANK and WORLD_SIZE; the client makes rank 0 the run's only writer of metrics, and
every rank reports its own GPU memory under ``sys/rank{r}/...``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def is_python(program: str) -> bool:
    name = os.path.basename(program)
    return name.startswith("python") and not name.endswith((".py", "-config"))


def wrap_argv(
    argv: Sequence[str], nproc_per_node: int | None, *, python: str = sys.executable
) -> list[str]:
    """The argv to run for a job; unchanged unless ``nproc_per_node`` is set.

    A non-Python program is launched by ``python`` (default: the worker's interpreter).
    """
    argv = list(argv)
    if not nproc_per_node:
        return argv
    program, rest = argv[0], argv[1:]
    python = program if is_python(program) else python
    launcher = [
        python,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc_per_node}",
        "--standalone",
    ]
    if is_python(program) and rest and rest[0] == "-m" and len(rest) > 1:
        return [*launcher, "-m", *rest[1:]]
    if is_python(program) and rest and not rest[0].startswith("-"):
        return [*launcher, *rest]
    return [*launcher, "--no-python", *argv]
