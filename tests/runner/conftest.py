"""Fixtures for the runner tests (helpers live in runner_support.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # runner_support, as tests/conftest.py does

from runner_support import Procs


@pytest.fixture
def procs(store_url: str, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(store_url, tmp_path)
    yield p
    p.close()


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A directory the test jobs write their reports into."""
    d = tmp_path / "out"
    d.mkdir()
    return d
