"""Profile N steps of a running run, when the dashboard or ``tracker profile`` asks.

The request comes with a heartbeat's answer (``{"profile": {"id", "steps", "ranks"}}``,
:mod:`tracker.store.profiles`): :meth:`Profiler.on_control` runs in the writer thread, keeps
the request and arms the run's step hook; nothing else happens until the training thread's
next ``log()``. While no profile is wanted, ``log()`` pays one attribute check (the hook is
None).

Armed, the hook runs in ``log()``: at the first step change (a ``log()`` whose step differs
from the previous one's, auto-incremented steps included) it starts ``torch.profiler``
(CPU, and CUDA once CUDA is initialized; shapes, memory and stacks), calls ``prof.step()``
at each later step change and stops after ``steps`` steps: the trace holds
``ProfilerStep#0`` .. ``#steps-1``, one per span between step changes, and the report's
``first_step``/``last_step`` are the steps of the ``log()`` calls that opened the first and
the last span. Then the hook is disarmed: back to no overhead.

Everything else runs in a thread of the profile's own, never in the training loop: the
reports to the sink (``started``, then ``stored`` or ``failed``), the export of the Chrome
trace, its gzip, the size check against :data:`~tracker.rules.profiles.MAX_TRACE_BYTES`
and the upload as the artifact :func:`~tracker.rules.profiles.trace_path`. The sink's
``StoreUnavailable`` is retried with backoff for ``RETRY_S``.

Who takes a request: rank 0 for ``ranks="0"`` (the rank is ``torch.distributed``'s once it
is initialized, else ``$RANK``, else 0), every rank for ``"all"``. One id is taken once (the
heartbeats repeat a request until its report closes it).

Failure modes: none raises into the training loop. torch not imported by the training
script (the tracker never imports it for this), a profiler that fails to start
(:data:`START_TRIES` times, at consecutive step changes) or to stop, an export or an upload
that fails, a trace over the bound: the profile is reported ``failed`` with a message that
names the reason, and the first failure is said once on stderr
(:class:`~tracker.client.failsafe.Failsafe`, kind ``profile``). ``finish()`` in the middle
of a profile stops the profiler and stores what was taken, waiting at most its ``timeout``.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.client.failsafe import Failsafe
from tracker.client.sinks import Sink
from tracker.errors import StoreUnavailable
from tracker.rules.backoff import backoff_delay
from tracker.rules.profiles import MAX_TRACE_BYTES, trace_path

__all__ = ["RETRY_S", "START_TRIES", "Profiler", "process_rank", "world_size"]

RETRY_S = 60.0  # how long a report or an upload is retried while the store is unavailable
# A profiler that fails to start is tried again at the next step changes, this many times in
# all: torch's Python tracer can fail on a transient state of another thread's frames (an
# internal assert, ``frame_refcount >= 2``, seen once in a test run of ours).
START_TRIES = 3
NO_TORCH = (
    "torch is not imported in this process: a profile runs torch.profiler inside the "
    "training loop, and the tracker does not import torch for it"
)
StepHook = Callable[[int, int], None]


@dataclass(frozen=True)
class _Request:
    id: int
    steps: int
    ranks: str


class _Session:
    """One profile being taken (training thread) and its reporter thread."""

    def __init__(self, request: _Request, profiler: Profiler) -> None:
        self.request = request
        self.prof: Any = None
        self.first = -1
        self.last = -1
        self.taken = 0  # spans opened so far
        self.inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=profiler._report_loop, args=(self,), name="tracker-profile", daemon=True
        )


class Profiler:
    """Takes the profiles a run is asked for. ``arm`` sets the run's step hook (None:
    disarmed); ``on_control`` is the writer's ``on_control``."""

    def __init__(
        self,
        sink: Sink,
        run_id: int,
        failsafe: Failsafe,
        arm: Callable[[StepHook | None], None],
        *,
        max_bytes: int = MAX_TRACE_BYTES,
        retry_s: float = RETRY_S,
    ) -> None:
        self.sink = sink
        self.run_id = run_id
        self.failsafe = failsafe
        self.max_bytes = max_bytes
        self.retry_s = retry_s
        self._arm = arm
        self._pending: _Request | None = None  # set by the writer thread
        self._seen: set[int] = set()  # ids taken or not ours
        self._start_tries: dict[int, int] = {}  # failed starts by id
        self._session: _Session | None = None
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------- writer thread

    def on_control(self, control: dict[str, Any]) -> None:
        """A heartbeat's answer: keep the profile it asks for and arm the hook. Never raises."""
        try:
            wanted = control.get("profile")
            if not isinstance(wanted, dict):
                return
            request = _Request(int(wanted["id"]), int(wanted["steps"]), str(wanted["ranks"]))
            if request.id in self._seen:
                return
            if request.ranks != "all" and process_rank() != 0:
                self._seen.add(request.id)  # rank 0's to take
                return
            self._pending = request
            self._arm(self._on_step)  # again on each repeat: a disarm that raced is undone
        except Exception as exc:
            self._warn("reading the profile request", exc)

    # ----------------------------------------------------------- training thread

    def _on_step(self, step: int, next_step: int) -> None:
        """``log()``'s hook while armed: ``next_step`` is the run's step before this call
        (the previous call's step + 1). Never raises."""
        if step == next_step - 1:
            return  # the same step again: not a step change
        try:
            session = self._session
            if session is None:
                self._begin(step)
            elif session.taken < session.request.steps:
                session.prof.step()
                session.taken += 1
                session.last = step
            else:
                self._end(session)
        except Exception as exc:
            self._abort(exc)

    def _begin(self, step: int) -> None:
        request, self._pending = self._pending, None
        if request is None or request.id in self._seen:
            self._arm(None)
            return
        self._seen.add(request.id)
        session = _Session(request, self)
        if "torch" not in sys.modules:
            self._threads.append(session.thread)
            session.inbox.put(("failed", NO_TORCH, None))
            session.thread.start()
            self._arm(None)
            return
        try:
            session.prof = _new_profiler()
            session.prof.start()
        except Exception as exc:
            tries = self._start_tries[request.id] = self._start_tries.get(request.id, 0) + 1
            if session.prof is not None:
                with contextlib.suppress(Exception):
                    session.prof.stop()
            if tries < START_TRIES:  # again at the next step change (still armed)
                self._seen.discard(request.id)
                self._pending = request
                return
            self._arm(None)
            self._threads.append(session.thread)
            message = (
                f"torch.profiler failed to start ({tries} tries, at consecutive steps): "
                f"{type(exc).__name__}: {exc}"
            )
            session.inbox.put(("failed", message, exc))
            session.thread.start()
            return
        self._threads.append(session.thread)
        session.first = session.last = step
        session.taken = 1
        self._session = session
        session.inbox.put(("started", step))
        session.thread.start()

    def _end(self, session: _Session) -> None:
        self._session = None
        self._arm(None)
        session.prof.stop()  # the events are processed later, by the export
        session.inbox.put(("stop", session.first, session.last))

    def _abort(self, exc: BaseException) -> None:
        session, self._session = self._session, None
        self._arm(None)
        if session is None:
            self._warn("starting a profile", exc)
            return
        with contextlib.suppress(Exception):
            session.prof.stop()
        what = f"profiling steps from {session.first}"
        session.inbox.put(("failed", f"{what} failed: {type(exc).__name__}: {exc}", exc))

    def close(self, timeout: float | None) -> None:
        """The run ends: stop a profile being taken, store what it took, and wait at most
        ``timeout`` seconds for its reports. Never raises."""
        session = self._session
        try:
            if session is not None:
                self._end(session)
        except Exception as exc:
            self._abort(exc)
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            if thread.ident is None:
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)

    # ---------------------------------------------------------- reporter thread

    def _report_loop(self, session: _Session) -> None:
        request = session.request
        base = {"rank": process_rank(), "world_size": world_size()}
        while True:
            message = session.inbox.get()
            if message[0] == "started":
                self._report(request, {**base, "event": "started", "first_step": message[1]})
                continue
            if message[0] == "failed":
                self._fail(request, base, message[1], message[2])
                return
            _, first, last = message
            steps = {"first_step": first, "last_step": last}
            try:
                size = self._store_trace(session.prof, request.id, base["rank"])
            except _TooBig as exc:
                self._fail(request, {**base, **steps}, str(exc), None)
            except Exception as exc:
                what = f"storing the trace: {type(exc).__name__}: {exc}"
                self._fail(request, {**base, **steps}, what, exc)
            else:
                self._report(request, {**base, **steps, "event": "stored", "bytes": size})
            return

    def _store_trace(self, prof: Any, profile_id: int, rank: int) -> int:
        """Export, gzip, check and upload the trace; its gzip'd size."""
        folder = Path(tempfile.mkdtemp(prefix="tracker-profile-"))
        try:
            raw = folder / "trace.json"
            packed = folder / "trace.json.gz"
            prof.export_chrome_trace(str(raw))
            with open(raw, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
            raw.unlink()
            size = packed.stat().st_size
            if size > self.max_bytes:
                raise _TooBig(
                    f"the trace is {_mb(size)} gzip'd, over the {_mb(self.max_bytes)} bound: "
                    f"profile fewer steps"
                )
            path = trace_path(profile_id, rank)
            self._retrying(
                lambda: self.sink.put_artifact(
                    self.run_id, path, packed, media_type="application/gzip"
                )
            )
            return size
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _fail(
        self, request: _Request, body: dict[str, Any], message: str, exc: BaseException | None
    ) -> None:
        self._warn(f"profile {request.id}", exc or message)
        self._report(request, {**body, "event": "failed", "message": message})

    def _report(self, request: _Request, body: dict[str, Any]) -> None:
        try:
            self._retrying(lambda: self.sink.report_profile(self.run_id, request.id, body))
        except Exception as exc:
            self._warn(f"reporting profile {request.id} ({body['event']})", exc)

    def _retrying(self, call: Callable[[], None]) -> None:
        """``call()``, retried with backoff while the store is unavailable, up to
        ``retry_s``. Raises what it raised last."""
        deadline = time.monotonic() + self.retry_s
        attempt = 0
        while True:
            try:
                call()
                return
            except StoreUnavailable:
                attempt += 1
                delay = backoff_delay(attempt, base_s=0.2, cap_s=5.0)
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)  # the profile's own thread: the training loop goes on

    def _warn(self, what: str, error: BaseException | str) -> None:
        self.failsafe.report("profile", what, error, "the profile is not stored")


