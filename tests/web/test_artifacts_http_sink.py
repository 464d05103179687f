"""Artifacts and media from a training script over HTTP (``TRACKER_URI=http://...``): the
HTTP sink's raw PUT against a live dashboard (real server thread, token on), SQLite and
PostgreSQL; refusals surfaced, an outage retried until the server is back."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from flask import Flask
from PIL import Image
from werkzeug.serving import make_server

import tracker
from tests.support.servers import ServerThread
from tests.support.web import TOKEN, TRACKER
from tracker.client.http_sink import HttpSink
from tracker.errors import UploadError
from tracker.store import Store, artifacts
from tracker.store.runs import get_run


@pytest.fixture
def live(
    make_app: Callable[..., Flask], serve: Callable[[Flask], ServerThread], artifact_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Flask, ServerThread]:  # fmt: skip
    app = make_app(TOKEN=TOKEN, ARTIFACT_ROOT=str(artifact_root))
    monkeypatch.setenv("TRACKER_TOKEN", TOKEN)
    return app, serve(app)


def _read(store: Store, run_id: int, path: str) -> bytes:
    with artifacts.open_artifact(store, run_id, path) as fh:
        return fh.read()


def test_every_kind_over_http(live: tuple[Flask, ServerThread], tmp_path: Path) -> None:
    app, server = live
    store = app.extensions["tracker"].store
    big = tmp_path / "weights.bin"
    big.write_bytes(bytes(range(256)) * 4096)  # 1 MiB, sent as a file
    run = tracker.init(project="http", uri=server.url, system_interval=None)
    assert isinstance(run.sink, HttpSink)
    rgb = np.random.default_rng(0).integers(0, 255, (6, 5, 3), dtype=np.uint8)
    run.log({"loss": 1.0}, step=2)
    run.log_artifact(big, name="ckpt/weights.bin")
    run.log_text("notes/üñí code.txt", "héllo")  # quoted in the URL
    run.log_dict("cfg.json", {"lr": 0.1})
    run.log_image("samples", rgb, caption="first")
    run.log_image("samples", torch.from_numpy(rgb).permute(2, 0, 1), step=3)
    run.log_histogram("w", torch.arange(10.0), step=3, bins=5)
    run.finish()

    assert _read(store, run.id, "ckpt/weights.bin") == big.read_bytes()
    assert _read(store, run.id, "notes/üñí code.txt") == "héllo".encode()
    assert json.loads(_read(store, run.id, "cfg.json")) == {"lr": 0.1}
    info = artifacts.get_artifact(store, run.id, "media/images/samples/000000002.png")
    assert (info.step, info.media_type, info.meta["caption"]) == (2, "image/png", "first")
    with Image.open(io.BytesIO(_read(store, run.id, info.path))) as image:
        assert np.array_equal(np.asarray(image), rgb)
    assert artifacts.media_keys(store, run.id) == {
        "histograms": {"w": [3]},
        "images": {"samples": [2, 3]},
    }
    hist = json.loads(_read(store, run.id, "media/histograms/w/000000003.json"))
    assert hist["counts"] == [2, 2, 2, 2, 2]
    assert get_run(store, run.id).status == "finished"


def test_a_refused_upload_is_raised_by_the_next_call(live: tuple[Flask, ServerThread]) -> None:
    from tracker.client.media import Artifact, Pending

    _, server = live
    run = tracker.init(project="http", uri=server.url, system_interval=None)
    art = Artifact("x.bin", b"x", media_type="not a media type")  # the server answers 400
    run._writer.put_upload(Pending("artifact 'x.bin'", lambda: [art], 1))
    run.log_text("ok.txt", "fine")
    with pytest.raises(UploadError, match=r"artifact 'x\.bin'.*media"):
        run.flush()
    run.finish()


def test_without_the_token_the_upload_fails_clearly(
    live: tuple[Flask, ServerThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = live
    run = tracker.init(project="http", uri=server.url, system_interval=None)
    run.sink.token = "wrong-token-" + "x" * 30  # type: ignore[attr-defined]
    run.log_text("a.txt", "x")
    with pytest.raises(UploadError, match="needs an access token"):
        run.flush()
    run.sink.token = TOKEN  # type: ignore[attr-defined]
    run.finish()


def test_uploads_wait_for_a_server_that_went_away(
    live: tuple[Flask, ServerThread], tmp_path: Path
) -> None:
    app, server = live
    store = app.extensions["tracker"].store
    port = server.server.server_port
    run = tracker.init(project="http", uri=server.url, system_interval=None)
    server.stop()  # the dashboard restarts: connections are refused meanwhile
    for step in range(5):
        run.log_image("x", np.full((4, 4), step, dtype=np.uint8), step=step)
    run.log_text("during.txt", "outage")
    with pytest.raises(tracker.StoreUnavailable):
        run.flush(timeout=1.0)
    assert run._writer.uploads.pending() > 0  # kept, not dropped
    again = make_server("127.0.0.1", port, app, threaded=True)
    import threading

    thread = threading.Thread(target=again.serve_forever, daemon=True)
    thread.start()
    try:
        run.flush(timeout=60)
        assert artifacts.media_keys(store, run.id)["images"]["x"] == [0, 1, 2, 3, 4]
        assert _read(store, run.id, "during.txt") == b"outage"
        run.finish()
    finally:
        again.shutdown()
        thread.join(timeout=10)
        again.server_close()


def test_finish_giving_up_spills_the_files_and_replay_uploads_them(
    live: tuple[Flask, ServerThread], tmp_path: Path
) -> None:
    app, server = live
    store = app.extensions["tracker"].store
    run = tracker.init(project="http", uri=server.url, system_interval=None)
    server.stop()
    for step in range(3):
        run.log_image("x", np.full((4, 4), 10 * step, dtype=np.uint8), step=step)
    run.log_text("late.txt", "kept on disk")
    with pytest.raises(tracker.StoreUnavailable, match="4 artifact files"):
        run.finish(timeout=1.0)
    spill = run._writer.exit_spill_path
    assert spill is not None and spill.exists()
    media_dir = run._writer.uploads.spill_dir
    assert len(list(media_dir.iterdir())) == 4
    assert artifacts.list_artifacts(store, run.id) == []

    done = subprocess.run(
        [*TRACKER, "db", "replay", "--uri", app.config["STORE_URI"], str(spill)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert artifacts.media_keys(store, run.id)["images"]["x"] == [0, 1, 2]
    assert _read(store, run.id, "late.txt") == b"kept on disk"
    assert not any(media_dir.iterdir())  # the spilled copies are deleted once stored
    assert get_run(store, run.id).status == "finished"  # the final status was in the file too
