"""The tracker never stops training: each failure inside the tracker, injected for real into a
training loop run as a process (``scripts/train_through_failures.py``), lets the loop finish
its steps and exit 0, says so in one line on stderr per kind of failure, records a run event
and keeps the data (``tracker db replay`` stores it); ``TRACKER_STRICT=1`` raises instead,
as the tracker always did. See :mod:`tracker.client.failsafe`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tests.support.replay import named_spill_files
from tracker.cli import main
from tracker.errors import InvalidInput, StoreUnavailable
from tracker.store import Store, artifacts
from tracker.store.checkpoints import list_checkpoints
from tracker.store.events import list_events
from tracker.store.metrics import count_points
from tracker.store.runs import get_run

SCRIPTS = Path(__file__).parent / "scripts"
STEPS, MEDIA_STEPS = 30, [0, 5, 10, 15, 20, 25]
POINTS = 2 * STEPS + 200 * (STEPS - 11)  # loss and step_sq each step, 200 probes after step 10
WARNING = re.compile(r"^tracker: run \d+: (.+?) failed: .*Training goes on", re.M)
EVENT_KIND = "tracker_failure"  # tracker.client.failsafe.EVENT_KIND


def _train(
    failure: str, tmp_path: Path, *, strict: bool, uri: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRACKER_STRICT": "1" if strict else "0",
        "TRACKER_URI": uri or f"sqlite:///{tmp_path / 'store.db'}",
        "TRACKER_ARTIFACT_ROOT": str(tmp_path / "artifacts"),
    }
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "train_through_failures.py"), failure, str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def _trained_through(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The loop finished every step and exited 0; returns what failed, one per warning line
    (each kind of failure said once)."""
    assert done.returncode == 0, done.stderr
    assert f"DONE {STEPS}" in done.stdout, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    failed = WARNING.findall(done.stderr)
    assert failed, done.stderr
    assert len(failed) == len(set(failed)), done.stderr  # each said once, not per call
    return failed


def _replay(tmp_path: Path, stderr: str) -> None:
    files = named_spill_files(stderr)
    assert files and all(Path(f).exists() for f in files), stderr
    url = f"sqlite:///{tmp_path / 'store.db'}"
    result = CliRunner().invoke(main, ["db", "replay", "--uri", url, *files])
    assert result.exit_code == 0, result.output
    assert not list((tmp_path / "spill").glob("*.jsonl")), stderr  # every file was named


def _events(store: Store, run_id: int) -> list[str]:
    return [e.message for e in list_events(store, run_id) if e.kind == EVENT_KIND]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "artifacts").mkdir()
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


def test_an_artifact_root_that_breaks_mid_run(tmp_path: Path, store: Store) -> None:
    done = _train("artifact_root", tmp_path, strict=False)
    assert _trained_through(done) == ["an upload"]
    assert "NotADirectoryError" in done.stderr
    root = tmp_path / "artifacts"  # the cause fixed: the uploads kept are stored
    root.unlink()
    root.mkdir()
    _replay(tmp_path, done.stderr)
    assert get_run(store, 1).status == "finished"
    keys = artifacts.media_keys(store, 1)
    assert keys["images"]["samples/noise"] == MEDIA_STEPS
    assert keys["histograms"]["weights"] == MEDIA_STEPS
    assert count_points(store, 1) == POINTS
    assert any("an upload failed" in m for m in _events(store, 1))


def test_a_store_locked_past_its_retries(tmp_path: Path, store: Store) -> None:
    start = time.monotonic()
    done = _train("store_locked", tmp_path, strict=False)
    failed = _trained_through(done)
    assert "storing the run's data" in failed and "flush(timeout=None)" in failed
    assert "database is locked" in done.stderr
    assert time.monotonic() - start < 200  # the exit does not wait for the store
    _replay(tmp_path, done.stderr)
    run = get_run(store, 1)
    assert run.status == "finished"
    assert count_points(store, 1) == POINTS
    assert sorted(c.step for c in list_checkpoints(store, 1)) == [20, 29]
    assert artifacts.media_keys(store, 1)["images"]["samples/noise"] == MEDIA_STEPS
    assert _events(store, 1)  # spilled with the points, stored by the replay


def test_a_full_disk(tmp_path: Path, store: Store) -> None:
    done = _train("disk_full", tmp_path, strict=False)
    failed = _trained_through(done)
    assert "the tracker's writer thread" in failed
    assert any(f.startswith("saving checkpoint") for f in failed)  # 4 MiB: no room
    assert not list((tmp_path / "checkpoints").glob("**/step-20.pt"))
    assert not list((tmp_path / "checkpoints").glob("**/*.tmp-*"))  # nothing half-written
    _replay(tmp_path, done.stderr)
    assert get_run(store, 1).status == "finished"
    assert count_points(store, 1) == POINTS
    assert [c.step for c in list_checkpoints(store, 1)] == [29]
    assert any("writer thread failed" in m for m in _events(store, 1))


def test_an_image_the_encoder_cannot_encode(tmp_path: Path, store: Store) -> None:
    done = _train("encoder", tmp_path, strict=False)
    assert _trained_through(done) == ["an upload"]
    assert "samples/broken" in done.stderr and "not stored" in done.stderr
    assert get_run(store, 1).status == "finished"
    keys = artifacts.media_keys(store, 1)
    assert keys["images"]["samples/noise"] == MEDIA_STEPS
    assert "samples/broken" not in keys["images"]
    assert count_points(store, 1) == POINTS
    assert any("samples/broken" in m for m in _events(store, 1))