class _TooBig(Exception):
    pass


def _new_profiler() -> Any:
    """A ``torch.profiler.profile`` of CPU (and CUDA once initialized), not started. Only
    called with torch imported."""
    import torch
    from torch.profiler import ProfilerAction, ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        activities.append(ProfilerActivity.CUDA)
    return profile(
        activities=activities,
        # A schedule that always records: torch writes the ProfilerStep#N marks only under
        # a schedule, and the stop stays ours (no trace handler runs in the training loop).
        schedule=lambda _step: ProfilerAction.RECORD,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    )


def _distributed() -> Any:
    """``torch.distributed`` when the script initialized it (never imported here)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist
    except Exception:  # a half-torn-down process group: fall back to the environment
        return None
    return None


def process_rank() -> int:
    """This process's rank: ``torch.distributed``'s once initialized, else ``$RANK``, else 0."""
    dist = _distributed()
    if dist is not None:
        return int(dist.get_rank())
    return _env_int("RANK", 0)


def world_size() -> int:
    """The job's process count: ``torch.distributed``'s, else ``$WORLD_SIZE``, else 1."""
    dist = _distributed()
    if dist is not None:
        return int(dist.get_world_size())
    return max(1, _env_int("WORLD_SIZE", 1))


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        return default


def _mb(size: int) -> str:
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size} bytes"
