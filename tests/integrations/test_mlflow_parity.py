"""Issue 12's acceptance: the same Lightning and Hugging Face runs, once through MLflow
(Lightning's ``MLFlowLogger``, HF ``report_to=["mlflow"]``, the real ``mlflow`` client against
``tracker ui``'s app on a free port) and once through the native integrations, store the same
metrics: the same keys, steps and values (bit-exact). MLflow keeps every value logged at one
step (Lightning logs ``epoch`` with both the training and the validation metrics of an
epoch's last step), the native integrations the latest one: the comparison is of the latest
value per step. Wall-clock metrics (``*_runtime``, ``*_per_second``) and the tracker's own
``sys/*`` series are left out; artifacts are off on the MLflow path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integrations.conftest import load_example
from tracker.store.metrics import metric_history, metric_keys
from tracker.store.runs import list_runs

pytest.importorskip("lightning")
pytest.importorskip("transformers")
pytest.importorskip("mlflow")

pytestmark = pytest.mark.slow


def metrics_of(store: Any, project: str) -> dict[str, list[tuple[int, float]]]:
    (run,) = list_runs(store, project=project)
    assert run.status == "finished", run
    out = {}
    for key in metric_keys(store, run.id):
        if key.startswith("sys/") or key.endswith(("_runtime", "_per_second")):
            continue
        out[key] = [(p.step, p.value) for p in metric_history(store, run.id, key)]
    return out


def latest_per_step(metrics: dict[str, list[tuple[int, float]]]) -> dict[str, list[Any]]:
    """Each key's (step, value) pairs with one value per step: the last one logged (the
    history is in the order logged within a step)."""
    return {key: sorted(dict(points).items()) for key, points in metrics.items()}


def test_lightning_via_mlflow_and_native_store_the_same_metrics(
    tracked: Any, mlflow_server: Callable[[], str]
) -> None:
    mlflow_server()
    example = load_example("lightning_tiny")
    assert example.main(["--mlflow", "--project", "via-mlflow", "--checkpoint-dir", "a"]) == 0
    assert example.main(["--project", "native", "--checkpoint-dir", "b"]) == 0
    via_mlflow, native = metrics_of(tracked, "via-mlflow"), metrics_of(tracked, "native")
    assert set(native) == {"train/loss", "val/loss", "val/acc", "epoch"}
    assert latest_per_step(via_mlflow) == native
    assert len(native["train/loss"]) == 12


def test_transformers_via_mlflow_and_native_store_the_same_metrics(
    tracked: Any, mlflow_server: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mlflow_server()
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "via-mlflow")
    example = load_example("hf_tiny")
    assert example.main(["--mlflow", "--output-dir", "a"]) == 0
    assert example.main(["--project", "native", "--output-dir", "b"]) == 0
    via_mlflow, native = metrics_of(tracked, "via-mlflow"), metrics_of(tracked, "native")
    assert {"loss", "eval_loss", "eval_accuracy", "learning_rate", "grad_norm"} <= set(native)
    assert latest_per_step(via_mlflow) == native
