"""The media encoder thread (tracker.client.encoder): images and histograms are encoded in
a thread of their own in the idle scheduling class, ahead of the writer, which stores them
in the order logged into a real store; the loop never waits for the encoding."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import tracker
from tracker.client.encoder import AHEAD, ENCODER_NICE, EncoderStopped, torch_op
from tracker.client.media import Artifact, Pending
from tracker.client.run import Run
from tracker.errors import InvalidInput, UploadError
from tracker.store import Store, artifacts

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's"
)


@pytest.fixture
def run(store_url: str, artifact_root: Path) -> Any:
    r = tracker.init(project="encoder", uri=store_url, system_interval=None)
    yield r
    if not r.finished:
        r.finish()


def _nice(native_id: int | None = None) -> int:
    return os.getpriority(os.PRIO_PROCESS, native_id or threading.get_native_id())


def _recording(
    seen: list[tuple[str, int, int]], path: str, delay: float = 0.0, cpu_s: float = 0.0
) -> Pending:
    """An entry whose build records the thread (name, nice value, scheduling policy) that
    built it, after ``cpu_s`` seconds of the thread's own CPU time and a ``delay``."""

    def build() -> list[Artifact]:
        start = time.thread_time()
        while time.thread_time() - start < cpu_s:
            pass
        seen.append((threading.current_thread().name, _nice(), os.sched_getscheduler(0)))
        time.sleep(delay)
        return [Artifact(path, path.encode(), "text/plain")]

    return Pending(f"text {path!r}", build, len(path))


def _wait_for(seen: list[Any], count: int = 1) -> None:
    """Until ``count`` entries are built (a flush would let the writer build them too)."""
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(seen) >= count, seen


def _encoders() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tracker-encoder"]


@linux_only
def test_media_is_built_by_the_encoder_thread_in_the_idle_class(run: Run) -> None:
    seen: list[tuple[str, int, int]] = []
    base = _nice()
    run._writer.put_upload(_recording(seen, "notes/a.txt"))
    run.log_image("samples", torch.rand(3, 8, 8), step=0)
    _wait_for(seen)
    run.flush()
    assert seen == [("tracker-encoder", base, os.SCHED_IDLE)]
    # the writer (points, heartbeats) keeps the loop's priority
    writer = run._writer._thread.native_id
    assert _nice(writer) == base and os.sched_getscheduler(writer) == os.SCHED_OTHER
    store = run.sink.store  # type: ignore[attr-defined]
    assert artifacts.media_keys(store, run.id)["images"]["samples"] == [0]
    with artifacts.open_artifact(store, run.id, "notes/a.txt") as fh:
        assert fh.read() == b"notes/a.txt"


