"""TrackerLogger with real Lightning on a tiny CPU model (examples/lightning_tiny.py), on a
SQLite file and on PostgreSQL: config, metrics with their steps, checkpoints recorded and
verified, and a queued job killed after its first checkpoint that resumes from it."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import EXAMPLES, load_example
from tracker.store.checkpoints import list_checkpoints
from tracker.store.metrics import metric_history
from tracker.store.runs import get_run, list_runs

pytest.importorskip("lightning")

pytestmark = pytest.mark.slow

STEPS_PER_EPOCH = 4  # 64 samples, batches of 16


def values(store: Any, run_id: int, key: str) -> list[tuple[int, float]]:
    return [(p.step, p.value) for p in metric_history(store, run_id, key)]


def test_config_metrics_and_checkpoints(tracked: Any, tmp_path: Path) -> None:
    example = load_example("lightning_tiny")
    assert example.main(["--epochs", "3", "--hidden", "12"]) == 0
    (run,) = list_runs(tracked, project="lightning-tiny")
    assert run.status == "finished"
    assert run.config == {"hidden": 12, "lr": 0.05, "features": 8}

    train = values(tracked, run.id, "train/loss")
    assert [s for s, _ in train] == list(range(3 * STEPS_PER_EPOCH))
    assert all(0 < v < 5 for _, v in train)
    val_steps = [s for s, _ in values(tracked, run.id, "val/loss")]
    assert val_steps == [STEPS_PER_EPOCH * e - 1 for e in (1, 2, 3)]  # Lightning's step
    acc = values(tracked, run.id, "val/acc")
    assert [s for s, _ in acc] == val_steps and all(0 <= v <= 1 for _, v in acc)
    assert [v for _, v in values(tracked, run.id, "epoch")][-1] == 2

    ckpts = sorted(list_checkpoints(tracked, run.id), key=lambda c: c.step)
    assert [c.step for c in ckpts] == [STEPS_PER_EPOCH * e for e in (1, 2, 3)]
    for epoch, c in enumerate(ckpts):
        path = Path(c.path)
        assert path.name == f"epoch={epoch}-step={c.step}.ckpt" and path.is_file()
        assert c.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert c.bytes == path.stat().st_size and c.state == "ok"
        # the metrics at save: this epoch's validation values
        assert c.metrics["val/loss"] == values(tracked, run.id, "val/loss")[epoch][1]
        assert c.metrics["epoch"] == epoch


def test_resume_checkpoint_skips_a_corrupt_file(tracked: Any) -> None:
    import lightning as L

    import tracker
    from tracker.integrations.lightning import TrackerLogger

    example = load_example("lightning_tiny")
    assert example.main(["--epochs", "2"]) == 0
    (run,) = list_runs(tracked, project="lightning-tiny")
    newest, older = list_checkpoints(tracked, run.id)

    logger = TrackerLogger(run=tracker.init("lightning-tiny", "attached"))
    assert logger.last_verified_checkpoint() is None  # a new run has none
    logger.run.record_checkpoint(older.path, 7)
    logger.run.record_checkpoint(newest.path, 8)
    assert logger.resume_checkpoint() == newest.path
    with open(newest.path, "r+b") as fh:  # a torn write of the newest file
        fh.seek(100)
        fh.write(b"\0\0\0\0")
    assert logger.resume_checkpoint() == older.path  # the corrupt one is skipped
    states = {c.step: c.state for c in list_checkpoints(tracked, logger.run.id)}
    assert states == {7: "ok", 8: "corrupt"}

    model = example.TinyClassifier()
    trainer = L.Trainer(
        max_epochs=3,
        logger=logger,
        accelerator="cpu",
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    train = example.DataLoader(example.data(64), batch_size=16)
    trainer.fit(model, train, ckpt_path=logger.resume_checkpoint())
    assert trainer.current_epoch == 3
    # resumed after epoch 0: only epochs 1 and 2 trained here
    steps = [s for s, _ in values(tracked, logger.run.id, "train/loss")]
    assert steps == list(range(STEPS_PER_EPOCH, 3 * STEPS_PER_EPOCH))
    logger.run.finish()


def test_retried_job_resumes_from_the_last_verified_checkpoint(
    tracked: Any, store_url: str, tmp_path: Path
) -> None:
    """A real queued job: attempt 1 is SIGKILLed after epoch 0's checkpoint; the worker
    retries it, and attempt 2 resumes from that checkpoint into the same run."""
    from tests.support.runner import Procs
    from tracker.entities import JobSpec
    from tracker.store import jobs as store_jobs
    from tracker.store import queue

    argv = [sys.executable, str(EXAMPLES / "lightning_tiny.py"), "--fail-after-epoch", "0",
            "--checkpoint-dir", str(tmp_path / "ckpt")]  # fmt: skip
    job = queue.enqueue(tracked, JobSpec(argv=argv, max_retries=1, project="lightning-tiny"))
    procs = Procs(store_url, tmp_path)
    try:
        worker = procs.worker("--gpus", "none", "--exit-when-idle", "--no-housekeeping")
        assert worker.wait(240, "the job's two attempts") == 0, worker.output()
    finally:
        procs.close()
    tries = store_jobs.attempts(tracked, job.id)
    assert [(t.status, t.failure_class) for t in tries] == [
        ("failed", "killed_by_signal"),
        ("succeeded", None),
    ], tries
    first_ckpt = str((tmp_path / "ckpt" / f"epoch=0-step={STEPS_PER_EPOCH}.ckpt").resolve())
    assert tries[1].resume_checkpoint == first_ckpt
    assert store_jobs.get_job(tracked, job.id).status == "succeeded"
    run = get_run(tracked, job.run_id)
    assert run.status == "finished"
    steps = [s for s, _ in values(tracked, run.id, "train/loss")]
    assert steps == list(range(3 * STEPS_PER_EPOCH))  # epoch 0 from attempt 1, then 1 and 2
    ckpt_steps = sorted(c.step for c in list_checkpoints(tracked, run.id))
    assert ckpt_steps == [STEPS_PER_EPOCH * e for e in (1, 2, 3)]


def test_ddp_with_two_cpu_processes_logs_once_from_rank_zero(tmp_path: Path) -> None:
    """Real DDP (gloo, 2 CPU processes; Lightning re-runs the script for rank 1): one run,
    the metrics and checkpoints of rank 0 only, each step once. A SQLite file: the store's
    side is the same as in the tests above."""
    import os
    import subprocess

    from tracker.store import Store

    uri = f"sqlite:///{tmp_path / 'ddp.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_URI"] = uri
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "lightning_tiny.py"), "--devices", "2",
         "--strategy", "ddp"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store(uri)
    try:
        (run,) = list_runs(store)
        assert run.status == "finished"
        per_epoch = STEPS_PER_EPOCH // 2  # each rank trains on half the batches
        steps = [s for s, _ in values(store, run.id, "train/loss")]
        assert steps == list(range(3 * per_epoch))
        ckpts = sorted(c.step for c in list_checkpoints(store, run.id))
        assert ckpts == [per_epoch * e for e in (1, 2, 3)]
    finally:
        store.close()