def test_the_doctor_failing_at_finish(tmp_path: Path, store: Store) -> None:
    done = _train("doctor", tmp_path, strict=False)
    assert _trained_through(done) == ["the doctor (the run's health detectors)"]
    assert "tracker doctor 1" in done.stderr
    assert get_run(store, 1).status == "finished"
    assert count_points(store, 1) == POINTS
    assert any(m.startswith("the doctor") for m in _events(store, 1))


@pytest.fixture
def garbage_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    port_file = tmp_path / "port"
    server = subprocess.Popen([sys.executable, str(SCRIPTS / "garbage_server.py"), str(port_file)])
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert time.monotonic() < deadline, "the garbage server did not start in 30 s"
            assert server.poll() is None, "the garbage server exited"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        server.kill()
        server.wait()


def test_an_http_sink_answering_garbage(tmp_path: Path, garbage_server: str) -> None:
    done = _train("http", tmp_path, strict=False, uri=garbage_server)
    failed = _trained_through(done)
    assert "the tracker's writer thread" in failed and "not the tracker's JSON" in done.stderr
    files = named_spill_files(done.stderr)
    points, statuses, events = 0, [], []
    for name in files:  # every point is in the spill file, with the status and the events
        for line in Path(name).read_text().splitlines():
            doc = json.loads(line)
            points += sum(len(r[2]) for r in doc.get("records", []))
            statuses += [doc["final_status"]["status"]] if "final_status" in doc else []
            events += [doc["event"]["message"]] if "event" in doc else []
    assert (points, statuses) == (POINTS, ["finished"]), done.stderr
    assert any("writer thread failed" in e for e in events)


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        ("artifact_root", ("UploadError",)),
        # a full disk fails whichever write comes first: the store's, an upload's (its row
        # is in the store) or the checkpoint's
        ("disk_full", ("CheckpointError", "UploadError", "WriterError")),
        ("encoder", ("UploadError",)),
        ("store_locked", ("StoreUnavailable",)),
    ],
)
def test_strict_raises_as_before(
    tmp_path: Path, store: Store, failure: str, raised: tuple[str, ...]
) -> None:
    done = _train(failure, tmp_path, strict=True)
    assert done.returncode == 1, done.stderr
    assert f"DONE {STEPS}" not in done.stdout
    assert any(f"tracker.errors.{name}:" in done.stderr for name in raised), done.stderr
    assert not WARNING.search(done.stderr)


def test_strict_raises_for_an_http_sink_answering_garbage(
    tmp_path: Path, garbage_server: str
) -> None:
    done = _train("http", tmp_path, strict=True, uri=garbage_server)
    assert done.returncode == 1, done.stderr
    assert f"DONE {STEPS}" not in done.stdout
    assert "not the tracker's JSON" in done.stderr and not WARNING.search(done.stderr)


def test_strict_logs_a_doctor_failure_as_before(tmp_path: Path, store: Store) -> None:
    done = _train("doctor", tmp_path, strict=True)  # the doctor never raised: it logs
    assert done.returncode == 0 and f"DONE {STEPS}" in done.stdout, done.stderr
    assert "the doctor failed" in done.stderr and not WARNING.search(done.stderr)


# ----------------------------------------------------------------- the rules, without I/O


def test_each_kind_is_said_once_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from tracker.client.failsafe import Failsafe

    failsafe = Failsafe(7, strict=False)
    for n in range(3):
        failsafe.report("upload", "an upload", ValueError(f"bad\nimage {n}"), "not stored")
    failsafe.report("writer", "the writer", "x" * 5000, "kept in f")
    ours = StoreUnavailable("y" * 1000 + ": store them with `tracker db replay f`")
    failsafe.report("store", "the store", ours, "kept in f")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    assert "`tracker db replay f`" in lines[2]  # the tracker's own message is never cut
    assert lines[0].startswith("tracker: run 7: an upload failed: ValueError: bad image 0;")
    assert len(lines[1]) < 700  # a driver's long message is cut
    assert failsafe.counts == {"upload": 3, "writer": 1, "store": 1}
    kinds = [e["data"]["failure"] for e in failsafe.take_events()]
    assert kinds == ["upload", "writer", "store"]


@given(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12))
def test_tracker_strict_is_true_false_or_refused(raw: str) -> None:
    from tracker.client.failsafe import strict_mode

    before = os.environ.get("TRACKER_STRICT")
    os.environ["TRACKER_STRICT"] = raw
    try:
        value = strict_mode()
    except InvalidInput as exc:
        assert exc.field == "TRACKER_STRICT"
        assert raw.strip().lower() not in ("", "0", "1", "true", "false", "yes", "no", "on", "off")
    else:
        assert value is (raw.strip().lower() in ("1", "true", "yes", "on"))
    finally:
        if before is None:
            del os.environ["TRACKER_STRICT"]
        else:
            os.environ["TRACKER_STRICT"] = before


def test_an_upload_the_store_refuses_is_reported_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tracker
    from tracker.client.media import Artifact, Pending

    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run = tracker.init(
        project="refused", uri=url, system_interval=None, capture_console=False,
        spill_dir=tmp_path / "spill", strict=False,
    )  # fmt: skip
    refused = Artifact("x.bin", b"x", media_type="not a media type")  # InvalidInput
    run._writer.put_upload(Pending("artifact 'x.bin'", lambda: [refused], 1))
    run.log_text("after.txt", "the run goes on")
    run.flush()  # not strict: no UploadError
    run.log({"loss": 1.0}, step=0)
    run.finish()
    lines = WARNING.findall(capsys.readouterr().err)
    assert lines == ["an upload"]
    assert not list((tmp_path / "spill").glob("*.jsonl"))  # a replay would be refused too
    store = Store(url)
    assert [a.path for a in artifacts.list_artifacts(store, run.id)] == ["after.txt"]
    assert get_run(store, run.id).status == "finished"
    assert len(_events(store, run.id)) == 1
