"""TrackerCallback with a real Hugging Face Trainer on a tiny BERT built from a config
(examples/hf_tiny.py; no download), on a SQLite file and on PostgreSQL: config, training and
evaluation metrics at the global step, checkpoint folders recorded and verified, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import load_example
from tracker.filedigest import path_digest
from tracker.store.checkpoints import list_checkpoints
from tracker.store.metrics import metric_history
from tracker.store.runs import list_runs

pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

TIMING = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
          "eval_runtime", "eval_samples_per_second", "eval_steps_per_second")  # fmt: skip


def history(store: Any, run_id: int, key: str) -> list[tuple[int, float]]:
    return [(p.step, p.value) for p in metric_history(store, run_id, key)]


def test_config_metrics_eval_and_checkpoints(tracked: Any, tmp_path: Path) -> None:
    example = load_example("hf_tiny")
    assert example.main(["--epochs", "2"]) == 0
    (run,) = list_runs(tracked, project="hf-tiny")
    assert run.status == "finished"
    assert run.config["args"]["learning_rate"] == 1e-3
    assert run.config["args"]["report_to"] == []
    assert run.config["model"]["hidden_size"] == 32
    assert run.config["model"]["num_hidden_layers"] == 2

    # 64 samples / 16 = 4 steps an epoch; logs every 2 steps, evaluation every epoch
    loss = history(tracked, run.id, "loss")
    assert [s for s, _ in loss] == [2, 4, 6, 8] and all(0 < v < 2 for _, v in loss)
    assert [s for s, _ in history(tracked, run.id, "learning_rate")] == [2, 4, 6, 8]
    assert [s for s, _ in history(tracked, run.id, "eval_loss")] == [4, 8]
    accuracy = history(tracked, run.id, "eval_accuracy")
    assert [s for s, _ in accuracy] == [4, 8] and all(0 <= v <= 1 for _, v in accuracy)
    assert [s for s, _ in history(tracked, run.id, "train_loss")] == [8]

    ckpts = sorted(list_checkpoints(tracked, run.id), key=lambda c: c.step)
    assert [c.step for c in ckpts] == [4, 8]
    for c in ckpts:
        folder = Path(c.path)
        assert folder.name == f"checkpoint-{c.step}" and folder.is_dir()
        assert (c.bytes, c.sha256) == path_digest(folder) and c.state == "ok"
        eval_loss = dict(history(tracked, run.id, "eval_loss"))[c.step]
        assert c.metrics["eval_loss"] == eval_loss  # the metrics at save


def test_resume_from_the_last_verified_folder(tracked: Any, tmp_path: Path) -> None:
    import tracker
    from tracker.integrations.transformers import TrackerCallback

    example = load_example("hf_tiny")
    assert example.main(["--epochs", "2"]) == 0
    (run,) = list_runs(tracked, project="hf-tiny")
    newest, older = list_checkpoints(tracked, run.id)

    callback = TrackerCallback(run=tracker.init("hf-tiny", "again"))
    callback.run.record_checkpoint(older.path, older.step)
    callback.run.record_checkpoint(newest.path, newest.step)
    assert callback.resume_checkpoint() == newest.path
    (Path(newest.path) / "trainer_state.json").write_text("{}")  # a changed file inside
    assert callback.resume_checkpoint() == older.path
    assert {c.step: c.state for c in list_checkpoints(tracked, callback.run.id)} == {
        4: "ok",
        8: "corrupt",
    }
    callback.run.finish()


def test_a_retried_job_resumes_from_the_folder_the_worker_chose(
    tracked: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a retried job sees: TRACKER_RESUME_CHECKPOINT (set by the worker) wins, and the
    trainer continues from that folder's global step."""
    from transformers import TrainerCallback

    example = load_example("hf_tiny")
    assert example.main(["--epochs", "2", "--output-dir", str(tmp_path / "first")]) == 0
    (first,) = list_runs(tracked, project="hf-tiny")
    older = min(list_checkpoints(tracked, first.id), key=lambda c: c.step)
    monkeypatch.setenv("TRACKER_RESUME_CHECKPOINT", older.path)

    started: list[int] = []

    class FirstStep(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            started.append(state.global_step)

    original = example.Trainer

    def with_probe(*args: Any, **kwargs: Any) -> Any:
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), FirstStep()]
        return original(*args, **kwargs)

    monkeypatch.setattr(example, "Trainer", with_probe)
    assert example.main(["--epochs", "2", "--output-dir", str(tmp_path / "second")]) == 0
    second = max(list_runs(tracked, project="hf-tiny"), key=lambda r: r.id)
    assert started == [older.step]  # resumed at step 4
    assert [s for s, _ in history(tracked, second.id, "loss")] == [6, 8]
    assert [s for s, _ in history(tracked, second.id, "eval_loss")] == [8]
