"""``tracker worker --env venv`` (issue 28, item 5): a job whose code snapshot carries a
``requirements.txt`` runs in an environment built from it once per file, and still sees the
worker's own packages (the tracker's client); a requirement pip cannot install fails the
job ``missing_module`` with pip's reason. Real ``venv``, real ``pip`` (offline: the
requirement is a wheel inside the project), a real worker."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from tests.runner.test_snapshot_jobs import _ended, _stdout
from tests.support.runner import SnapshotProcs
from tracker.store import Store
from tracker.store import jobs as store_jobs

TRAIN = """\
import sys
import tinypkg
import tracker  # the worker's own packages are visible too
print("tinypkg", tinypkg.VALUE)
print("prefix", sys.prefix)
"""


def _wheel(path: Path, value: str) -> None:
    """A minimal pure-Python wheel of ``tinypkg`` (pip installs it without a network)."""
    files = {
        "tinypkg/__init__.py": f"VALUE = {value!r}\n".encode(),
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")


def _project(root: Path, requirement: str) -> Path:
    (root / "vendor").mkdir(parents=True)
    _wheel(root / "vendor" / "tinypkg-1.0-py3-none-any.whl", "from-the-wheel")
    (root / "requirements.txt").write_text(requirement + "\n")
    (root / "train.py").write_text(TRAIN)
    return root


@pytest.mark.slow
def test_a_job_runs_in_the_environment_of_its_requirements_built_once(
    store: Store, sprocs: SnapshotProcs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(sprocs.root))
    good = _project(tmp_path / "good", "./vendor/tinypkg-1.0-py3-none-any.whl")
    bad = _project(tmp_path / "bad", "./vendor/no-such-1.0-py3-none-any.whl")
    ids = []
    for project in (good, good, bad):
        done = sprocs.run("submit", "train.py", cwd=project)
        assert done.returncode == 0, done.stderr
        ids.append(int(done.stdout.split()[1]))
    envs = tmp_path / "envs"
    sprocs.worker("--gpus", "none", "--exit-when-idle", "--env", "venv", "--env-dir", str(envs),
                  "--snapshot-dir", str(tmp_path / "snaps"))  # fmt: skip
    first, second, broken = (_ended(store, i) for i in ids)
    for job in (first, second):
        assert job.status == "succeeded", job.failure_hint
        out = _stdout(store, job.id)
        assert "tinypkg from-the-wheel" in out, out
        assert f"prefix {envs}" in out, out
    built = [p for p in envs.iterdir() if p.is_dir()]
    assert len(built) == 2  # one for the good requirements (shared), one for the bad ones
    assert (broken.status, broken.failure_class) == ("failed", "missing_module")
    assert "pip install -r requirements.txt failed" in (broken.failure_hint or "")
    assert "no-such-1.0" in (broken.failure_hint or ""), broken.failure_hint
    assert store_jobs.get_job(store, broken.id).attempt == 1


def test_requirements_files_are_found_in_order(tmp_path: Path) -> None:
    from tracker.runner.job_python import EnvBuildError, _dependencies, requirements_of

    assert requirements_of(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["numpy>=1"]\n')
    assert requirements_of(tmp_path) == (
        "pyproject.toml",
        b'[project]\ndependencies = ["numpy>=1"]\n',
    )
    assert _dependencies(b'[project]\ndependencies = ["numpy>=1"]\n') == ["numpy>=1"]
    assert _dependencies(b"[tool.x]\n") == []
    with pytest.raises(EnvBuildError, match=r"pyproject\.toml cannot be read"):
        _dependencies(b"[project\n")
    (tmp_path / "requirements.txt").write_text("x\n")
    assert requirements_of(tmp_path) == ("requirements.txt", b"x\n")
