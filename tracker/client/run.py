"""A Run: what a training script logs into. ``log()`` validates and enqueues, nothing more."""

from __future__ import annotations

import os
import pickle
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tracker import filedigest
from tracker.client import checkpoint as ckpt
from tracker.client import final_status
from tracker.client.failsafe import NOT_STORED, Failsafe, kept_in, replay_command, strict_mode
from tracker.client.final_status import FinalStatus
from tracker.client.nonfinite import NonFiniteGuard, nonfinite_policy
from tracker.client.offline import spill_dir_of
from tracker.client.profiling import Profiler
from tracker.client.sinks import Sink
from tracker.client.values import SCALAR_TYPES, convert_value, is_tensor
from tracker.client.writer import Writer
from tracker.entities import CheckpointInfo, RunInfo
from tracker.errors import (
    AttemptSuperseded,
    CheckpointError,
    FlushTimeout,
    InvalidInput,
    InvalidMetricType,
    InvalidMetricValue,
    NoActiveRun,
    StoreUnavailable,
    UploadError,
    WriterError,
)
from tracker.rules.config import normalize_config
from tracker.rules.ids import MAX_INT64, MIN_INT64
from tracker.rules.keys import check_key
from tracker.rules.liveness import HEARTBEAT_S

MAX_STEP = MAX_INT64  # steps are stored in a 64-bit column
# A save that fails with these is the caller's to fix (torch missing, an object that cannot
# be pickled), not a failure of the disk: it raises even when the run is not strict.
_CALLERS_SAVE_ERRORS = (ImportError, pickle.PicklingError, TypeError, AttributeError)


