"""``tracker.watch(..., histograms=True)``: weight and gradient histograms on watched steps,
stored as media through the writer (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import tracker
from tracker.store import artifacts


def test_watch_logs_weight_and_gradient_histograms_every_n_steps(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(tmp_path / "root"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    run = tracker.init(project="watch", uri=store_url, system_interval=None)
    tracker.watch(model, optimizer, every=2, histograms=True)
    for step in range(6):
        optimizer.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        optimizer.step()
        tracker.log({"loss": loss}, step=step)
    run.flush()
    keys = artifacts.media_keys(run.sink.store, run.id)["histograms"]  # type: ignore[attr-defined]
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert set(keys) == {f"{kind}/{n}" for kind in ("weights", "grads") for n in names}
    assert keys["weights/0.weight"] == [1, 3, 5]  # watched steps 2, 4, 6: the loop's step
    with artifacts.open_artifact(
        run.sink.store,  # type: ignore[attr-defined]
        run.id,
        "media/histograms/weights/0.weight/000000001.json",
    ) as fh:
        doc = json.load(fh)
    assert sum(doc["counts"]) == 12 and len(doc["edges"]) == 65
    run.finish()


def test_histograms_are_off_by_default(store_url: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(tmp_path / "root"))
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    run = tracker.init(project="watch", uri=store_url, system_interval=None)
    tracker.watch(model, optimizer, every=1)
    for step in range(2):
        model(torch.randn(3, 2)).sum().backward()
        optimizer.step()
        tracker.log({"x": 1.0}, step=step)
    run.flush()
    assert artifacts.media_keys(run.sink.store, run.id) == {}  # type: ignore[attr-defined]
    run.finish()
