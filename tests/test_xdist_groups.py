"""The parallel run's groups hold: ``scripts/test.sh`` runs ``pytest -n N --dist loadgroup``,
and ``tests/conftest.py`` puts every test in a group (the machine-wide thing it uses -- the
Slurm cluster, the install venvs -- else its file), so that one Slurm cluster and one set of
venvs are set up, in one worker. pytest-xdist 3.8 marks a group by appending it to the test's
node id, which pytest 9.2 no longer reads (it keeps node ids in a structure of its own): every
test then went to any worker, each worker started its own Slurm cluster and built its own
venvs, and nothing failed to say so. Here a real parallel run of two files, with this suite's
grouping hook, must keep each file in one worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

TESTS = """
import json, os, pathlib
import pytest

@pytest.mark.parametrize("n", range(6))
def test_where(n):
    out = pathlib.Path(os.environ["GROUPS_OUT"]) / f"{__name__}-{n}.json"
    out.write_text(json.dumps([__name__, os.environ["PYTEST_XDIST_WORKER"]]))
"""


def test_each_group_runs_in_one_worker(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    for name in ("test_first.py", "test_second.py"):
        (project / name).write_text(TESTS)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "GROUPS_OUT": str(out), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
         "no:cacheprovider", "--rootdir", str(project), str(project)],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen: dict[str, set[str]] = {}
    for path in out.iterdir():
        module, worker = json.loads(path.read_text())
        seen.setdefault(module, set()).add(worker)
    assert sorted(seen) == ["test_first", "test_second"], seen
    assert all(len(workers) == 1 for workers in seen.values()), (
        f"a group was split between workers: {seen} (pytest and pytest-xdist versions that "
        "do not keep xdist_group together: see constraints.txt)"
    )
