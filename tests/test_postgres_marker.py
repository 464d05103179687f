"""``-m postgres`` selects exactly the tests that run against PostgreSQL: the ``postgresql``
half of every test on ``store_url`` / ``empty_store_url`` (marked by tests/conftest.py at
collection) and the tests marked by hand because they start a server themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# store_url tests, empty_store_url tests, and a test that starts its own cluster
FILES = ["tests/core/test_cli.py", "tests/core/test_migrations.py", "tests/core/test_outage.py"]


def _collected(*marker: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *marker, *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


@pytest.mark.slow  # two pytest runs in subprocesses
def test_the_postgres_marker_selects_the_postgresql_half() -> None:
    marked = _collected("-m", "postgres")
    unmarked = _collected("-m", "not postgres")
    for name in ("test_cli.py", "test_migrations.py"):  # store_url, empty_store_url
        assert any(f"/{name}::" in test and "[postgresql" in test for test in marked), name
        assert any(f"/{name}::" in test and "[sqlite" in test for test in unmarked), name
    assert not any("[postgresql" in test for test in unmarked)
    by_hand = {test for test in marked if "[postgresql" not in test}
    assert by_hand and all("/test_outage.py::" in test for test in by_hand)
