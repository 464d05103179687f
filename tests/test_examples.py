"""The examples end to end: real training subprocesses against a SQLite store.

Each test runs a script as its own process (cwd = the test's tmp dir, so checkpoints land
there) and checks what it left in the store: for train_digits the run's status and config, a
train/loss point for every step, validation metrics, and checkpoints that exist and match
their sha256. Every example's health is then judged as a user judges it, by ``tracker
doctor RUN`` (text and ``--json``) in its own process: the healthy ones have no problems,
train_diverge goes non-finite at the step it printed, train_leak's memory grows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

import tracker
from tests.support.runner import TRACKER
from tracker.store import Store, artifacts
from tracker.store.checkpoints import list_checkpoints
from tracker.store.diagnoses import list_diagnoses
from tracker.store.metrics import metric_history
from tracker.store.runs import create_run, get_run, list_runs

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"
TRACKER_ENV = (
    "TRACKER_URI",
    "TRACKER_RUN_ID",
    "TRACKER_JOB_ID",
    "TRACKER_CONFIG",
    "TRACKER_PROJECT",
    "TRACKER_RESUME_CHECKPOINT",
    "RANK",
)


def _uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tracker.db'}"


@pytest.fixture
def store(tmp_path: Path):
    store = Store(_uri(tmp_path))
    yield store
    store.close()


def train(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the example to completion; returns (run id it printed, stdout)."""
    clean = {k: v for k, v in os.environ.items() if k not in TRACKER_ENV}
    clean.update({"TRACKER_URI": _uri(tmp_path), **(env or {})})
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert done.returncode == 0, f"train_digits.py exited with {done.returncode}\n{output}"
    found = re.search(r"^run (\d+):", done.stdout, re.MULTILINE)
    assert found, f"train_digits.py did not print its run id\n{output}"
    return int(found.group(1)), done.stdout


