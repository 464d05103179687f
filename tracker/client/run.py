"""A Run: what a training script logs into. ``log()`` validates and enqueues, nothing more."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracker.client import checkpoint as ckpt
from tracker.client.nonfinite import NonFiniteGuard, nonfinite_policy
from tracker.client.sinks import Sink
from tracker.client.values import SCALAR_TYPES, convert_value, is_tensor
from tracker.client.writer import Writer
from tracker.entities import CheckpointInfo, RunInfo
from tracker.errors import (
    CheckpointError,
    InvalidInput,
    InvalidMetricType,
    InvalidMetricValue,
    NoActiveRun,
)
from tracker.rules.ids import MAX_INT64, MIN_INT64
from tracker.rules.keys import check_key

MAX_STEP = MAX_INT64  # steps are stored in a 64-bit column


class Run:
    """One training run. Created by :func:`tracker.init`; usable as a context manager.

    ``active=False`` makes a follower (a non-zero rank of a distributed job): it keeps the
    run's id and config but ``log()`` stores nothing; its system sampler still reports its
    own GPU memory.
    """

    def __init__(
        self,
        sink: Sink,
        info: RunInfo,
        *,
        job_id: int | None = None,
        active: bool = True,
        flush_interval: float = 0.5,
        heartbeat_interval: float = 10.0,
        system_interval: float | None = 5.0,
        log_gpu_memory: bool = True,
        max_memory_points: int = 1_000_000,
        spill_dir: str | os.PathLike[str] = ".tracker/spill",
        checkpoint_dir: str | os.PathLike[str] | None = None,
        on_nonfinite: str = "record",
    ) -> None:
        from tracker import system

        self._nonfinite = NonFiniteGuard() if nonfinite_policy(on_nonfinite) else None

        self.sink = sink
        self.info = info
        self.id = info.id
        self.project = info.project
        self.name = info.name
        self.config: dict[str, Any] = info.config
        self.job_id = job_id
        self.active = active
        self.finished = False
        self.status: str = "running"
        self._step = 0
        self._known_keys: set[str] = set()
        self._writer = Writer(
            sink,
            info.id,
            flush_interval=flush_interval,
            heartbeat_interval=heartbeat_interval if active else 1e12,
            max_memory_points=max_memory_points,
            spill_dir=spill_dir,
        )
        self._put = self._writer.put
        self._memory = system.step_memory_reader() if (log_gpu_memory and active) else None
        self.checkpoint_dir = Path(checkpoint_dir or default_checkpoint_dir(info))
        self._sampler = None
        if system_interval:
            self._sampler = system.SystemSampler(
                self._log_system, system_interval, on_error=self._sampler_failed
            )

    # ------------------------------------------------------------------- logging

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record metrics at ``step`` (default: the previous step + 1). Returns at once.

        Raises:
            InvalidMetricKey / InvalidMetricValue (ValueError): a key or step breaks the rule.
            InvalidMetricType (TypeError): a value is not a number or one-element tensor.
            WriterError: the background writer failed earlier (the cause is attached).
            NoActiveRun: the run was finished.
        """
        writer = self._writer
        if writer.error is not None:
            writer.raise_error()
        if self.finished:
            raise NoActiveRun(f"run {self.id} is finished: call tracker.init() for a new run")
        if step is None:
            step = self._step
            if step > MAX_STEP:  # only after an explicit log(step=MAX_STEP)
                step = _check_step(step)
        elif type(step) is not int or step < 0 or step > MAX_STEP:
            step = _check_step(step)
        try:
            items = dict(metrics)
        except (TypeError, ValueError) as exc:
            raise InvalidMetricType(
                f"log() takes a dict of metrics, not a {type(metrics).__name__}"
            ) from exc
        known = self._known_keys
        has_tensor = False
        for key, value in items.items():
            if key not in known:
                known.add(check_key(key))
            kind = type(value)
            if kind is float:
                continue
            if kind is int:
                if not MIN_INT64 <= value <= MAX_INT64:  # past what the driver binds
                    items[key] = _big_int(key, value)
                continue
            if kind in SCALAR_TYPES:
                items[key] = float(value)
                continue
            value = convert_value(key, value)
            items[key] = value
            has_tensor = has_tensor or is_tensor(value)
        self._step = step + 1
        if not self.active:
            return
        if self._memory is not None:
            allocated, peak = self._memory()
            items["sys/step/gpu_allocated_bytes"] = allocated
            items["sys/step/gpu_peak_allocated_bytes"] = peak
        self._put((step, time.time(), items, has_tensor))
        if self._nonfinite is not None:
            self._nonfinite.check(items, step)  # after the put: the NaN itself is stored

    def _log_system(self, values: dict[str, float]) -> None:
        self._put((max(self._step - 1, 0), time.time(), values, False))

    def _sampler_failed(self, exc: BaseException) -> None:
        self.event("warning", f"system metrics stopped: {type(exc).__name__}: {exc}")

    def flush(self, timeout: float | None = None) -> None:
        """Block until every point logged so far is stored (see Writer.flush for errors)."""
        self._writer.flush(timeout)

    def event(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        """Record a run event (a diagnosis, a note) synchronously."""
        self.sink.add_event(self.id, kind, message, data)

    # --------------------------------------------------------------- checkpoints

    def save_checkpoint(
        self,
        obj: Any,
        step: int | None = None,
        metrics: Mapping[str, Any] | None = None,
        path: str | os.PathLike[str] | None = None,
    ) -> CheckpointInfo:
        """Write ``obj`` with torch.save atomically, hash it, and record it on the run.

        The default path is ``<checkpoint_dir>/step-<step>.pt``.

        Raises:
            CheckpointError: torch is missing or the write failed (no file under the final name).
            InvalidMetricType / InvalidMetricKey: a metric at save is not a number.
        """
        step = self._step - 1 if step is None else _check_step(step)
        step = max(step, 0)
        saved_metrics = {}
        for key, value in (metrics or {}).items():
            check_key(key)
            value = value if type(value) in (int, float) else convert_value(key, value)
            saved_metrics[key] = float(value.item() if is_tensor(value) else value)
        target = Path(path) if path is not None else self.checkpoint_dir / f"step-{step}.pt"
        size, digest = ckpt.atomic_save(obj, target)
        return self.sink.add_checkpoint(
            self.id, step, str(target.resolve()), size, digest, saved_metrics
        )

    def latest_checkpoint(self) -> CheckpointInfo | None:
        """The newest checkpoint whose file exists and still matches its sha256."""
        return latest_verified_checkpoint(self.sink, self.id)

    # ------------------------------------------------------------------ lifecycle

    def finish(
        self,
        status: str = "finished",
        *,
        error: str | None = None,
        exit_code: int | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        """Flush everything and give the run its final status. Safe to call twice.

        Raises:
            StoreUnavailable: the store stayed unreachable for ``timeout`` seconds; the
                points are in the spill file named in the message (replay with
                ``tracker db replay``).
            WriterError: the writer failed earlier.
        """
        if self.finished:
            return
        self.finished = True
        self.status = status
        if self._sampler is not None:
            self._sampler.stop()
        try:
            self._writer.close(timeout)
        finally:
            # The final status is written even when the writer failed: the run must not
            # stay "running" forever. If this fails too, the writer's error is the context.
            if self.active:
                self.sink.finish_run(self.id, status, error=error, exit_code=exit_code)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        from tracker.client.lifecycle import status_for_exception

        if exc is None:
            self.finish("finished")
        else:
            status, message = status_for_exception(exc)
            self.finish(status, error=message)

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.project}/{self.name} {self.status}>"


def latest_verified_checkpoint(sink: Sink, run_id: int) -> CheckpointInfo | None:
    """Walk the run's checkpoints newest first; mark missing/corrupt ones on the way."""
    for info in sink.list_checkpoints(run_id):
        path = Path(info.path)
        if not path.is_file():
            state = "missing"
        elif path.stat().st_size != info.bytes or ckpt.file_sha256(path) != info.sha256:
            state = "corrupt"
        else:
            if info.state != "ok":
                sink.set_checkpoint_state(info.id, "ok")
            return info
        if info.state != state:
            sink.set_checkpoint_state(info.id, state)
            # the doctor reports it (checkpoint_corrupt); the event says a resume skipped it
            sink.add_event(
                run_id,
                "checkpoint_skipped",
                f"checkpoint of step {info.step} is {state} ({info.path}): skipped on resume",
                {"checkpoint_id": info.id, "step": info.step, "state": state},
            )
    return None


def default_checkpoint_dir(info: RunInfo) -> Path:
    """``$TRACKER_CHECKPOINT_DIR`` (default ``./.tracker/checkpoints``) / project / run-ID-TOKEN.

    The random token keeps runs of different stores that share a working directory (both
    with a run 3, say) from overwriting each other's files.
    """
    root = Path(os.environ.get("TRACKER_CHECKPOINT_DIR") or Path(".tracker") / "checkpoints")
    return root / info.project / f"run-{info.id}-{secrets.token_hex(3)}"


def _big_int(key: str, value: int) -> float:
    """An int past 64 bits, stored as the float it rounds to (values are stored as floats)."""
    try:
        return float(value)
    except OverflowError:
        raise InvalidMetricValue(
            f"metric {key!r}: an int of {value.bit_length()} bits is past the largest float",
            field=key,
        ) from None


def _check_step(step: Any) -> int:
    if isinstance(step, bool) or not hasattr(step, "__index__"):
        raise InvalidInput(f"step {step!r} is a {type(step).__name__}: steps are ints >= 0")
    value = int(step.__index__())
    if value < 0:
        raise InvalidInput(f"step {value} is negative: steps are ints >= 0", field="step")
    if value > MAX_STEP:
        raise InvalidInput(
            f"step {value} is past the largest step {MAX_STEP} (2**63 - 1): steps are "
            f"stored as 64-bit integers",
            field="step",
        )
    return value


__all__ = ["CheckpointError", "Run", "latest_verified_checkpoint"]
