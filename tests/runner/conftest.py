"""Fixtures for the runner tests (helpers live in tests/support/runner.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.runner import Procs, SnapshotProcs
from tests.support.slurm_cluster import SlurmCluster, skip_reason, start_cluster


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
def sprocs(store_url: str, tmp_path: Path) -> Iterator[SnapshotProcs]:
    p = SnapshotProcs(store_url, tmp_path, tmp_path / "artifact-root")
    yield p
    p.close()
    for proc in p.started:
        print(f"----- {proc.log.name} -----\n{proc.output()[-4000:]}")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A directory the test jobs write their reports into."""
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    """The real single-node Slurm cluster (munged, slurmctld, slurmd), once per session;
    skips where it cannot run (not root, Slurm not installed)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster()
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)  # the dispatcher processes inherit it
    try:
        yield cluster
    finally:
        cluster.stop()
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
