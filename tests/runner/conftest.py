"""Fixtures for the runner tests (helpers live in tests/support/runner.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.runner import Procs


@pytest.fixture
def procs(store_url: str, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(store_url, tmp_path)
    yield p
    p.close()
    # pytest shows this only when the test failed: what each worker/scheduler said
    for proc in p.started:
        text = proc.output()
        print(f"----- {proc.log.name} (last 4000 characters) -----\n{text[-4000:]}")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A directory the test jobs write their reports into."""
    d = tmp_path / "out"
    d.mkdir()
    return d