class Run:
    """One training run. Created by :func:`tracker.init`; usable as a context manager.

    ``active=False`` makes a follower (a non-zero rank of a distributed job): it keeps the
    run's id and config but ``log()`` stores nothing; its system sampler still reports its
    own GPU memory.

    ``exit_timeout`` (default ``$TRACKER_EXIT_TIMEOUT`` or 10 s) bounds how long the exit of
    the process waits while the store stores nothing; then the points and the final status
    go to the spill file (see :meth:`finish`). A forked child of this process never uses
    the run (``tracker.client.fork``).

    ``strict`` (default ``$TRACKER_STRICT``, off): a failure inside the tracker (an upload,
    the store past its retries, a full disk, the encoder, the doctor, the writer thread)
    raises from the next call, as documented per method. Off, it is reported once on stderr
    and as a run event, its data is kept in the spill file where possible, and no call
    raises for it: see :mod:`tracker.client.failsafe`.
    """

    def __init__(
        self,
        sink: Sink,
        info: RunInfo,
        *,
        job_id: int | None = None,
        active: bool = True,
        flush_interval: float = 0.5,
        heartbeat_interval: float = HEARTBEAT_S,
        system_interval: float | None = 5.0,
        log_gpu_memory: bool = True,
        max_memory_points: int = 1_000_000,
        max_memory_mb: float | None = None,
        max_media_mb: float | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        exit_timeout: float | None = None,
        auto_signals: bool | None = None,
        capture_console: bool = True,
        console_max_chars: int | None = None,
        on_nonfinite: str = "record",
        strict: bool | None = None,
    ) -> None:
        from tracker import system
        from tracker.client import fork
        from tracker.client.signals import StepSignals

        self._nonfinite = NonFiniteGuard() if nonfinite_policy(on_nonfinite) else None
        # An offline run (the store was down at init, tracker.client.offline): id 0, kept
        # in its spill file for `tracker db replay`.
        self.offline: bool = bool(getattr(sink, "offline", False))
        label = "offline run" if self.offline else None
        self._failsafe = Failsafe(info.id, strict=strict_mode(strict), name=label)
        self.strict = self._failsafe.strict

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
        self.exit_timeout = resolve_exit_timeout(exit_timeout)
        self.inherited_from: int | None = None  # the parent's pid, in a forked child
        self._step = 0
        self._known_keys: dict[str, str] = {}  # each key's first string, checked
        self._writer = Writer(
            sink,
            info.id,
            flush_interval=flush_interval,
            # a follower with the run's id (a worker's job) asks what the store asks of the
            # run (a profile of every rank); one without (-1: started by hand) never does
            heartbeat_interval=heartbeat_interval if active or info.id > 0 else 1e12,
            follower=not active,
            max_memory_points=max_memory_points,
            max_memory_mb=max_memory_mb,
            spill_dir=spill_dir_of(spill_dir),
            max_media_mb=max_media_mb,
            failsafe=self._failsafe,
        )
        if not self.strict and hasattr(sink, "on_doctor_failure"):  # SqlSink's live doctor
            sink.on_doctor_failure = self._doctor_failed  # type: ignore[attr-defined]
        self._upload_failures = self._writer.upload_failures  # strict: raised by the next call
        self._put = self._writer.put
        # A profile asked for by a heartbeat's answer (tracker.client.profiling): while one is
        # wanted, log() calls this hook; None (the idle case) costs log() one check.
        self._step_hook: Callable[[int, int], None] | None = None
        self._profiler = Profiler(sink, info.id, self._failsafe, self._set_step_hook)
        self._writer.on_control = self._profiler.on_control
        self._memory = system.step_memory_reader() if (log_gpu_memory and active) else None
        self.checkpoint_dir = Path(checkpoint_dir or default_checkpoint_dir(info))
        self._image_keys: set[str] = set()  # log_image() keys already checked
        self._watches: list[Any] = []  # tracker.watch() hooks, removed at finish
        self._signals = None
        if auto_signals is None:  # system metrics off (system_interval=None): these too
            auto_signals = bool(system_interval)
        if auto_signals and active:  # step time and memory per step (tracker.client.signals)
            self._signals = StepSignals(time.time(), allocator=system.allocator_stats)
            self._put_memory(0)
        self._console = None  # stdout/stderr teed into the store (tracker.client.console)
        if capture_console and active and job_id is None and hasattr(sink, "append_logs"):
            from tracker.client.console import DEFAULT_MAX_CHARS, ConsoleCapture

            limit = console_max_chars or DEFAULT_MAX_CHARS
            failed = None if self.strict else self._console_failed
            self._console = ConsoleCapture(sink, info.id, max_chars=limit, on_failure=failed)
        self._sampler = None
        if system_interval:
            self._sampler = system.SystemSampler(
                self._log_system, system_interval, on_error=self._sampler_failed
            )
        fork.track(self)

    # ------------------------------------------------------------------- logging

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record metrics at ``step`` (default: the previous step + 1). Returns at once.

        Raises:
            InvalidMetricKey / InvalidMetricValue (ValueError): a key or step breaks the rule.
            InvalidMetricType (TypeError): a value is not a number or one-element tensor.
            NoActiveRun: the run was finished.
            WriterError: this job attempt was superseded (the process should stop); strict
                only: the background writer failed earlier (the cause is attached).
            UploadError: strict only: an earlier upload failed.
        """
        writer = self._writer
        if writer.error is not None:
            self._writer_failed()
        if self._upload_failures:
            writer.uploads.raise_failures()
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
        key = None
        for key, value in items.items():
            if key not in known:
                known[key] = check_key(key)
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
            # convert_value gives a float, or a tensor on a device (converted in the writer)
            has_tensor = has_tensor or type(value) is not float
        if key is not None and known[key] is not key:
            # Keys built per call (f"k{i}"): hold each key's first string, not one more
            # string per key and call (judged by the last key: one lookup per call).
            items = {known[k]: v for k, v in items.items()}
        if self._step_hook is not None:  # a profile is wanted (tracker.client.profiling)
            self._step_hook(step, self._step)
        self._step = step + 1
        if not self.active:
            return
        if self._memory is not None:
            allocated, peak = self._memory()
            items["sys/step/gpu_allocated_bytes"] = allocated
            items["sys/step/gpu_peak_allocated_bytes"] = peak
        now = time.time()
        if self._signals is not None:
            self._signals.observe(step, now, items)
        self._put((step, now, items, has_tensor))
        if self._nonfinite is not None:
            self._nonfinite.check(items, step)  # after the put: the NaN itself is stored

    def _set_step_hook(self, hook: Callable[[int, int], None] | None) -> None:
        self._step_hook = hook

    def _put_memory(self, step: int) -> None:
        """One RSS/allocator sample at ``step`` (init and finish: short runs get a series)."""
        values = self._signals.memory() if self._signals is not None else None
        if values:
            self._put((step, time.time(), values, False))

    def _log_system(self, values: dict[str, float]) -> None:
        self._put((max(self._step - 1, 0), time.time(), values, False))

    def _sampler_failed(self, exc: BaseException) -> None:
        self.event("warning", f"system metrics stopped: {type(exc).__name__}: {exc}")

    def _doctor_failed(self, exc: BaseException) -> None:
        self._failsafe.report(
            "doctor", "the doctor (the run's health detectors)", exc,
            f"the run's data is stored; `tracker doctor {self.id}` runs it again",
        )  # fmt: skip

    def _console_failed(self, exc: BaseException) -> None:
        what = "storing the console output"
        self._failsafe.report("console", what, exc, "not stored (still shown here)")

    def _writer_failed(self) -> None:
        """The writer thread failed: raise when strict, when this job attempt was superseded
        or in a forked child (the writer stands in); else it was reported, go on."""
        writer = self._writer
        if self.strict or not isinstance(writer, Writer) or _superseded(writer.error):
            writer.raise_error()

    def _must_raise(self, exc: BaseException) -> bool:
        """Whether ``exc`` reaches the caller: strict, superseded, or the caller's misuse."""
        return self.strict or _superseded(exc) or isinstance(exc, NoActiveRun)

    def flush(self, timeout: float | None = None) -> None:
        """Block until every point and file logged so far is stored. Not strict, the wait
        also ends once nothing was stored for the run's ``exit_timeout`` while the store is
        unavailable (the points are kept and retried, and the loop goes on).

        Raises (strict only; otherwise each is reported once and the call returns):
            StoreUnavailable / FlushTimeout: ``timeout`` passed first (see Writer.flush).
            WriterError: the writer failed. UploadError: an upload failed.
        """
        if self._writer.error is not None:
            self._writer_failed()
            return  # not strict: nothing is stored until the spill at finish()
        try:
            stall = None if self.strict else self.exit_timeout
            self._writer.flush(timeout, stall=stall)
            self._writer.uploads.raise_failures()
        except (StoreUnavailable, FlushTimeout, WriterError, UploadError) as exc:
            if self._must_raise(exc):
                raise
            if isinstance(exc, WriterError):  # the writer failed meanwhile: reported there
                return
            self._failsafe.report(
                "flush", f"flush(timeout={timeout})", exc,
                "the points are kept and still being written (spilled if the run ends first)",
            )  # fmt: skip

    # ------------------------------------------------------------ files and media

    def log_artifact(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        """Store a file (as ``name``, default its file name) or a directory (each file
        under ``name/``, default the directory's name). Returns at once; the upload runs in
        the writer thread (a file up to 16 MiB is read now, a larger one when uploaded).

        Raises:
            InvalidInput: the path cannot be read, or ``name`` breaks the artifact path rule.
            UploadError: strict only: an earlier upload failed. WriterError / NoActiveRun as
                ``log()``.
        """
        from tracker.client.files import prepare_files

        self._check_open()
        self._queue_uploads(prepare_files(path, name))

    def log_text(self, name: str, text: str) -> None:
        """Store ``text`` (UTF-8) as the artifact ``name``, e.g. ``"notes/summary.md"``."""
        from tracker.client.files import prepare_text

        self._check_open()
        self._queue_uploads([prepare_text(name, text)])

    def log_dict(self, name: str, obj: Any) -> None:
        """Store ``obj`` as JSON, or YAML when ``name`` ends in ``.yaml``/``.yml``."""
        from tracker.client.files import prepare_dict

        self._check_open()
        self._queue_uploads([prepare_dict(name, obj)])

    def log_image(
        self, key: str, image: Any, step: int | None = None, caption: str | None = None,
        *, format: str | None = None,
    ) -> None:  # fmt: skip
        """Store an image at ``media/images/<key>/<step>.png`` (or ``.jpg``).

        ``image``: a numpy array (HW, HWC or CHW; floats in [0, 1], integers in 0..255), a
        batch (NCHW/NHWC, or a list of images) laid out as a grid, a torch tensor (detached
        now, moved and encoded in the encoder thread; a tensor that requires grad is copied on
        its device now, another tensor changed in place before it is encoded is reported as a
        failed upload, not stored), a PIL image or an image file's path. ``step``
        defaults to the run's current step; ``format`` is ``"png"`` or ``"jpeg"``
        (default: PNG, JPEG for photos of a megapixel or more when Pillow is installed).

        Raises:
            InvalidInput: the shape is not an image, or a bad ``format``/file.
            InvalidMetricKey: ``key`` breaks the key rule.
            UploadError: strict only: an earlier upload failed. WriterError / NoActiveRun as
                ``log()``.
        """
        from tracker.client.media import prepare_image

        self._check_open()
        if type(key) is not str or key not in self._image_keys:  # once per key: on the loop
            self._image_keys.add(check_key(key))
        self._queue_uploads([prepare_image(key, image, self._media_step(step), caption, format)])

    def log_figure(self, key: str, figure: Any, step: int | None = None) -> None:
        """Store a matplotlib figure as PNG (rendered now, in this thread) or a plotly
        figure as its JSON, at ``media/figures/<key>/<step>.png|.plotly.json``."""
        from tracker.client.media import prepare_figure

        self._check_open()
        self._queue_uploads([prepare_figure(check_key(key), figure, self._media_step(step))])

    def log_histogram(self, key: str, values: Any, step: int | None = None, bins: int = 64) -> None:
        """Store the distribution of ``values`` (a tensor, array or list) as ``bins`` counts
        and edges at ``media/histograms/<key>/<step>.json``, computed in the encoder thread;
        NaN and ±Inf are counted apart. A tensor is copied on its device now."""
        from tracker.client.media import prepare_histogram

        self._check_open()
        self._queue_uploads(
            [prepare_histogram(check_key(key), values, self._media_step(step), bins)]
        )

    def _check_open(self) -> None:
        writer = self._writer
        if writer.error is not None:
            self._writer_failed()
        if self._upload_failures:
            writer.uploads.raise_failures()
        if self.finished:
            raise NoActiveRun(f"run {self.id} is finished: call tracker.init() for a new run")

    def _media_step(self, step: int | None) -> int:
        """The step of a media entry: the one given, else the run's current step."""
        return max(self._step - 1, 0) if step is None else _check_step(step)

    def _queue_uploads(self, entries: list[Any]) -> None:
        if not self.active:  # a follower rank stores nothing
            return
        put = self._writer.put_upload
        for entry in entries:
            put(entry)

    def event(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        """Record a run event (a diagnosis, a note) synchronously.

        Raises:
            StoreUnavailable (or the sink's error): strict only; otherwise the failure is
                reported once and the event goes to the writer's queue of events (stored
                later, else spilled).
        """
        try:
            self.sink.add_event(self.id, kind, message, data)
        except Exception as exc:
            if self._must_raise(exc):
                raise
            kept = "kept and stored once the store takes writes (else spilled at finish)"
            self._failsafe.report("event", f"storing the run event {kind!r}", exc, kept)
            self._failsafe.events.append({"kind": kind, "message": message, "data": data})

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Replace the run's stored config (an integration learns hyperparameters after the
        run started). Checked like ``init``'s config; a follower stores nothing.

        Raises:
            InvalidInput: a value cannot be stored (the message names its path).
            StoreUnavailable (or the sink's error): strict only; otherwise the failure is
                reported once and the run keeps the new config in memory only.
        """
        cfg = normalize_config(dict(config))
        if self.active:
            attrs = {"host": socket.gethostname(), "pid": os.getpid()}
            try:
                self.info = self.sink.start_run(self.id, cfg, **attrs)
            except Exception as exc:
                if self._must_raise(exc):
                    raise
                self._failsafe.report("config", "storing the run's config", exc, NOT_STORED)
        self.config = cfg

    # --------------------------------------------------------------- checkpoints

    def save_checkpoint(
        self,
        obj: Any,
        step: int | None = None,
        metrics: Mapping[str, Any] | None = None,
        path: str | os.PathLike[str] | None = None,
    ) -> CheckpointInfo | None:
        """Write ``obj`` with torch.save atomically, hash it, and record it on the run.

        The default path is ``<checkpoint_dir>/step-<step>.pt``. Not strict, a write the
        disk refuses (full, read-only) is reported once and returns None (no file under
        the final name; training goes on), and a row the store cannot take is reported,
        kept in the spill file (``tracker db replay`` records it) and returns None.

        Raises:
            CheckpointError: torch is missing, ``obj`` cannot be saved, or (strict) the
                write failed (no file under the final name).
            InvalidMetricType / InvalidMetricKey: a metric at save is not a number.
            StoreUnavailable: strict only: the store cannot record it.
        """
        step = self._checkpoint_step(step)
        saved_metrics = _checkpoint_metrics(metrics)
        target = Path(path) if path is not None else self.checkpoint_dir / f"step-{step}.pt"
        try:
            size, digest = ckpt.atomic_save(obj, target)
        except CheckpointError as exc:
            if self.strict or isinstance(exc.__cause__, _CALLERS_SAVE_ERRORS):
                raise  # torch missing, an object torch cannot save: the caller's to fix
            # The write failed (a full disk: torch's zip writer says RuntimeError for a short
            # write, the file system OSError); the temporary file is removed.
            cause = exc.__cause__ or exc
            self._failsafe.report("checkpoint", f"saving checkpoint {target}", cause, NOT_STORED)
            return None
        return self._record(step, target.resolve(), size, digest, saved_metrics)

    def _record(
        self, step: int, target: Path, size: int, digest: str, metrics: dict[str, float]
    ) -> CheckpointInfo | None:
        """The checkpoint's row; not strict, a store that fails gets it in the spill file
        (at once while the writer finds the store unavailable: no wait in the loop)."""
        try:
            outage = self._writer.outage if not self.strict else None
            if outage is not None:
                raise outage
            return self.sink.add_checkpoint(self.id, step, str(target), size, digest, metrics)
        except Exception as exc:
            if self._must_raise(exc):
                raise
            row = {"step": step, "path": str(target), "bytes": size, "sha256": digest,
                   "metrics": metrics}  # fmt: skip
            kept = self._writer.spill_line({"run_id": self.id, "checkpoint": row})
            self._failsafe.report(
                "checkpoint_row", f"recording checkpoint {target} (the file is saved)", exc, kept
            )
            return None

    def record_checkpoint(
        self,
        path: str | os.PathLike[str],
        step: int | None = None,
        metrics: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo | None:
        """Record a checkpoint file something else wrote (Lightning's ``ModelCheckpoint``, the
        Hugging Face ``Trainer``): hash it and store its row exactly as :meth:`save_checkpoint`
        does, so ``latest_checkpoint()`` and a retried job's resume verify it the same way.
        A directory (a Hugging Face checkpoint) is hashed as a whole: see
        :mod:`tracker.filedigest`.

        Returns None when the store could not record it and the run is not strict (the
        row is then in the spill file, see :meth:`save_checkpoint`).

        Raises:
            CheckpointError: ``path`` does not exist.
            InvalidMetricType / InvalidMetricKey: a metric at save is not a number.
            StoreUnavailable: strict only: the store cannot record it.
        """
        step = self._checkpoint_step(step)
        saved_metrics = _checkpoint_metrics(metrics)
        target = Path(path).resolve()
        try:
            size, digest = filedigest.path_digest(target)
        except OSError as exc:
            raise CheckpointError(f"checkpoint {target} cannot be read: {exc}") from exc
        return self._record(step, target, size, digest, saved_metrics)

    def _checkpoint_step(self, step: int | None) -> int:
        return max(self._step - 1 if step is None else _check_step(step), 0)

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
        report: Callable[[str], None] | None = None,
    ) -> None:
        """Store everything and give the run its final status. Safe to call twice.

        Waits as long as points are being stored; ``timeout`` bounds only the time during
        which nothing is stored (``None``: no bound). ``report`` gets a progress line
        ("N points still being written, M points/s") every 10 s of waiting.

        Not strict (the default), the failures below are reported once on stderr instead
        (naming the spill file and its ``tracker db replay`` command) and ``finish()``
        returns; the run's data is kept the same way.

        Raises:
            StoreUnavailable: strict only: nothing could be stored for ``timeout`` seconds,
                or the final status could not be written: the points not stored and the
                final status are in the spill file the message names; ``tracker db replay
                FILE`` stores the points, then applies the status.
            WriterError: strict only: the writer failed earlier (the final status is still
                written); always: this job attempt was superseded.
            UploadError: strict only: an upload failed.
            InheritedRunError: called in a forked child on its parent's run.
        """
        if self.inherited_from is not None:
            from tracker.client.fork import inherited_error

            raise inherited_error(self.id, self.inherited_from, "finish()")
        if self.finished:
            return
        self.finished = True
        self.status = status
        final = FinalStatus(self.id, status, exit_code, error, time.time())
        if self._sampler is not None:
            self._sampler.stop()
        self._profiler.close(self.exit_timeout)  # a profile being taken: stored first
        for watch in self._watches:
            watch.remove()
        if self._writer.error is None:
            self._put_memory(max(self._step - 1, 0))
        stored = False
        try:
            stored = self._close(final, timeout, report)
        except Exception as exc:
            if self._must_raise(exc):
                raise
            self._failsafe.report("finish", f"finishing run {self.id}", exc, NOT_STORED)
        finally:
            if not self.strict:  # failure events reported meanwhile: stored, else spilled
                try:
                    self._writer.store_events(store=stored)
                except OSError as exc:
                    self._failsafe.report("events", "spilling the run events", exc, NOT_STORED)

    def _close(
        self, final: FinalStatus, timeout: float | None, report: Callable[[str], None] | None
    ) -> bool:
        """Store what is held, then the final status; False when the store failed (not
        strict: reported)."""
        try:
            self._writer.close(timeout, report=report)
        except StoreUnavailable as exc:  # nothing stored for `timeout`: skip the store
            self._stop_console(final.status, final.error, final.exit_code, send=False)
            if not self.active:  # a follower rank: the run's status is the main rank's
                if self.strict:
                    raise
                self._failsafe.report("store", "storing the run's data", exc, "(as it says)")
                return False
            spill = self._writer.exit_spill_path or self._writer.spill_path
            final_status.append(spill, final)
            if self.strict:
                raise StoreUnavailable(
                    f"run {self.id} ended {final.describe()}: {exc}; its final status is "
                    f"kept in {spill} too and applied by the replay"
                ) from exc
            self._failsafe.report(
                "store", "storing the run's data", exc,
                f"its final status ({final.describe()}) is kept in {spill} too and applied "
                f"by the replay",
            )  # fmt: skip
            return False
        except BaseException:
            # The final status is written even when the writer failed: the run must not
            # stay "running" forever. If this fails too, the writer's error is the context.
            self._store_final_status(final)
            raise
        stored = self._store_final_status(final)
        self._writer.uploads.raise_failures()
        return stored and self._writer.error is None

    def _store_final_status(self, final: FinalStatus) -> bool:
        """Write the final status; False when it went to the spill file (not strict)."""
        failure = self._stop_console(final.status, final.error, final.exit_code)
        if not self.active:
            return True
        try:
            self.sink.finish_run(
                self.id, final.status, error=final.error, exit_code=final.exit_code, **failure
            )
        except Exception as exc:
            if _superseded(exc) or (self.strict and not isinstance(exc, StoreUnavailable)):
                raise
            spill = self._writer.exit_spill_path or self._writer.spill_path
            final_status.append(spill, final)
            if self.strict:
                raise StoreUnavailable(
                    f"run {self.id} ended {final.describe()} but the store is unavailable "
                    f"({exc}): its final status is kept in {spill}; apply it with "
                    f"{replay_command(spill)} once the store is back"
                ) from exc
            self._failsafe.report(
                "final_status", f"storing the final status ({final.describe()})", exc,
                kept_in(spill),
            )  # fmt: skip
            return False
        return True

    def _stop_console(
        self, status: str, error: str | None, exit_code: int | None, *, send: bool = True
    ) -> dict[str, str]:
        """Stop the console capture; for a failed run, its failure class from the output."""
        console, self._console = self._console, None
        if console is None:
            return {}
        console.stop(send=send)
        if status != "failed":
            return {}
        from tracker.rules.failure import classify

        # The traceback is printed after the run ends, so the tail holds only what came
        # before it: classify the tail followed by the exception's own line.
        found = classify(exit_code, None, "\n".join(t for t in (console.tail(), error) if t))
        return {} if found is None else {"failure_class": found.cls, "failure_hint": found.hint}

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        from tracker.client.lifecycle import exit_code_for_exception, status_for_exception

        if exc is None:
            self.finish("finished")
        else:
            status, message = status_for_exception(exc)
            self.finish(status, error=message or None, exit_code=exit_code_for_exception(exc))

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.project}/{self.name} {self.status}>"


def _superseded(exc: BaseException | None) -> bool:
    """This job attempt was taken over (directly, or as the writer's ``WriterError``)."""
    return isinstance(exc, AttemptSuperseded) or (
        isinstance(exc, WriterError) and isinstance(exc.__cause__, AttemptSuperseded)
    )


def latest_verified_checkpoint(sink: Sink, run_id: int) -> CheckpointInfo | None:
    """Walk the run's checkpoints newest first; mark missing/corrupt ones on the way."""
    for info in sink.list_checkpoints(run_id):
        path = Path(info.path)
        state = filedigest.verify(path, info.bytes, info.sha256)
        if state == "ok":
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


def _checkpoint_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    saved: dict[str, float] = {}
    for key, value in (metrics or {}).items():
        check_key(key)
        value = value if type(value) in (int, float) else convert_value(key, value)
        saved[key] = float(value.item() if is_tensor(value) else value)
    return saved


def default_checkpoint_dir(info: RunInfo) -> Path:
    """``$TRACKER_CHECKPOINT_DIR`` (default ``./.tracker/checkpoints``) / project / run-ID-TOKEN.

    The random token keeps runs of different stores that share a working directory (both
    with a run 3, say) from overwriting each other's files.
    """
    root = Path(os.environ.get("TRACKER_CHECKPOINT_DIR") or Path(".tracker") / "checkpoints")
    return root / info.project / f"run-{info.id}-{secrets.token_hex(3)}"


def resolve_exit_timeout(value: float | None) -> float:
    """The exit wait: the argument, else ``$TRACKER_EXIT_TIMEOUT``, else 10 s."""
    if value is None:
        raw = os.environ.get("TRACKER_EXIT_TIMEOUT") or "10"
        try:
            value = float(raw)
        except ValueError:
            raise InvalidInput(
                f"TRACKER_EXIT_TIMEOUT={raw!r} is not a number of seconds",
                field="TRACKER_EXIT_TIMEOUT",
            ) from None
    if not value >= 0:
        raise InvalidInput(
            f"exit_timeout={value!r}: it must be a number of seconds >= 0", field="exit_timeout"
        )
    return float(value)


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
