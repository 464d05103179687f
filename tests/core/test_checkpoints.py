"""Atomic, hashed checkpoints and the last good one."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tracker
from tracker.errors import CheckpointError
from tracker.store import Store
from tracker.store.checkpoints import list_checkpoints
from tracker.store.runs import list_runs

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture
def run(store_url: str):
    r = tracker.init(project="ckpt", uri=store_url, system_interval=None)
    yield r
    r.finish()


def test_save_records_size_hash_and_metrics(run, tmp_path: Path, store_url: str) -> None:
    info = run.save_checkpoint(
        {"w": torch.arange(10.0)}, step=7, metrics={"val/acc": torch.tensor(0.5), "loss": 2}
    )
    path = Path(info.path)
    assert path == (run.checkpoint_dir / "step-7.pt").resolve()
    assert info.bytes == path.stat().st_size
    assert info.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info.metrics == {"val/acc": 0.5, "loss": 2.0}
    assert torch.equal(torch.load(path)["w"], torch.arange(10.0))
    (stored,) = list_checkpoints(Store(store_url), run.id)
    assert (stored.step, stored.sha256, stored.state) == (7, info.sha256, "ok")
    assert not list(path.parent.glob(".*tmp*"))  # no temporary file left behind


def test_latest_checkpoint_skips_corrupt_and_missing_files(run, store_url: str) -> None:
    first = run.save_checkpoint({"w": torch.ones(3)}, step=1)
    second = run.save_checkpoint({"w": torch.ones(3) * 2}, step=2)
    third = run.save_checkpoint({"w": torch.ones(3) * 3}, step=3)
    assert tracker.latest_checkpoint().step == 3
    Path(third.path).unlink()
    data = bytearray(Path(second.path).read_bytes())
    data[len(data) // 2] ^= 0xFF  # flip one byte: same size, different hash
    Path(second.path).write_bytes(bytes(data))
    latest = tracker.latest_checkpoint()
    assert latest is not None and latest.id == first.id
    assert tracker.latest_checkpoint(run.id, uri=store_url).id == first.id
    states = {c.step: c.state for c in list_checkpoints(Store(store_url), run.id)}
    assert states == {3: "missing", 2: "corrupt", 1: "ok"}


def test_failed_save_leaves_no_file(run, tmp_path: Path) -> None:
    target = tmp_path / "ck" / "model.pt"
    with pytest.raises(CheckpointError, match=r"saving checkpoint .*model\.pt failed"):
        run.save_checkpoint({"bad": lambda: 1}, step=1, path=target)  # lambdas do not pickle
    assert not target.exists()
    assert list(target.parent.iterdir()) == []
    assert tracker.latest_checkpoint() is None


@pytest.mark.slow
def test_kill_mid_write_never_leaves_a_file_under_the_final_name(
    store_url: str, tmp_path: Path
) -> None:
    target = tmp_path / "ck" / "final.pt"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "slow_checkpoint.py"), store_url, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()  # blocks until the save is halfway (or the child died)
    assert line.strip() == "MIDWRITE", proc.stderr.read()
    assert list(target.parent.glob(".final.pt.tmp-*"))  # the save is under way
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not target.exists()
    store = Store(store_url)
    (run,) = list_runs(store, project="ckpt")
    assert list_checkpoints(store, run.id) == []


def test_runs_of_two_stores_in_one_directory_never_share_files(tmp_path: Path) -> None:
    first = tracker.init(project="p", uri=f"sqlite:///{tmp_path / 'a.db'}", system_interval=None)
    a = first.save_checkpoint({"w": torch.ones(2)}, step=1)
    first.finish()
    second = tracker.init(project="p", uri=f"sqlite:///{tmp_path / 'b.db'}", system_interval=None)
    b = second.save_checkpoint({"w": torch.zeros(5)}, step=1)
    second.finish()
    assert first.id == second.id == 1
    assert a.path != b.path
    assert tracker.latest_checkpoint(1, uri=f"sqlite:///{tmp_path / 'a.db'}").sha256 == a.sha256
