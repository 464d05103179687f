"""The writer thread: drains the log buffer into a sink in batches, off the training loop.

* ``put()`` is an ``append`` to a deque: the training loop never waits for I/O.
* Batches go out every ``flush_interval`` seconds, or sooner when ``wake_records`` records
  are waiting. One-element tensors are converted here, one device sync per batch.
* When the sink is unavailable (database restarting, network gone: the sink raises
  ``StoreUnavailable``; sinks translate their own driver errors) the batch is kept and
  retried with exponential backoff; past ``max_memory_points`` the oldest kept batches are
  spilled to a local JSON-lines file and replayed once the sink is back. Writes are
  idempotent, so a batch retried after an unknown outcome never duplicates.
* A batch the sink refuses for any other reason (a poison record: a step past the 64-bit
  column, a value the driver cannot bind) is retried in halves, down to the single records
  the store refuses: everything else is stored, and each refused record is set aside in
  ``<spill>.rejected.jsonl`` (the spill format plus the error; a warning names the record
  and the file) -- one bad record never takes its neighbours down.
* An error that refuses every record of a batch (a lone record included: nothing tells a
  poison record from a broken sink then) or more than ``MAX_REJECTED`` of them is fatal: the
  writer stops, every point it holds (kept batches and the queue) goes to the spill file,
  and the next ``log()``/``flush()``/``finish()`` raises ``WriterError`` naming that file
  (``tracker db replay FILE`` stores it once the cause is fixed). Accepted points are never
  discarded.
* A write the store refuses as ``AttemptSuperseded`` (this job attempt was taken over: see
  ``tracker.store.fencing``) stops the writer at once; nothing is spilled, since the store
  would refuse it again.
* ``flush()`` puts a marker in the queue and waits until everything before it is stored:
  a deterministic join, no sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.client.sinks import Record, Sink
from tracker.client.values import is_tensor, tensors_to_floats
from tracker.errors import AttemptSuperseded, StoreUnavailable, WriterError

MAX_BATCH_RECORDS = 10_000  # log() calls per database transaction
MAX_REJECTED = 10  # records of one batch refused past this: the error is not a poison record

# (step, wall_time, {key: value}, has_tensor)
Entry = tuple[int, float, dict[str, Any], bool]


class _Marker:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class Writer:
    def __init__(
        self,
        sink: Sink,
        run_id: int,
        *,
        flush_interval: float = 0.5,
        wake_records: int = 2_000,
        max_memory_points: int = 1_000_000,
        spill_dir: str | os.PathLike[str] = ".tracker/spill",
        heartbeat_interval: float = 10.0,
        max_backoff: float = 5.0,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.sink = sink
        self.run_id = run_id
        self.flush_interval = flush_interval
        self.max_memory_points = max_memory_points
        self.spill_path = Path(spill_dir) / f"run-{run_id}-{os.getpid()}.jsonl"
        self.heartbeat_interval = heartbeat_interval
        self.max_backoff = max_backoff
        self.rejected_path = self.spill_path.with_suffix(".rejected.jsonl")
        self.error: BaseException | None = None
        self.points_rejected = 0
        self._spill_failure: BaseException | None = None
        self.points_written = 0
        self._on_error = on_error
        self._queue: deque[Any] = deque()
        self._wake_records = wake_records
        self._wake = threading.Event()
        self._stop = False
        self._kept: deque[list[Record]] = deque()  # batches waiting for the sink to return
        self._kept_points = 0
        self._spilled = False
        self._markers: list[_Marker] = []
        self._backoff = 0.0
        self._retry_at = 0.0
        self._last_heartbeat = time.monotonic()
        self._warned_outage = False
        self._thread = threading.Thread(target=self._loop, name="tracker-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------- training side

    def put(self, entry: Entry) -> None:
        queue = self._queue
        queue.append(entry)
        if len(queue) == self._wake_records:
            self._wake.set()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything put before this call is stored.

        Raises:
            WriterError: the writer failed (the original error is the cause).
            StoreUnavailable: the sink stayed unavailable for ``timeout`` seconds; the
                points are kept (in memory or in the spill file) and retried.
        """
        self.raise_error()
        if not self._thread.is_alive():
            return
        marker = _Marker()
        self._queue.append(marker)
        self._wake.set()
        if not marker.done.wait(timeout):
            raise StoreUnavailable(
                f"flush timed out after {timeout}s: {self.pending_points()} points wait for "
                f"the store (kept in memory or in {self.spill_path}); they are retried"
            )
        self.raise_error()

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the thread. On timeout everything kept goes to the spill file."""
        try:
            self.flush(timeout)
        finally:
            self._stop = True
            self._wake.set()
            self._thread.join(timeout=5.0)
            if self._kept:
                self._spill(everything=True)
            elif self.error is None and not self._thread.is_alive():
                self._settle()

    def raise_error(self) -> None:
        if self.error is not None:
            if self._spill_failure is not None:
                kept = (
                    f"; its points could not be written to {self.spill_path} either "
                    f"({type(self._spill_failure).__name__}: {self._spill_failure})"
                )
            elif self.spill_path.exists():
                kept = (
                    f"; the points not stored are kept in {self.spill_path}: store them "
                    f"with `tracker db replay {self.spill_path}` once the cause is fixed"
                )
            else:
                kept = ""
            raise WriterError(
                f"the tracker's writer thread failed: {type(self.error).__name__}: "
                f"{self.error}{kept}"
            ) from self.error

    def pending_points(self) -> int:
        return self._kept_points + sum(len(e[2]) for e in list(self._queue) if type(e) is tuple)

    # --------------------------------------------------------------- writer side

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                self._cycle()
            except BaseException as exc:  # kept and raised in the training thread
                self._fail(exc)
                return
            if self._stop and not self._queue:
                return

    def _cycle(self) -> None:
        markers: list[_Marker] = []
        while self._queue:
            batch = self._drain(markers)
            if batch:
                self._kept.append(batch)
                self._kept_points += sum(len(r[2]) for r in batch)
        self._markers.extend(markers)
        if self._kept or self._spilled:
            self._send_kept()
        if not self._kept and not self._spilled:
            for marker in self._markers:
                marker.done.set()
            self._markers.clear()
            if not self._queue:
                self._settle()  # idle: bring the chart rollups up to date
        self._maybe_heartbeat()

    def _drain(self, markers: list[_Marker]) -> list[Record]:
        queue = self._queue
        popleft = queue.popleft
        taken = [popleft() for _ in range(min(len(queue), MAX_BATCH_RECORDS))]
        entries: list[Entry] = []
        tensors: list[Any] = []
        for item in taken:
            if type(item) is _Marker:
                markers.append(item)
                continue
            entries.append(item)
            if item[3]:
                tensors.extend(v for v in item[2].values() if is_tensor(v))
        if tensors:
            floats = iter(tensors_to_floats(tensors))
            return [
                (s, int(w * 1000), {k: next(floats) if is_tensor(v) else v for k, v in it.items()})
                if t
                else (s, int(w * 1000), it)
                for s, w, it, t in entries
            ]
        return [(s, int(w * 1000), it) for s, w, it, _ in entries]

    def _send_kept(self) -> None:
        now = time.monotonic()
        if now < self._retry_at:
            self._spill_if_over_limit()
            return
        try:
            if self._spilled:
                self._replay_spill()
            while self._kept:
                batch = self._kept[0]
                rejected = self._write(self.run_id, batch)
                self._kept.popleft()
                n = sum(len(r[2]) for r in batch)
                self._kept_points -= n
                self.points_written += n - rejected
        except StoreUnavailable:
            self._backoff = min(self.max_backoff, max(0.1, self._backoff * 2))
            self._retry_at = time.monotonic() + self._backoff
            self._spill_if_over_limit()
            return
        self._backoff = 0.0

    def _write(self, run_id: int, batch: list[Record]) -> int:
        """Store ``batch``; records the sink refuses are set aside (see the module doc).

        Returns the number of points set aside.

        Raises:
            StoreUnavailable: the sink is away (the caller keeps the whole batch; the halves
                already stored are written again later, idempotently).
            Exception: the sink's error, when it refuses every record of the batch or more
                than ``MAX_REJECTED`` of them.
        """
        try:
            self.sink.write_metrics(run_id, batch)
            return 0
        except (StoreUnavailable, AttemptSuperseded):  # no record's fault: never bisected
            raise
        except Exception as exc:
            refused: list[tuple[Record, BaseException]] = []
            self._bisect(run_id, batch, exc, refused)
            if len(refused) == len(batch):  # nothing stored: the sink's error, not a record's
                raise exc from None
        self._set_aside(run_id, refused)
        return sum(len(r[2]) for r, _ in refused)

    def _bisect(
        self,
        run_id: int,
        batch: list[Record],
        exc: BaseException,
        refused: list[tuple[Record, BaseException]],
    ) -> None:
        if len(batch) == 1:
            refused.append((batch[0], exc))
            if len(refused) > MAX_REJECTED:
                raise exc from None  # the chain of halves adds nothing
            return
        middle = len(batch) // 2
        for half in (batch[:middle], batch[middle:]):
            try:
                self.sink.write_metrics(run_id, half)
            except (StoreUnavailable, AttemptSuperseded):
                raise
            except Exception as half_exc:
                self._bisect(run_id, half, half_exc, refused)

    def _set_aside(self, run_id: int, refused: list[tuple[Record, BaseException]]) -> None:
        self.rejected_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.rejected_path, "a", encoding="utf-8") as fh:
            for record, exc in refused:
                error = f"{type(exc).__name__}: {exc}"
                doc = {"run_id": run_id, "records": [record], "error": error}
                fh.write(json.dumps(doc) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        for record, exc in refused:
            self.points_rejected += len(record[2])
            warnings.warn(
                f"run {run_id}: the store refused the record at step {record[0]} "
                f"({', '.join(sorted(record[2]))}): {type(exc).__name__}: {exc}; "
                f"set aside in {self.rejected_path}, the rest of its batch is stored",
                RuntimeWarning,
                stacklevel=1,
            )

    def _spill_if_over_limit(self) -> None:
        if self._kept_points > self.max_memory_points:
            self._spill(everything=False)

    def _spill(self, *, everything: bool) -> None:
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        target = 0 if everything else self.max_memory_points // 2
        with open(self.spill_path, "a", encoding="utf-8") as fh:
            while self._kept and (self._kept_points > target or everything):
                batch = self._kept.popleft()
                self._kept_points -= sum(len(r[2]) for r in batch)
                fh.write(json.dumps({"run_id": self.run_id, "records": batch}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._spilled = True

    def _replay_spill(self) -> None:
        replay_spill_file(self.sink, self.spill_path, write=self._write)
        self._spilled = False

    def _settle(self) -> None:
        # An outage: the sink keeps the ranges and the next idle cycle retries.
        with contextlib.suppress(StoreUnavailable):
            self.sink.settle()

    def _maybe_heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat < self.heartbeat_interval:
            return
        self._last_heartbeat = now
        # An outage: the batches are kept and retried; the next heartbeat goes out later.
        with contextlib.suppress(StoreUnavailable):
            self.sink.heartbeat(self.run_id)

    def _fail(self, exc: BaseException) -> None:
        self.error = exc  # log() refuses from now on: the queue only shrinks
        markers = self._markers
        superseded = isinstance(exc, AttemptSuperseded)  # the store refuses them for good
        if superseded:
            self._kept.clear()
            self._kept_points = 0
        try:  # nothing accepted is discarded: what is left goes to the spill file
            while self._queue and not superseded:
                batch = self._drain(markers)
                if batch:
                    self._kept.append(batch)
                    self._kept_points += sum(len(r[2]) for r in batch)
            if self._kept:
                self._spill(everything=True)
        except Exception as spill_exc:
            self._spill_failure = spill_exc
        for marker in markers:
            marker.done.set()
        while self._queue:
            item = self._queue.popleft()
            if type(item) is _Marker:
                item.done.set()
        if self._on_error is not None:
            self._on_error(exc)


def replay_spill_file(
    sink: Sink, path: Path, *, write: Callable[[int, list[Record]], Any] | None = None
) -> int:
    """Write every batch of a spill file to the sink (through ``write`` when given), then
    delete the file.

    Returns the number of points replayed. Safe to repeat: writes are idempotent.
    """
    if not path.exists():
        return 0
    total = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            doc = json.loads(line)
            records = [(int(s), int(w), items) for s, w, items in doc["records"]]
            if write is None:
                sink.write_metrics(int(doc["run_id"]), records)
            else:
                write(int(doc["run_id"]), records)
            total += sum(len(r[2]) for r in records)
    path.unlink()
    return total
