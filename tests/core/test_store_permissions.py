"""The store is private to its owner: it holds job environments and the installation
secret, so a store this tracker creates is 0600 in a 0700 directory whatever the umask, a
store readable by others is warned about, and `tracker db permissions --fix` closes it."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.runner import TRACKER
from tracker.store import Store
from tracker.store.runs import list_runs

CLI = list(TRACKER)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_store_is_private_whatever_the_umask(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    script = (
        "import os, tracker\n"
        "os.umask(0o022)\n"
        "with tracker.init(project='p', system_interval=None, quiet=True) as run:\n"
        "    tracker.log({'loss': 1.0}, step=0)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_SERVER_REGISTRY"] = str(tmp_path / "registry")
    done = subprocess.run([sys.executable, "-c", script], cwd=home, env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    store_dir = home / ".tracker"
    assert _mode(store_dir) == 0o700
    db = store_dir / "tracker.db"
    assert _mode(db) == 0o600
    for extra in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        if extra.exists():
            assert _mode(extra) == 0o600, extra
    assert "can be read by other accounts" not in done.stderr


def test_an_open_store_is_warned_about_and_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    db = shared / "old.db"
    sqlite3.connect(db).close()  # made by an older tracker: the umask's 0644
    os.chmod(db, 0o644)
    url = f"sqlite:///{db}"
    with caplog.at_level(logging.WARNING, logger="tracker.store.permissions"):
        Store(url).close()
        Store(url).close()  # once per process
    warned = [r.getMessage() for r in caplog.records if "other accounts" in r.getMessage()]
    assert len(warned) == 1 and str(db) in warned[0] and "tracker db permissions --fix" in warned[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    check = subprocess.run([*CLI, "db", "permissions", "--uri", url], env=env,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert check.returncode == 1, check.stdout + check.stderr
    assert "OPEN" in check.stdout and "--fix" in check.stderr
    fixed = subprocess.run([*CLI, "db", "permissions", "--uri", url, "--fix"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert _mode(shared) == 0o700 and _mode(db) == 0o600
    again = subprocess.run([*CLI, "db", "permissions", "--uri", url], env=env,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert again.returncode == 0 and "OPEN" not in again.stdout
    assert list_runs(Store(url)) == []  # still a working store


def test_permissions_refuses_a_postgresql_url() -> None:
    done = subprocess.run(
        [*CLI, "db", "permissions", "--uri", "postgresql+psycopg://u@127.0.0.1:1/x"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "PostgreSQL" in done.stderr