@linux_only
def test_the_nice_value_comes_from_the_environment(
    store_url: str, artifact_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _nice()
    for value, nice in (("0", base), (str(ENCODER_NICE), max(base, ENCODER_NICE))):
        monkeypatch.setenv("TRACKER_ENCODER_NICE", value)
        run = tracker.init(project="encoder", uri=store_url, system_interval=None)
        seen: list[tuple[str, int, int]] = []
        run._writer.put_upload(_recording(seen, "a.txt"))
        _wait_for(seen)
        run.finish()
        assert seen == [("tracker-encoder", nice, os.SCHED_OTHER)], value


@contextlib.contextmanager
def _starved_encoder(run: Run) -> Iterator[None]:
    """The run's encoder thread pinned to one CPU beside a process spinning there: in the
    idle class it gets almost no CPU (entries costing 20 ms of CPU take seconds apiece)."""
    seen: list[Any] = []
    run._writer.put_upload(_recording(seen, "warm.txt"))  # starts the encoder
    _wait_for(seen)
    encoder = run._writer.uploads._encoder
    assert encoder is not None and encoder.thread.native_id is not None
    cpu = min(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(busy.pid, {cpu})
        os.sched_setaffinity(encoder.thread.native_id, {cpu})
        yield
    finally:
        busy.kill()
        busy.wait()


def _costly(seen: list[tuple[str, int, int]], path: str, nbytes: int = 0) -> Pending:
    """An entry whose build costs 20 ms of CPU; ``nbytes`` as held against the budget."""
    entry = _recording(seen, path, cpu_s=0.02)
    return Pending(entry.what, entry.build, nbytes or len(path))


def _assert_stored(run: Run, paths: list[str]) -> None:
    store = run.sink.store  # type: ignore[attr-defined]
    for path in paths:
        with artifacts.open_artifact(store, run.id, path) as fh:
            assert fh.read() == path.encode()


@linux_only
def test_flush_does_not_wait_for_an_encoder_a_busy_machine_starves(run: Run) -> None:
    """While flush() waits, the writer builds the entries at the normal priority (before,
    these 6 took 44 s to flush)."""
    seen: list[tuple[str, int, int]] = []
    paths = [f"costly/{i}.txt" for i in range(6)]
    with _starved_encoder(run):
        for path in paths:
            run._writer.put_upload(_costly(seen, path))
        run.flush()
        by_writer = [name for name, _, _ in seen if name == "tracker-writer"]
        assert len(by_writer) >= 4, seen
    _assert_stored(run, paths)


@linux_only
def test_a_call_over_the_budget_does_not_wait_for_an_encoder_a_busy_machine_starves(
    store_url: str, artifact_root: Path
) -> None:
    """A call that waits for room makes the writer build entries too, so room comes in
    milliseconds: nothing is built in the calling thread and spilled to disk (before, each
    such call waited its 2 s and then encoded the entry itself)."""
    run = tracker.init(project="encoder", uri=store_url, system_interval=None, max_media_mb=1)
    seen: list[tuple[str, int, int]] = []
    paths = [f"big/{i}.txt" for i in range(8)]
    # a busy machine (a parallel test run) can take the writer over 2 s to store an entry;
    # a starved encoder takes minutes, so 30 s still tells the two apart
    run._writer.uploads.wait_s = 30.0
    try:
        with _starved_encoder(run):
            for path in paths:  # two fit in the budget at a time
                run._writer.put_upload(_costly(seen, path, nbytes=400_000))
            uploads = run._writer.uploads
            assert uploads.spilled_on_put == 0, seen
            assert [n for n, _, _ in seen].count("MainThread") == 0, seen
            run.flush()
    finally:
        run.finish()
    _assert_stored(run, paths)


@pytest.mark.parametrize("value", ["abc", "-1", "20", "1.5"])
def test_a_bad_nice_value_fails_init_naming_the_variable(
    store_url: str, artifact_root: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("TRACKER_ENCODER_NICE", value)
    with pytest.raises(InvalidInput, match="TRACKER_ENCODER_NICE") as info:
        tracker.init(project="encoder", uri=store_url, system_interval=None)
    assert "0" in str(info.value) and "19" in str(info.value)


def test_entries_built_ahead_are_stored_in_the_order_logged(run: Run) -> None:
    stored: list[str] = []
    uploads = run._writer.uploads
    put = uploads._put

    def recording_put(art: Artifact) -> None:
        put(art)  # the real store
        stored.append(art.path)

    uploads._put = recording_put  # type: ignore[method-assign]
    seen: list[tuple[str, int]] = []
    rng = random.Random(7)
    paths = []
    for i in range(3 * AHEAD + 5):
        path = f"order/{i:03d}.txt"
        paths.append(path)
        run._writer.put_upload(_recording(seen, path, delay=rng.choice([0.0, 0.0, 0.02])))
        if i % 4 == 0:
            run.log_image("img", np.full((4, 4), i, dtype=np.uint8), step=i)
    run.flush()
    assert [p for p in stored if p.startswith("order/")] == paths
    assert artifacts.media_keys(run.sink.store, run.id)["images"]["img"] == list(  # type: ignore[attr-defined]
        range(0, 3 * AHEAD + 5, 4)
    )


def test_the_loop_does_not_wait_for_a_slow_encoder(run: Run) -> None:
    gate = threading.Event()

    def blocked() -> list[Artifact]:
        gate.wait(30)
        return [Artifact("slow.txt", b"slow", "text/plain")]

    run._writer.put_upload(Pending("text 'slow.txt'", blocked, 4))
    for step in range(50):  # the encoder is stuck on the first entry meanwhile
        run.log_image("x", torch.rand(3, 8, 8), step=step)
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    store = run.sink.store  # type: ignore[attr-defined]
    assert "x" not in artifacts.media_keys(store, run.id).get("images", {})
    gate.set()
    run.flush()
    assert artifacts.media_keys(store, run.id)["images"]["x"] == list(range(50))


def test_a_build_failure_in_the_encoder_is_raised_by_the_next_call(run: Run) -> None:
    def broken() -> list[Artifact]:
        raise ValueError("cannot encode this")

    run._writer.put_upload(Pending("image 'bad' at step 3", broken, 1))
    run._writer.put_upload(_recording([], "good.txt"))
    run._writer.flush()  # the writer's own flush: run.flush() raises the failure too
    with pytest.raises(UploadError, match=r"image 'bad' at step 3: ValueError: cannot encode"):
        run.log_text("next.txt", "x")
    run.log_text("after.txt", "the run goes on")
    run.flush()
    store = run.sink.store  # type: ignore[attr-defined]
    for path, data in [("good.txt", b"good.txt"), ("after.txt", b"the run goes on")]:
        with artifacts.open_artifact(store, run.id, path) as fh:
            assert fh.read() == data


def test_the_encoder_thread_ends_with_the_run(run: Run, store_url: str) -> None:
    # this run's own encoder, not every thread so named: a run another test left behind in
    # this process may start one of its own meanwhile
    uploads = run._writer.uploads
    run.log({"loss": 1.0})
    assert uploads._encoder is None  # no media yet: no encoder
    run.log_histogram("w", torch.randn(1000), step=0)
    encoder = uploads._encoder
    assert encoder is not None and encoder.thread.name == "tracker-encoder"
    run.finish()
    encoder.thread.join(5)
    assert not encoder.thread.is_alive()
    store = Store(store_url)
    try:
        assert artifacts.media_keys(store, run.id)["histograms"]["w"] == [0]
    finally:
        store.close()


def _blocked_encoder(run: Run) -> threading.Event:
    """Hold the encoder on an entry of its own until the returned event is set."""
    gate = threading.Event()

    def wait() -> list[Artifact]:
        gate.wait(30)
        return [Artifact("gate.txt", b"gate", "text/plain")]

    run._writer.put_upload(Pending("text 'gate.txt'", wait, 4))
    return gate


def _pixels(run: Run, key: str, step: int) -> np.ndarray:
    from PIL import Image

    store = run.sink.store  # type: ignore[attr-defined]
    with artifacts.open_artifact(store, run.id, f"media/images/{key}/{step:09d}.png") as fh:
        return np.asarray(Image.open(fh))


def test_a_parameter_is_stored_as_it_was_when_logged(run: Run) -> None:
    layer = torch.nn.Linear(8, 8, bias=False)
    with torch.no_grad():
        layer.weight.fill_(0.25)
    gate = _blocked_encoder(run)
    run.log_image("weights", layer.weight, step=0)  # HW, a leaf that requires grad
    run.log_image("slice", layer.weight[:4, :4], step=0)  # a view of it
    with torch.no_grad():  # the optimizer's in-place step, before the image is encoded
        layer.weight.fill_(1.0)
    gate.set()
    run.flush()
    assert (_pixels(run, "weights", 0) == round(0.25 * 255)).all()
    assert (_pixels(run, "slice", 0) == round(0.25 * 255)).all()


def test_a_tensor_changed_in_place_before_encoding_fails_with_a_hint(run: Run) -> None:
    image = torch.full((3, 8, 8), 0.5)
    gate = _blocked_encoder(run)
    run.log_image("changed", image, step=4)
    run.log_image("kept", torch.full((3, 8, 8), 0.5), step=4)
    image.mul_(2.0)  # in place, while the entry waits for the encoder
    gate.set()
    with pytest.raises(UploadError) as info:
        run.flush()
    message = str(info.value)
    assert "image 'changed' at step 4" in message
    assert "changed in place" in message and "clone()" in message
    store = run.sink.store  # type: ignore[attr-defined]
    images = artifacts.media_keys(store, run.id)["images"]
    assert "changed" not in images  # not stored with what it holds now
    assert images["kept"] == [4]
    assert (_pixels(run, "kept", 4) == round(0.5 * 255)).all()


def test_an_inference_tensor_is_logged(run: Run) -> None:
    with torch.inference_mode():  # an inference tensor has no version counter
        image = torch.full((8, 8), 1.0)
        run.log_image("inference", image, step=0)
    run.flush()
    assert (_pixels(run, "inference", 0) == 255).all()


EXIT_SCRIPT = str(Path(__file__).parent / "scripts" / "encoder_at_exit.py")


@linux_only
@pytest.mark.slow
@pytest.mark.parametrize(
    ("dtype", "count"),
    [
        ("float64", 40_000_000),  # converted by numpy: the exit does not wait for it
        ("bfloat16", 2_000_000),  # no numpy type: a torch op, which the exit waits for
    ],
)
def test_a_process_exits_cleanly_while_its_encoder_is_still_building(
    store_url: str, artifact_root: Path, dtype: str, count: int
) -> None:
    """The interpreter used to abort ('terminate called without an active exception',
    exit -6) when the encoder thread was inside a torch op at exit."""
    _, keys = _exit_script(EXIT_SCRIPT, store_url, "histograms", dtype, str(count))
    assert keys == {"warm": [0], "weights": [0]}


def _exit_script(
    script: str, store_url: str, kind: str, *args: str
) -> tuple[str, dict[str, list[int]]]:
    """Run ``script URL ARGS...`` (it prints ``RUN <id>`` first, ``FINISHED`` last) to a
    clean exit; its output and the run's media keys of ``kind``."""
    proc = subprocess.run(
        [sys.executable, script, store_url, *args], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FINISHED" in proc.stdout and "terminate called" not in proc.stderr
    run_id = int(proc.stdout.split()[1])
    store = Store(store_url)
    try:
        return proc.stdout, artifacts.media_keys(store, run_id)[kind]
    finally:
        store.close()


FREED_SCRIPT = str(Path(__file__).parent / "scripts" / "tensor_freed_at_exit.py")


@pytest.mark.slow
def test_a_process_exits_cleanly_while_its_encoder_frees_a_logged_tensor(
    store_url: str, artifact_root: Path
) -> None:
    """Torch releases the GIL while it frees a tensor: the encoder thread used to let go of
    an entry the writer had stored with no gate, and the process aborted when the
    interpreter's exit came during that free (7 of 7 runs before the fix)."""
    output, keys = _exit_script(FREED_SCRIPT, store_url, "images")
    assert "FREED IN " in output, output
    assert keys == {"warm": [0], "gray": [0, 1]}


def test_the_encoder_thread_frees_logged_tensors_only_inside_its_gate(run: Run) -> None:
    # Whichever thread drops the last reference frees the tensor (torch releases the GIL
    # then): the encoder thread may only do it inside its gate, which the exit waits for.
    freed: list[tuple[str, bool]] = []
    uploads = run._writer.uploads

    def on_free() -> None:
        encoder = uploads._encoder
        inside = encoder is not None and encoder.gate._inside
        freed.append((threading.current_thread().name, inside))

    rng = random.Random(7)
    for step in range(300):
        image = torch.full((16, 16), step % 256, dtype=torch.uint8)
        weakref.finalize(image, on_free)
        run.log_image("shade", image, step=step)
        del image
        if rng.random() < 0.1:
            run.flush()
        elif rng.random() < 0.3:
            time.sleep(rng.choice([0.0005, 0.002, 0.02]))
    run.finish()
    by_encoder = [inside for name, inside in freed if name == "tracker-encoder"]
    assert all(by_encoder), f"{by_encoder.count(False)} freed outside the gate"
    assert len(freed) >= 290, len(freed)  # the others: held by the encoder at its stop


def test_the_encoder_thread_calls_torch_only_inside_its_gate(run: Run, store_url: str) -> None:
    # Torch releases the GIL in most tensor methods (even is_neg()) and when it frees a
    # tensor; a daemon thread that takes the GIL back while the interpreter exits aborts
    # the process ("terminate called without an active exception"). The encoder read CPU
    # tensors with tensor.numpy() outside its gate (its alias tensor freed with the array),
    # then with is_neg() outside it: the README example aborted at exit about 1 run in 700,
    # then 1 in 100 (the core dumps' stacks end in THPVariable_is_neg). Every call of a
    # tensor's method in the encoder thread is recorded with whether the gate was held.
    calls: list[tuple[str, bool]] = []
    uploads = run._writer.uploads

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "c_call" or not isinstance(getattr(arg, "__self__", None), torch.Tensor):
            return
        if threading.current_thread().name == "tracker-encoder":
            encoder = uploads._encoder
            calls.append((arg.__name__, bool(encoder and encoder.gate._inside)))

    threading.setprofile(profile)  # threads started from now on: the run's encoder
    try:
        _log_every_tensor_kind(run, store_url)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    outside = [name for name, inside in calls if not inside]
    assert calls, "the encoder called no tensor method: nothing was checked"
    assert not outside, f"called outside the gate: {sorted(set(outside))}"


def _log_every_tensor_kind(run: Run, store_url: str) -> None:
    grid = torch.arange(4 * 3 * 8 * 8, dtype=torch.float32).reshape(4, 3, 8, 8) / 768
    shown = {
        "float32": torch.rand(8, 8, 3),
        "uint8": torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8),
        "float64-permuted": torch.rand(3, 8, 8, dtype=torch.float64).permute(1, 2, 0),
        "grid": grid,
        "bfloat16": torch.rand(8, 8, dtype=torch.bfloat16),  # no numpy type: torch converts
    }
    for step in range(3):
        for key, image in shown.items():
            run.log_image(f"img/{key}", image, step=step)
        run.log_histogram("weights", torch.nn.Linear(8, 8).weight, step=step)
        run.log_histogram("counts", torch.arange(100, dtype=torch.int32)[::3], step=step)
        time.sleep(0.05)  # the encoder builds these, not the writer's flush
    run.finish()
    store = Store(store_url)
    try:
        stored = artifacts.media_keys(store, run.id)
    finally:
        store.close()
    assert stored["images"] == {f"img/{k}": [0, 1, 2] for k in shown}, stored
    assert stored["histograms"] == {"weights": [0, 1, 2], "counts": [0, 1, 2]}, stored


@linux_only
def test_closing_waits_for_a_torch_op_of_the_encoder_and_bars_new_ones(run: Run) -> None:
    entered, release = threading.Event(), threading.Event()
    built_in: list[str] = []

    def build(path: str) -> list[Artifact]:
        with torch_op():
            if threading.current_thread().name == "tracker-encoder":
                entered.set()
                release.wait(30)
            built_in.append(threading.current_thread().name)
        return [Artifact(path, path.encode(), "text/plain")]

    run._writer.put_upload(Pending("text 'a.txt'", lambda: build("a.txt"), 5))
    run._writer.put_upload(Pending("text 'b.txt'", lambda: build("b.txt"), 5))
    assert entered.wait(30)
    uploads = run._writer.uploads
    finishing = threading.Thread(target=run.finish)
    finishing.start()
    _wait_for(built_in, 2)  # the writer built both entries itself (HANDOFF_S)...
    deadline = time.monotonic() + 30
    while not uploads.closed and time.monotonic() < deadline:
        time.sleep(0.005)
    assert uploads.closed  # ...stored them and closed the uploads...
    finishing.join(0.5)
    assert finishing.is_alive()  # ...and the exit still waits for the encoder's torch op
    assert built_in == ["tracker-writer", "tracker-writer"]
    release.set()
    finishing.join(30)
    assert not finishing.is_alive()
    for thread in _encoders():
        thread.join(30)
    assert built_in == ["tracker-writer", "tracker-writer", "tracker-encoder"]
    _assert_stored(run, ["a.txt", "b.txt"])
    assert uploads._encoder is not None
    with pytest.raises(EncoderStopped), uploads._encoder.gate.inside():
        pass
