"""Profiles for the tests of the profile API, CLI and run page: a real ``torch.profiler``
trace of a tiny CPU training loop and storing one as a run's client does (the trace
artifact, then the ``started`` and ``stored`` reports), for checks against a known trace;
and :func:`training_run`, a real run training in a background thread whose own client
takes the profiles asked of it."""

from __future__ import annotations

import contextlib
import gzip
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from tracker.rules.profiles import trace_path
from tracker.store import Store, profiles
from tracker.store.artifacts import put_artifact

__all__ = ["KINDS", "Training", "loop_trace", "store_trace", "training_run"]


def loop_trace(*, item: bool, steps: int = 8, width: int = 128) -> bytes:
    """The gzip'd Chrome trace of ``steps`` steps of a small regression on one intra-op
    thread; ``item``: each step calls ``loss.item()`` (the hidden host sync)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "Profiler won't be using warmup")  # none is wanted
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(),
                                    torch.nn.Linear(width, 1))  # fmt: skip
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(steps)]
        running = 0.0
        with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                     schedule=schedule(wait=0, warmup=0, active=steps)) as prof:  # fmt: skip
            for i, (x, y) in enumerate(data):
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if item:
                    running += loss.item()
                if i + 1 < steps:  # the last step runs to the profiler's exit
                    prof.step()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            return gzip.compress(path.read_bytes())
    finally:
        torch.set_num_threads(threads)


def store_trace(store: Store, run_id: int, profile_id: int, trace: bytes, *,
                first_step: int = 100, steps: int = 8, rank: int = 0) -> Any:  # fmt: skip
    """What the run's client does once it has profiled: the trace stored at its path, then
    ``started`` and ``stored`` reported. Returns the profile."""
    last = first_step + steps - 1
    profiles.report(store, run_id, profile_id,
                    {"event": "started", "rank": rank, "first_step": first_step})  # fmt: skip
    put_artifact(store, run_id, trace_path(profile_id, rank), trace)
    return profiles.report(store, run_id, profile_id, {
        "event": "stored", "rank": rank, "first_step": first_step, "last_step": last,
        "bytes": len(trace),
    })  # fmt: skip


KINDS = ("dataloader", "item", "healthy")
# Per step: "dataloader" reads 8 samples of 3 ms each (24 ms waiting in the DataLoader,
# a share near 0.9 of a step whose compute is well under 1 ms); "item" and "healthy" take
# in-memory batches (no DataLoader: no wait at all), and rest 2 ms after each log() so the
# loop does not hold a core of a loaded machine (idle time, which is never a cause).
SAMPLE_S = 0.003
REST_S = 0.002


class _SlowDataset:
    """Every sample costs ``SAMPLE_S`` to read (a slow disk, a decode)."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        time.sleep(SAMPLE_S)
        return self.x[i], self.y[i]


class Training:
    """A real run training in its own thread (what :func:`training_run` yields): ``id`` is
    the run's id; ``kind`` may be changed while it trains (the next batch follows it);
    ``hold()`` parks the loop between two ``log()`` calls (a step that takes long), so a
    profile asked meanwhile stays ``requested``; ``go()`` lets it train again."""

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        self.kind = kind
        self.id = -1
        self.step = -1  # the last step logged
        self.error: BaseException | None = None
        self._ready, self._stop = threading.Event(), threading.Event()
        self._go, self._parked = threading.Event(), threading.Event()
        self._go.set()

    def hold(self, timeout: float = 30.0) -> None:
        """Park the loop; returns once no ``log()`` is under way or will come before ``go()``."""
        self._go.clear()
        if not self._parked.wait(timeout):
            raise AssertionError(f"the training loop did not park in {timeout:.0f} s")

    def go(self) -> None:
        self._parked.clear()
        self._go.set()

    def _train(self, uri: str, project: str, name: str | None, heartbeat_interval: float) -> None:
        import torch

        import tracker

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the shares stay put on a loaded machine
        run = None
        try:
            run = tracker.init(project=project, name=name, uri=uri,
                               heartbeat_interval=heartbeat_interval,
                               flush_interval=0.05, system_interval=None, capture_console=False,
                               quiet=True)  # fmt: skip
            self.id = run.id
            self._ready.set()
            self._loop(run, torch)
            run.finish()
        except BaseException as exc:
            self.error = exc
            if run is not None and not run.finished:
                run.finish("failed", error=repr(exc))
        finally:
            self._ready.set()
            torch.set_num_threads(threads)

    def _loop(self, run: Any, torch: Any) -> None:
        from torch.utils.data import DataLoader

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 1))  # fmt: skip
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(512, 32), torch.randn(512, 1)
        fast = [(x[i : i + 64], y[i : i + 64]) for i in range(0, 512, 64)]
        slow: DataLoader[Any] = DataLoader(
            cast(Any, _SlowDataset(x, y)), batch_size=8, num_workers=0
        )
        batches: Iterator[tuple[Any, Any]] = iter(())
        running, i = 0.0, 0
        while not self._stop.is_set():
            if not self._go.is_set():
                self._parked.set()
                self._go.wait()
                continue
            kind = self.kind
            if kind == "dataloader":
                batch = next(batches, None)
                if batch is None:  # an epoch ends
                    batches = iter(slow)
                    continue
                xb, yb = batch
            else:
                xb, yb = fast[i % len(fast)]
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if kind == "item":
                running += loss.item()  # the hidden host sync
            # The loss tensor itself: log() turns a CPU tensor into a float on this thread (an
            # aten::item inside the tracker), which the summary must not blame on the loop.
            run.log({"loss": loss, "samples": float((i + 1) * len(xb))}, step=i)
            self.step = i
            i += 1
            if kind != "dataloader":
                time.sleep(REST_S)


@contextlib.contextmanager
def training_run(store_url: str, *, kind: str = "healthy", project: str = "profiled",
                 name: str | None = None, command: Sequence[str] | None = None,
                 heartbeat_interval: float = 0.2) -> Iterator[Training]:  # fmt: skip
    """A real ``tracker.init`` run on ``store_url`` training a tiny CPU regression of
    ``kind`` (``KINDS``) in a background thread, one ``log()`` per step, until the block
    ends; then the run is finished (in its own thread: a profile under way is stored
    first). Its client profiles the steps a request asks for, as any run's does.
    ``command``: the command line the run records (``sys.executable`` and ``sys.argv`` are
    set to it while the run is created, then restored), so a page that shows the run shows
    no path of the machine the tests run on. Raises the loop's error, if it had one, at
    the end of the block (or at the start: the run could not be created)."""
    training = Training(kind)
    thread = threading.Thread(target=training._train, name="training-run", daemon=True,
                              args=(store_url, project, name, heartbeat_interval))  # fmt: skip
    saved = sys.executable, sys.argv
    if command is not None:
        sys.executable, sys.argv = command[0], list(command[1:])
    try:
        thread.start()
        started = training._ready.wait(60)
    finally:
        sys.executable, sys.argv = saved
    if not started or training.id < 0:
        raise AssertionError(f"the training run did not start: {training.error!r}")
    try:
        yield training
    finally:
        training._stop.set()
        training.go()
        thread.join(60)
        if thread.is_alive():
            raise AssertionError("the training run did not finish in 60 s")
    if training.error is not None:
        raise AssertionError("the training loop failed") from training.error
