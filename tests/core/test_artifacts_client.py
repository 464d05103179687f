"""Artifacts and media from a training script (tracker.log_artifact/log_text/log_dict/
log_image/log_figure/log_histogram) through the writer thread into a real store (SQLite and
PostgreSQL): every kind, ordering, flush/finish, failures surfaced, the byte budget, exit."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
import yaml
from PIL import Image

import tracker
from tracker.client.run import Run
from tracker.errors import InvalidInput, NoActiveRun, UploadError
from tracker.store import Store, artifacts
from tracker.store.runs import get_run


@pytest.fixture
def run(store_url: str, artifact_root: Path) -> Any:
    r = tracker.init(project="media", uri=store_url, system_interval=None)
    yield r
    if not r.finished:
        r.finish()


def _store(run: Run) -> Store:
    return run.sink.store  # type: ignore[attr-defined]


def _read(run: Run, path: str) -> bytes:
    with artifacts.open_artifact(_store(run), run.id, path) as fh:
        return fh.read()


def _pixels(run: Run, path: str) -> np.ndarray:
    with Image.open(io.BytesIO(_read(run, path))) as image:
        return np.asarray(image)


def test_every_kind_is_stored(run: Run, tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = tmp_path / "outputs"
    (out / "sub").mkdir(parents=True)
    (out / "a.txt").write_text("A")
    (out / "sub" / "b.bin").write_bytes(bytes(range(256)))
    single = tmp_path / "preds.csv"
    single.write_text("id,p\n1,0.5\n")
    rgb = np.random.default_rng(0).integers(0, 255, (8, 6, 3), dtype=np.uint8)
    png_file = tmp_path / "pic.png"
    Image.fromarray(rgb).save(png_file)

    run.log({"loss": 1.0}, step=4)
    tracker.log_artifact(out)
    tracker.log_artifact(single, name="eval/preds.csv")
    tracker.log_text("notes.md", "# hello")
    tracker.log_dict("config.yaml", {"lr": 0.1, "layers": [1, 2]})
    tracker.log_dict("metrics.json", {"acc": np.float64(0.9)})
    tracker.log_image("np", rgb, caption="numpy")  # the run's current step: 4
    tracker.log_image("tensor", torch.from_numpy(rgb).permute(2, 0, 1).float() / 255, step=5)
    tracker.log_image("pil", Image.fromarray(rgb), step=5)
    tracker.log_image("file", png_file, step=6)
    tracker.log_image("batch", torch.zeros(4, 1, 5, 5), step=6)
    fig, ax = plt.subplots(figsize=(2, 2), dpi=40)
    ax.plot([1, 2, 3])
    tracker.log_figure("curve", fig, step=7)
    plt.close(fig)
    scatter = go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2], name="val"))
    tracker.log_figure("scatter", scatter, step=7)
    tracker.log_histogram("weights", torch.arange(100.0), step=8, bins=10)
    run.log({"loss": 0.5}, step=9)
    tracker.flush()

    store = _store(run)
    paths = {a.path: a for a in artifacts.list_artifacts(store, run.id)}
    assert _read(run, "outputs/a.txt") == b"A"
    assert _read(run, "outputs/sub/b.bin") == bytes(range(256))
    assert _read(run, "eval/preds.csv") == single.read_bytes()
    assert _read(run, "notes.md") == b"# hello"
    assert yaml.safe_load(_read(run, "config.yaml")) == {"lr": 0.1, "layers": [1, 2]}
    assert json.loads(_read(run, "metrics.json")) == {"acc": 0.9}
    image = paths["media/images/np/000000004.png"]
    assert (image.step, image.media_type, image.meta["caption"]) == (4, "image/png", "numpy")
    assert (image.meta["width"], image.meta["height"]) == (6, 8)
    assert np.array_equal(_pixels(run, image.path), rgb)
    assert np.array_equal(_pixels(run, "media/images/tensor/000000005.png"), rgb)
    assert np.array_equal(_pixels(run, "media/images/pil/000000005.png"), rgb)
    assert _read(run, "media/images/file/000000006.png") == png_file.read_bytes()
    assert _pixels(run, "media/images/batch/000000006.png").shape == (16, 16)  # 2x2 grid
    assert _pixels(run, "media/figures/curve/000000007.png").ndim == 3
    plotly_doc = json.loads(_read(run, "media/figures/scatter/000000007.plotly.json"))
    assert plotly_doc["data"][0]["y"] == [3, 1, 2] and plotly_doc["data"][0]["name"] == "val"
    assert paths["media/figures/scatter/000000007.plotly.json"].meta == {"kind": "plotly"}
    hist = json.loads(_read(run, "media/histograms/weights/000000008.json"))
    assert hist["counts"] == [10] * 10 and hist["edges"][0] == 0.0
    assert paths["media/histograms/weights/000000008.json"].meta["bins"] == 10
    assert artifacts.media_keys(store, run.id) == {
        "figures": {"curve": [7], "scatter": [7]},
        "histograms": {"weights": [8]},
        "images": {"batch": [6], "file": [6], "np": [4], "pil": [5], "tensor": [5]},
    }
    assert get_run(store, run.id).last_metrics["loss"] == 0.5  # points flow beside uploads


def test_uploads_are_stored_in_the_order_logged(run: Run) -> None:
    for i in range(40):
        run.log_text("progress.txt", f"epoch {i}")
        run.log_image("img", np.full((4, 4), i, dtype=np.uint8), step=i % 3)
    run.flush()
    assert _read(run, "progress.txt") == b"epoch 39"
    # the last image logged at each step wins: 39 at step 0, 37 at step 1, 38 at step 2
    for step, value in [(0, 39), (1, 37), (2, 38)]:
        assert (_pixels(run, f"media/images/img/{step:09d}.png") == value).all()


def test_finish_stores_everything_without_flush(store_url: str, artifact_root: Path) -> None:
    run = tracker.init(project="media", uri=store_url, system_interval=None)
    for step in range(30):
        run.log_image("x", torch.rand(3, 16, 16), step=step)
        run.log_histogram("h", np.random.default_rng(step).normal(size=1000), step=step)
    run.finish()
    store = Store(store_url)
    try:
        keys = artifacts.media_keys(store, run.id)
        assert keys["images"]["x"] == list(range(30))
        assert keys["histograms"]["h"] == list(range(30))
        assert get_run(store, run.id).status == "finished"
    finally:
        store.close()
    with pytest.raises(NoActiveRun):
        run.log_text("late.txt", "too late")


def test_a_failed_upload_is_raised_by_the_next_call_and_the_run_goes_on(
    run: Run, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.bmp"
    broken.write_bytes(b"not an image at all")
    run.log_image("bad", broken, step=1)  # converted (and refused by Pillow) in the writer
    run.log_text("after.txt", "still stored")
    with pytest.raises(
        UploadError, match=r"image .bad. at step 1 .*broken.bmp.*UnidentifiedImageError"
    ):
        run.flush()
    run.log({"loss": 1.0}, step=2)  # raised once: the run goes on
    run.flush()
    assert _read(run, "after.txt") == b"still stored"
    assert [a.path for a in artifacts.list_artifacts(_store(run), run.id)] == ["after.txt"]


def test_a_failure_surfaces_in_log_too(run: Run, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gif"
    broken.write_bytes(b"GIF89a broken")
    run.log_image("bad", broken, step=0)
    run._writer.uploads.put_marker(marker := _Marker())
    assert marker.done.wait(30)
    with pytest.raises(UploadError, match="broken"):
        run.log({"loss": 1.0})


class _Marker:
    def __init__(self) -> None:
        import threading

        self.done = threading.Event()


def test_refused_by_the_store_is_an_upload_error(run: Run) -> None:
    # a media type the store refuses: not a passing outage, so not retried
    from tracker.client.media import Artifact, Pending

    art = Artifact("x.bin", b"x", media_type="not a media type")
    run._writer.put_upload(Pending("artifact 'x.bin'", lambda: [art], 1))
    with pytest.raises(UploadError, match=r"artifact 'x\.bin'.*InvalidInput"):
        run.flush()


def test_bad_input_fails_in_the_call(run: Run, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="is not an image"):
        run.log_image("x", np.zeros((2, 3, 5, 7, 9)))
    with pytest.raises(InvalidInput, match="neither a file nor a directory"):
        run.log_artifact(tmp_path / "missing.txt")
    with pytest.raises(InvalidInput):
        run.log_text("../escape.txt", "x")
    with pytest.raises(tracker.InvalidMetricKey):
        run.log_histogram("bad key!", [1.0])


def test_past_the_byte_budget_entries_wait_then_go_to_disk(
    store_url: str, artifact_root: Path, tmp_path: Path
) -> None:
    run = tracker.init(
        project="media", uri=store_url, system_interval=None, max_media_mb=0.01,
        spill_dir=tmp_path / "spill",
    )  # fmt: skip
    uploads = run._writer.uploads
    uploads.wait_s = 0.0  # no waiting: the entries over the budget are built here, to disk
    images = [np.full((64, 64, 3), i, dtype=np.uint8) for i in range(20)]  # 12 KiB each
    for i, image in enumerate(images):
        run.log_image("x", image, step=i)
        assert uploads.held_bytes <= max(uploads.budget_bytes, image.nbytes)
    run.flush()
    assert uploads.spilled_on_put > 0
    for i in range(20):
        assert (_pixels(run, f"media/images/x/{i:09d}.png") == i).all()
    assert not any(uploads.spill_dir.iterdir())  # the spilled files are gone once stored
    run.finish()


def test_a_follower_rank_stores_nothing(store_url: str, artifact_root: Path) -> None:
    leader = tracker.init(project="media", uri=store_url, system_interval=None)
    follower = Run(leader.sink, leader.info, active=False, system_interval=None)
    follower.log_text("rank1.txt", "x")
    follower.finish()
    leader.finish()
    store = Store(store_url)
    try:
        assert artifacts.list_artifacts(store, leader.id) == []
    finally:
        store.close()


EXIT_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tracker

    run = tracker.init(project="exit", uri=sys.argv[1], system_interval=None)
    print("RUN", run.id, flush=True)
    for step in range(25):
        tracker.log({"loss": 1.0 / (step + 1)}, step=step)
        tracker.log_image("sample", np.full((32, 32), step, dtype=np.uint8))
    tracker.log_text("done.txt", "bye")
    # no finish(): the exit of the process stores what is queued
    """
)


@pytest.mark.slow
def test_process_exit_stores_queued_uploads(
    store_url: str, artifact_root: Path, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(EXIT_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), store_url], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    run_id = int(proc.stdout.split()[1])
    store = Store(store_url)
    try:
        assert artifacts.media_keys(store, run_id)["images"]["sample"] == list(range(25))
        with artifacts.open_artifact(store, run_id, "done.txt") as fh:
            assert fh.read() == b"bye"
        assert get_run(store, run_id).status == "finished"
    finally:
        store.close()