def run_example(
    tmp_path: Path, script: str, *args: str, returncode: int = 0
) -> tuple[int, subprocess.CompletedProcess[str]]:
    """Run ``examples/<script>`` as a user would; returns (the one run it made, the result)."""
    clean = {k: v for k, v in os.environ.items() if k not in TRACKER_ENV}
    clean.update({"TRACKER_URI": _uri(tmp_path), "HF_HUB_OFFLINE": "1"})
    done = subprocess.run(
        [sys.executable, str(SCRIPT.with_name(script)), *args], cwd=tmp_path, env=clean,
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    said = f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert done.returncode == returncode, f"{script} exited with {done.returncode}\n{said}"
    store = Store(_uri(tmp_path))
    try:
        runs = list_runs(store)
    finally:
        store.close()
    assert len(runs) == 1, (runs, said)
    return runs[0].id, done


def doctor(tmp_path: Path, run_id: int) -> tuple[int, str, list[dict]]:
    """``tracker doctor RUN`` and ``tracker doctor RUN --json`` in their own processes:
    (exit status, the text report, the diagnoses of the JSON report)."""
    clean = {k: v for k, v in os.environ.items() if k not in TRACKER_ENV}
    clean["TRACKER_URI"] = _uri(tmp_path)
    reports = [
        subprocess.run(
            [*TRACKER, "doctor", str(run_id), *extra],
            cwd=tmp_path,
            env=clean,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        for extra in ((), ("--json",))
    ]
    text, as_json = reports
    assert text.returncode == as_json.returncode in (0, 1), (text.stderr, as_json.stderr)
    found = json.loads(as_json.stdout)
    assert found["run_id"] == run_id
    return text.returncode, text.stdout, found["diagnoses"]


def steps(store: Store, run_id: int, key: str) -> list[int]:
    return [p.step for p in metric_history(store, run_id, key)]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(path: str) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("data", [None, "synthetic"])
def test_one_epoch_logs_every_step_and_a_verified_checkpoint(
    tmp_path: Path, store: Store, data: str | None
) -> None:
    extra = ["--data", data, "--model.width", "16"] if data else []
    run_id, _ = train(tmp_path, "--epochs", "1", *extra)

    run = get_run(store, run_id)
    assert run.status == "finished", run.error
    assert run.config["epochs"] == 1
    assert run.config["data"] == (data or run.config["data"])
    assert run.config["data"] in ("sklearn", "synthetic")
    if data:
        assert run.config["model"] == {"kind": "cnn", "width": 16, "layers": 2}

    latest = tracker.latest_checkpoint(run_id, uri=_uri(tmp_path))
    assert latest is not None, "no checkpoint whose file exists and matches its sha256"
    last_step = latest.step
    assert last_step > 0
    assert steps(store, run_id, "train/loss") == list(range(1, last_step + 1))
    assert steps(store, run_id, "train/acc") == list(range(1, last_step + 1))
    assert steps(store, run_id, "lr") == list(range(1, last_step + 1))

    val_acc = metric_history(store, run_id, "val/acc")
    assert [p.step for p in val_acc] == [last_step]
    assert 0.0 <= val_acc[0].value <= 1.0
    assert steps(store, run_id, "val/loss") == [last_step]

    path = Path(latest.path)
    assert path.is_file()
    assert path.stat().st_size == latest.bytes
    assert sha256(path) == latest.sha256
    assert latest.metrics["val/acc"] == pytest.approx(val_acc[0].value)
    state = load(latest.path)
    assert set(state) >= {"model", "optimizer", "scheduler", "epoch", "step"}
    assert (state["epoch"], state["step"]) == (1, last_step)

    # The epoch's media: what the demo's Media tab shows.
    media = artifacts.media_keys(store, run_id)
    assert media["images"] == {"val/samples": [last_step], "val/confusion": [last_step]}
    weight_keys = {f"weights/{name}" for name, v in state["model"].items() if v.dim() > 1}
    assert set(media["histograms"]) == weight_keys
    samples = artifacts.get_artifact(store, run_id, f"media/images/val/samples/{last_step:09d}.png")
    caption = samples.meta["caption"]
    assert caption.startswith("predicted: ") and len(caption.split()) == 17, caption


def test_resume_continues_from_the_checkpoint(tmp_path: Path, store: Store) -> None:
    first_id, _ = train(tmp_path, "--epochs", "1")
    checkpoint = tracker.latest_checkpoint(first_id, uri=_uri(tmp_path))
    assert checkpoint is not None
    first_steps = steps(store, first_id, "train/loss")

    env = {"TRACKER_RESUME_CHECKPOINT": checkpoint.path}
    second_id, out = train(tmp_path, "--epochs", "2", env=env)

    assert f"resuming from {checkpoint.path} at epoch 1" in out
    assert second_id != first_id
    assert get_run(store, second_id).status == "finished"
    second_steps = steps(store, second_id, "train/loss")
    assert second_steps[0] == first_steps[-1] + 1
    per_epoch = len(first_steps)
    assert second_steps == list(range(per_epoch + 1, 2 * per_epoch + 1))
    latest = tracker.latest_checkpoint(second_id, uri=_uri(tmp_path))
    assert latest is not None
    assert latest.step == 2 * per_epoch
    assert load(latest.path)["epoch"] == 2


def test_resumed_run_repeats_the_uninterrupted_run(tmp_path: Path, store: Store) -> None:
    # Resuming from the epoch-1 checkpoint of a 2-epoch run must reproduce its epoch 2:
    # same shuffling, same dropout masks, same optimizer and lr schedule state.
    straight_id, _ = train(tmp_path, "--epochs", "2")
    first_epoch = min(list_checkpoints(store, straight_id), key=lambda c: c.step)
    env = {"TRACKER_RESUME_CHECKPOINT": first_epoch.path}
    resumed_id, _ = train(tmp_path, "--epochs", "2", env=env)

    straight = metric_history(store, straight_id, "train/loss")[first_epoch.step :]
    resumed = metric_history(store, resumed_id, "train/loss")
    assert [p.step for p in resumed] == [p.step for p in straight]
    assert [p.value for p in resumed] == pytest.approx([p.value for p in straight], rel=1e-5)
    end_a = tracker.latest_checkpoint(straight_id, uri=_uri(tmp_path))
    end_b = tracker.latest_checkpoint(resumed_id, uri=_uri(tmp_path))
    assert end_a is not None and end_b is not None
    weights_a, weights_b = load(end_a.path)["model"], load(end_b.path)["model"]
    for name, tensor in weights_a.items():
        torch.testing.assert_close(weights_b[name], tensor, msg=f"parameter {name} differs")


def test_submitted_config_overrides_defaults_and_flags(tmp_path: Path, store: Store) -> None:
    # What a worker does: create the run, pass its id and the submitted config in the env.
    queued = create_run(store, "digits", "queued-job", {}, status="queued")
    submitted = {"epochs": 1, "data": "synthetic", "model": {"width": 8}}
    env = {"TRACKER_RUN_ID": str(queued.id), "TRACKER_CONFIG": json.dumps(submitted)}
    run_id, _ = train(tmp_path, "--model.width", "16", "--lr", "0.01", env=env)

    assert run_id == queued.id
    assert [r.id for r in list_runs(store)] == [queued.id]
    run = get_run(store, queued.id)
    assert run.status == "finished", run.error
    assert run.config["model"] == {"kind": "cnn", "width": 8, "layers": 2}
    assert run.config["lr"] == 0.01  # a flag not overridden by the submitted config
    assert run.config["data"] == "synthetic"
    latest = tracker.latest_checkpoint(run_id, uri=_uri(tmp_path))
    assert latest is not None
    first_conv = load(latest.path)["model"]["0.weight"]
    assert first_conv.shape[0] == 8


@pytest.mark.parametrize(
    ("script", "checkpoints"),
    [("lightning_tiny.py", [4, 8, 12]), ("hf_tiny.py", [4, 8])],
)
def test_integration_examples_run_as_scripts(
    tmp_path: Path, store: Store, script: str, checkpoints: list[int]
) -> None:
    """The Lightning and Hugging Face examples as a user runs them (their own process,
    offline): one finished run with verified checkpoints (tests/integrations checks the rest)."""
    pytest.importorskip("lightning" if script.startswith("lightning") else "transformers")
    clean = {k: v for k, v in os.environ.items() if k not in TRACKER_ENV}
    clean.update({"TRACKER_URI": _uri(tmp_path), "HF_HUB_OFFLINE": "1"})
    done = subprocess.run(
        [sys.executable, str(SCRIPT.with_name(script))], cwd=tmp_path, env=clean,
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = list_runs(store)
    assert run.status == "finished" and f"run {run.id}: resumed from None" in done.stdout
    assert sorted(c.step for c in list_checkpoints(store, run.id)) == checkpoints
    assert tracker.latest_checkpoint(run.id, uri=_uri(tmp_path)) is not None
    status, text, found = doctor(tmp_path, run.id)
    assert (status, found) == (0, []), text


# ------------------------------------------------------- each example, judged by the doctor


def test_healthy_digits_run_has_no_problems(tmp_path: Path) -> None:
    """The default run (15 epochs, system metrics and step times on) is healthy."""
    run_id, _ = run_example(tmp_path, "train_digits.py", "--data", "synthetic")
    status, text, found = doctor(tmp_path, run_id)
    assert (status, found) == (0, []), text
    assert text.strip() == f"run {run_id}: no problems found"


def test_diverging_run_is_nonfinite_at_the_step_it_stopped(tmp_path: Path) -> None:
    run_id, done = run_example(tmp_path, "train_diverge.py", returncode=1)
    stopped = re.search(r"NonFiniteLossError: loss is nan at step (\d+)", done.stderr)
    assert stopped, done.stderr[-2000:]
    step = int(stopped.group(1))
    status, text, found = doctor(tmp_path, run_id)
    assert status == 1, text
    assert [(d["code"], d["metric"], d["step"]) for d in found] == [
        ("nonfinite", "train/loss", step)
    ], text
    assert found[0]["severity"] == "error" and "learning rate" in found[0]["hint"]
    assert f"[error] nonfinite at step {step} (train/loss)" in text


def test_diverge_with_a_sane_learning_rate_has_no_problems(tmp_path: Path) -> None:
    run_id, _ = run_example(tmp_path, "train_diverge.py", "--lr", "0.01")
    status, text, found = doctor(tmp_path, run_id)
    assert (status, found) == (0, []), text


def test_leaking_run_shows_memory_growth_from_its_first_steps(tmp_path: Path) -> None:
    """train_leak logs its own ``mem/rss_bytes`` with system metrics off: the doctor reads
    that series too (the stored verdict of the run's final pass, and ``tracker doctor``)."""
    run_id, _ = run_example(tmp_path, "train_leak.py", "--steps", "120")
    with closing(Store(_uri(tmp_path))) as store:
        stored = [e.data for e in list_diagnoses(store, run_id)]
        rss = [p.value for p in metric_history(store, run_id, "mem/rss_bytes")]
    assert [(d["code"], d["metric"]) for d in stored] == [("memory_growth", "mem/rss_bytes")]
    status, text, found = doctor(tmp_path, run_id)
    assert status == 1, text
    assert [(d["code"], d["metric"]) for d in found] == [("memory_growth", "mem/rss_bytes")]
    assert found[0]["step"] <= 10, found  # the leak begins with the first kept loss
    assert found[0]["evidence"]["bytes_per_step"] > 0
    assert "memory_growth at step" in text and "Host memory (RSS)" in text
    assert rss[-1] - rss[0] > 32 * 2**20, rss  # what the script itself measured


def test_fixed_leak_has_no_problems(tmp_path: Path) -> None:
    run_id, _ = run_example(tmp_path, "train_leak.py", "--steps", "120", "--fixed")
    status, text, found = doctor(tmp_path, run_id)
    assert (status, found) == (0, []), text
