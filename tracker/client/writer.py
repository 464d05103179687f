"""The writer thread: drains the log buffer into a sink in batches, off the training loop.

* ``put()`` is an ``append`` to a deque: the training loop never waits for I/O.
* Batches go out every ``flush_interval`` seconds, or sooner when ``wake_records`` records
  are waiting. One-element tensors are converted here, one device sync per batch.
* When the sink is unavailable (database restarting, network gone: the sink raises
  ``StoreUnavailable``; sinks translate their own driver errors) the batch is kept and
  retried with exponential backoff; past ``max_memory_points`` (and never more than half
  the memory cap) the oldest kept batches are spilled to a local JSON-lines file and
  replayed once the sink is back. Writes are
  idempotent, so a batch retried after an unknown outcome never duplicates.
* A batch the sink refuses for any other reason (a poison record: a step past the 64-bit
  column, a value the driver cannot bind) is retried in halves, down to the single records
  the store refuses: everything else is stored, and each refused record is set aside in
  ``<spill>.rejected.jsonl`` (the spill format plus the error; a warning names the record
  and the file) -- one bad record never takes its neighbours down
  (:mod:`tracker.client.poison`, shared with ``tracker db replay``).
* An error that refuses every record of a batch (a lone record included: nothing tells a
  poison record from a broken sink then) or more than ``MAX_REJECTED`` of them is fatal: the
  writer stops, every point it holds (kept batches, overflow segments and the queue, in
  the order logged) goes to the spill file,
  and (strict, see :mod:`tracker.client.failsafe`) the next ``log()``/``flush()``/``finish()``
  raises ``WriterError`` naming that file (``tracker db replay FILE`` stores it once the cause
  is fixed). Not strict (the default), the failure is reported once (a line on stderr, a run
  event) and the run goes on: what ``log()`` accepts from then on is held (past the memory
  cap, on disk) and goes to the same spill file at ``close()``. Accepted points are never
  discarded.
* A write the store refuses as ``AttemptSuperseded`` (this job attempt was taken over: see
  ``tracker.store.fencing``) stops the writer at once; nothing is spilled, since the store
  would refuse it again.
* ``flush()`` puts a marker in the queue and waits until everything before it is stored:
  a deterministic join, no sleeping.
* Memory is capped (``max_memory_mb``, see :mod:`tracker.client.overflow`): past the cap,
  ``put()`` moves new entries to an overflow segment on disk, which the writer stores when
  it reaches the segment's place in the queue. ``put()`` still never waits for the writer.
  A ``close()`` that times out while the store is away writes everything held to the spill
  file the same way, and ``replay_spill_file`` skips a last line cut short by a kill.
  ``flush(timeout)`` raises ``StoreUnavailable`` when the
  store is away, ``FlushTimeout`` when points are still being written; each message says
  which (and how many points, at what rate).
* Once idle, the writer refreshes the chart rollups (``sink.settle()``) in steps of about
  half a second, each of short transactions; batches logged meanwhile go first, and
  ``close()`` waits until the rollups are current (it keeps heartbeating meanwhile).
* ``close(timeout)`` (``finish()``, and the exit of the process) waits as long as points are
  being stored: ``timeout`` is how long it waits while *nothing* is stored (the store is
  down, or another process holds its lock). Then everything the writer holds -- the batch a
  blocked write still has in flight included, writes being idempotent -- goes to a spill
  file (``spill_path``, or ``<spill>.exit.jsonl`` when the writer thread may still be
  replaying ``spill_path``) and ``StoreUnavailable`` names it. Every ``PROGRESS_EVERY_S``
  the wait reports how many points are still being written and how fast.
* Artifacts and media (``log_artifact``, ``log_image``, ...) go through a second queue,
  :mod:`tracker.client.uploads`, drained by this thread after each cycle's points (about
  ``UPLOAD_SLICE_S`` at a time, so points and heartbeats keep flowing): encoded here,
  retried with the same backoff on ``StoreUnavailable``, flushed by ``flush()``/``close()``
  and spilled with the points when ``close()`` gives up or the writer fails.
* The run events of the tracker's own failures (:class:`~tracker.client.failsafe.Failsafe`),
  and the events it queues for others (``Failsafe.queue_event``), are stored by this thread
  while the store takes writes, else spilled with the points (``tracker db replay`` stores
  them).
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

from tracker.client.failsafe import (
    NOT_STORED,
    Failsafe,
    kept_in,
    replay_command,
    spill_events,
    strict_mode,
)
from tracker.client.media import Pending
from tracker.client.overflow import (
    ENTRY_BYTES,
    KEY_BYTES,
    Entry,
    Overflow,
    Segment,
    held_bytes,
    memory_cap_bytes,
    to_records,
)
from tracker.client.poison import Isolator
from tracker.client.sinks import Record, Sink
from tracker.client.uploads import Uploads, media_budget_bytes, replay_artifact
from tracker.errors import AttemptSuperseded, FlushTimeout, StoreUnavailable, WriterError
from tracker.rules.backoff import backoff_delay
from tracker.wakeup import Wakeup

MAX_BATCH_RECORDS = 10_000  # log() calls per database transaction
SEGMENT_BATCHES_PER_CYCLE = 20  # batches of an overflow segment stored between heartbeats
PROGRESS_EVERY_S = 10.0  # close(): how often a long wait reports its progress
SETTLE_STALL_S = 40.0  # close(): how long a rollup refresh may go without progress
UPLOAD_SLICE_S = 0.5  # uploads stored per writer cycle before points get their turn
# An outage (a restarting server, a full disk, a lock held) this long is said once on stderr
# and as a run event; shorter ones (a server restart) are retried silently.
OUTAGE_SAID_AFTER_S = 5.0
SPILL_RETRY_S = 1.0  # a spill that failed (its disk full too) is tried again after this


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
        max_memory_mb: float | None = None,
        spill_dir: str | os.PathLike[str] = ".tracker/spill",
        heartbeat_interval: float = 10.0,
        max_backoff: float = 5.0,
        on_error: Callable[[BaseException], None] | None = None,
        max_media_mb: float | None = None,
        failsafe: Failsafe | None = None,
        follower: bool = False,
    ) -> None:
        self.sink = sink
        self.failsafe = failsafe or Failsafe(run_id, strict=strict_mode())
        self._events_refused = False  # the sink refused an event: the rest are spilled
        self.run_id = run_id
        self.flush_interval = flush_interval
        own = getattr(sink, "spill_path", None)  # an offline run's (tracker.client.offline)
        self.spill_path = own or Path(spill_dir) / f"run-{run_id}-{os.getpid()}.jsonl"
        self._overflow = Overflow(run_id, self.spill_path, memory_cap_bytes(max_memory_mb))
        # Batches kept through an outage count against the cap too: at most half of it.
        room = self._overflow.cap_bytes // (2 * (ENTRY_BYTES + KEY_BYTES))
        self.max_memory_points = max(1, min(max_memory_points, room))
        self._head: Segment | None = None  # the overflow segment the writer has reached
        self.heartbeat_interval = heartbeat_interval
        # Gets what a heartbeat's answer asks of the run (a profile: tracker.client.profiling),
        # in this thread; None: nobody listens.
        self.on_control: Callable[[dict[str, Any]], None] | None = None
        # A follower rank (tracker.client.run): its "heartbeat" only asks what the store asks
        # of the run (Sink.control): the main rank keeps the run alive and runs the doctor.
        self.follower = follower
        self.max_backoff = max_backoff
        self.rejected_path = self.spill_path.with_suffix(".rejected.jsonl")
        self.error: BaseException | None = None
        self._isolator = Isolator(sink, self.rejected_path)
        self._write = self._isolator.write  # poison records set aside (tracker.client.poison)
        self._spill_failure: BaseException | None = None
        self.points_written = 0
        self._on_error = on_error
        self._queue: deque[Any] = deque()
        self._wake_records = wake_records
        self._wake = Wakeup()  # set() is safe from a signal handler (finish on SIGTERM)
        self._stop = False
        self._kept: deque[list[Record]] = deque()  # batches waiting for the sink to return
        self._kept_points = 0
        self._spilled = False
        self._markers: list[_Marker] = []
        self._failures = 0  # failed sends in a row: the backoff's attempt number
        self._retry_at = 0.0
        self._spill_retry_at = 0.0
        self._last_heartbeat = time.monotonic()
        self._outage_since: float | None = None  # monotonic start of the outage now on
        self.outage: StoreUnavailable | None = None  # the sink's last "unavailable", if any
        self.exit_spill_path: Path | None = None  # where close() put what it held on giving up
        # Guards moves of records between the queue, _kept and the spill file, so that
        # close() can take everything while the writer thread is blocked inside the sink.
        self._lock = threading.RLock()
        self._abandoned = False
        self._unsettled = False  # the sink said it has chart rollups left to refresh
        self._settling = False  # the thread is inside sink.settle()
        self._settle_calls = 0
        self.uploads = Uploads(
            sink, run_id, self.spill_path, media_budget_bytes(max_media_mb),
            on_built=self._wake.set,
            on_failure=None if self.failsafe.strict else self._upload_failed,
        )  # fmt: skip
        self.upload_failures = self.uploads.failures  # the same list: a cheap check in log()
        self._thread = threading.Thread(target=self._loop, name="tracker-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------- training side

    def put(self, entry: Entry) -> None:
        queue = self._queue
        queue.append(entry)
        overflow = self._overflow
        overflow.bytes_in += ENTRY_BYTES + KEY_BYTES * len(entry[2])
        if overflow.open is not None or (
            overflow.bytes_in - overflow.bytes_released - overflow.bytes_diverted
            > overflow.budget_bytes
        ):
            overflow.divert(queue)  # past the memory cap: to disk (never waits)
        if len(queue) == self._wake_records:
            self._wake.set()

    def put_upload(self, entry: Pending) -> None:
        """Queue an artifact/media entry (may wait briefly past the byte budget). The
        encoder thread wakes the writer once the entry is built."""
        self.uploads.put(entry, outage=self.outage is not None)

    def flush(self, timeout: float | None = None, *, stall: float | None = None) -> None:
        """Wait until everything put before this call is stored (points and uploads).

        ``stall`` (with no ``timeout``): give up once nothing was stored for that many
        seconds while the store is unavailable (a run that is not strict: a store that is
        down must not hold the training loop forever; a slow one is waited for).

        Raises:
            WriterError: the writer failed (the original error is the cause).
            StoreUnavailable: the sink stayed unavailable for ``timeout`` seconds (or
                ``stall`` seconds without progress); the points are kept (in memory or in
                the spill file) and retried.
            FlushTimeout: ``timeout`` passed while the store is up (the points are being
                written).
        """
        self.raise_error()
        if not self._thread.is_alive():
            return
        marker = _Marker()
        uploaded = _Marker()
        written = self.points_written
        self.uploads.put_marker(uploaded)
        self._queue.append(marker)
        self._wake.set()
        start = time.monotonic()
        if timeout is None and stall is not None:
            for waited in (marker, uploaded):
                # A store that is up but slow is waited for; one that is away is not
                while not self._wait_stored(waited, stall, None):
                    if self.outage is not None:
                        raise StoreUnavailable(
                            f"flush gave up after {stall}s without progress: {self._state(0.0)}"
                        )
        elif not marker.done.wait(timeout) or not uploaded.done.wait(
            None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        ):
            what = f"flush timed out after {timeout}s"
            rate = (self.points_written - written) / (timeout or 1.0)
            if self.outage is not None:
                raise StoreUnavailable(f"{what}: {self._state(rate)}")
            raise FlushTimeout(f"{what}: {self._state(rate)}")
        self.raise_error()

    def close(
        self, timeout: float | None = 60.0, *, report: Callable[[str], None] | None = None
    ) -> None:
        """Store everything put so far and stop the thread.

        Waits as long as points are being stored; ``timeout`` bounds only a wait during
        which nothing is stored (``None``: no bound). ``report`` gets a progress line every
        ``PROGRESS_EVERY_S`` seconds of waiting.

        Raises:
            StoreUnavailable: nothing was stored for ``timeout`` seconds; every point the
                writer held is in the spill file(s) the message names (``exit_spill_path``).
            WriterError: the writer failed (its points are in the spill file it names).
            Not strict, neither is raised for a failure of the tracker: it was reported
            (:mod:`tracker.client.failsafe`) and what is held goes to the spill file; a
            spill that fails raises ``OSError``.
        """
        self._raise_if_strict()
        if self._thread.is_alive():
            marker = _Marker()
            uploaded = _Marker()
            self.uploads.put_marker(uploaded)
            self._queue.append(marker)
            self._wake.set()
            if not self._wait_stored(marker, timeout, report) or not self._wait_stored(
                uploaded, timeout, report
            ):
                raise StoreUnavailable(self._abandon(timeout))
            self._raise_if_strict()
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=5.0)
        # The thread may still be refreshing chart rollups, in short steps: wait while it
        # makes progress, so finish_run() follows them and the process does not end
        # half-way (a step waits at most the store's busy timeout, 30 s, for the lock).
        calls, progress_at = self._settle_calls, time.monotonic()
        while self._thread.is_alive() and (self._settling or self._unsettled):
            self._thread.join(timeout=0.5)
            if self._settle_calls != calls:
                calls, progress_at = self._settle_calls, time.monotonic()
            elif time.monotonic() - progress_at > SETTLE_STALL_S:
                break
        self.uploads.close()
        if not self._thread.is_alive() and self.uploads.has_work():
            self.uploads.spill(self.spill_path)
        if not self._thread.is_alive() and self._holds_points():
            self._spill_all()
        elif self._kept:
            self._spill(everything=True)
        elif self.error is None and not self._thread.is_alive():
            self._settle()
        self.store_events(store=self.error is None and not self._thread.is_alive())

    def spill_line(self, doc: dict[str, Any]) -> str:
        """Append ``doc`` (a row the replay stores: a checkpoint's) to ``<spill>.rows.jsonl``,
        a file of its own: this thread may be replaying the spill file meanwhile, and
        deletes it once stored. Returns where it went, in the words of
        :mod:`tracker.client.failsafe`. Never raises."""
        path = self.spill_path.with_suffix(".rows.jsonl")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(doc) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            return f"{NOT_STORED} ({type(exc).__name__}: {exc})"
        return kept_in(path)

    def _raise_if_strict(self) -> None:
        """``raise_error()`` when strict, or when this attempt was superseded (always)."""
        if self.failsafe.strict or isinstance(self.error, AttemptSuperseded):
            self.raise_error()

    def store_events(self, *, store: bool) -> None:
        """Store the failure events still queued (``store``: try the sink first, while the
        writer thread is not running); what is not stored goes to the spill file.

        Raises:
            OSError: the spill file cannot be written.
        """
        events = self.failsafe.take_events()
        if not events:
            return
        if store and not self._events_refused and self.outage is None:
            self.failsafe.give_back(events)
            with contextlib.suppress(Exception):  # best effort: the rest is spilled below
                self._send_events()
            events = self.failsafe.take_events()
        spill_events(self.exit_spill_path or self.spill_path, self.run_id, events)

    def _wait_stored(
        self, marker: _Marker, timeout: float | None, report: Callable[[str], None] | None
    ) -> bool:
        """Wait for ``marker``; False once nothing was stored (and nothing taken from the
        queue) for ``timeout`` seconds."""
        start = last_progress = next_report = time.monotonic()
        next_report += PROGRESS_EVERY_S
        first = written = self.points_written
        queued = len(self._queue)
        uploads = self.uploads.stored
        while not marker.done.wait(min(0.25, timeout) if timeout else 0.25):
            now = time.monotonic()
            moved = self.points_written != written or self.uploads.stored != uploads
            if moved or len(self._queue) < queued:
                written, last_progress = self.points_written, now
                uploads = self.uploads.stored
            elif timeout is not None and now - last_progress >= timeout:
                return False
            queued = len(self._queue)
            if report is not None and now >= next_report:
                next_report = now + PROGRESS_EVERY_S
                report(f"run {self.run_id}: {self._state((written - first) / (now - start))}")
        return True

    def _state(self, rate: float) -> str:
        """What the writer is doing, in words: still writing (and how fast), or kept."""
        pending = self.pending_points()
        if self.outage is not None:
            return (
                f"the store is unavailable ({self.outage}); {pending:,} points are kept "
                f"(in memory or in {self.spill_path}) and retried{self._files_left()}"
            )
        return f"{pending:,} points still being written ({rate:,.0f} points/s){self._files_left()}"

    def _files_left(self) -> str:
        left = self.uploads.pending()
        return f", {left:,} artifact uploads waiting" if left else ""

    def _abandon(self, timeout: float | None) -> str:
        """Move everything held to a spill file (the caller's thread; the writer thread may
        be blocked in the sink) and stop the writer. Returns the message for the caller."""
        with self._lock:
            self._abandoned = self._stop = True
            # The writer thread may be replaying spill_path: it keeps the file from now on.
            target = self.spill_path
            if self._spilled:
                target = target.with_suffix(".exit.jsonl")
            # Kept batches (the one of a blocked write too: writes are idempotent), the
            # overflow segments and the queue, in the order logged.
            count = self._spill_all(target)
            files = self.uploads.spill(target)
            spill_events(target, self.run_id, self.failsafe.take_events())
        self.uploads.close()
        for marker in self._markers:
            marker.done.set()
        self._wake.set()
        self.exit_spill_path = target
        kept = [p for p in dict.fromkeys([self.spill_path, target]) if p.exists()]
        paths = " ".join(map(str, kept))
        why = f": {self.outage}" if self.outage is not None else " (a write is blocked)"
        also = f" and {files:,} artifact files" if files else ""
        return (
            f"nothing could be stored for {timeout}s, the store is unavailable{why}; the "
            f"{count:,} points{also} not yet stored are kept in {paths}: store them with "
            f"{replay_command(*kept)} once the store is back"
        )

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
                    f"with {replay_command(self.spill_path)} once the cause is fixed"
                )
            else:
                kept = ""
            raise WriterError(
                f"the tracker's writer thread failed: {type(self.error).__name__}: "
                f"{self.error}{kept}"
            ) from self.error

    def pending_points(self) -> int:
        queued = sum(len(e[2]) for e in list(self._queue) if type(e) is tuple)
        return self._kept_points + queued + self._overflow.pending_points()

    def memory_held(self) -> int:
        """Estimated bytes of accepted, unstored points in memory (see tracker.client.overflow)."""
        return self._overflow.held()

    def _holds_points(self) -> bool:
        return bool(
            self._kept
            or self._head is not None
            or self._overflow.segments
            or any(type(e) is tuple for e in list(self._queue))
        )

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
            if self._stop and (
                (
                    not self._queue
                    and self._head is None
                    and not self._unsettled
                    and not self.uploads.has_work()
                )
                or self._retry_at > time.monotonic()
            ):
                return  # done, or the store is away: close() spills what is left

    def _cycle(self) -> None:
        markers: list[_Marker] = []
        with self._lock:
            if self._abandoned:  # close() took everything
                return
            while self._queue and self._head is None:  # an overflow segment goes first
                batch = self._drain(markers)
                if batch:
                    self._kept.append(batch)
                    self._kept_points += sum(len(r[2]) for r in batch)
        self._markers.extend(markers)
        if self._kept or self._spilled or self._head is not None:
            self._send_kept()
        if self.uploads.has_work() and time.monotonic() >= self._retry_at:
            self._send_uploads()
        if self.failsafe.events and self.outage is None and not self._events_refused:
            self._send_events()
        if not self._kept and not self._spilled:
            for marker in self._markers:
                marker.done.set()
            self._markers.clear()
            if not self._queue and self._head is None:
                self._settle()  # idle: bring the chart rollups up to date
        self._maybe_heartbeat()

    def _drain(self, markers: list[_Marker]) -> list[Record]:
        """Pop up to a batch from the queue, stopping at an overflow segment (``_head``):
        what follows a segment is newer than it and waits until it is stored."""
        queue = self._queue
        popleft = queue.popleft
        entries: list[Entry] = []
        tensor_seen = False
        for _ in range(min(len(queue), MAX_BATCH_RECORDS)):
            item = popleft()
            kind = type(item)
            if kind is tuple:
                entries.append(item)
                tensor_seen = tensor_seen or item[3]
            elif kind is _Marker:
                markers.append(item)
            else:
                self._head = item
                break
        if tensor_seen:
            return to_records(entries)
        return [(s, int(w * 1000), it) for s, w, it, _ in entries]

    def _send_kept(self) -> None:
        now = time.monotonic()
        if now < self._retry_at:
            self._spill_if_over_limit()
            return
        try:
            if self._spilled:
                self._replay_spill()
            while self._kept and not self._abandoned:
                batch = self._kept[0]
                rejected = self._write(self.run_id, batch)
                if self._abandoned:  # close() gave up meanwhile and spilled this batch too
                    return
                self._kept.popleft()
                n = sum(len(r[2]) for r in batch)
                self._kept_points -= n
                self._overflow.bytes_released += held_bytes(len(batch), n)
                self.points_written += n - rejected
                self.outage = None
            if self._head is not None and not self._abandoned:
                self._store_head()
        except StoreUnavailable as exc:
            self.outage = exc
            self._failures += 1
            delay = backoff_delay(self._failures, base_s=0.1, cap_s=self.max_backoff)
            self._retry_at = time.monotonic() + delay
            self._spill_if_over_limit()
            self._say_outage(exc)
            return
        self._failures = 0
        self._outage_since = None

    def _say_outage(self, exc: StoreUnavailable) -> None:
        """Say once per run (stderr and a run event) that the store has been unavailable for
        ``OUTAGE_SAID_AFTER_S``: where the points are and that they are retried."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        if now - self._outage_since < OUTAGE_SAID_AFTER_S:
            return
        kept = (
            f"the points are kept (in memory within the cap, then next to {self.spill_path}) "
            f"and retried until the store answers"
        )
        self.failsafe.report("store_outage", "writing to the store", exc, kept)

    def _send_uploads(self) -> None:
        try:
            more = self.uploads.send(UPLOAD_SLICE_S)
        except StoreUnavailable as exc:
            self.outage = exc
            self._failures += 1
            delay = backoff_delay(self._failures, base_s=0.1, cap_s=self.max_backoff)
            self._retry_at = time.monotonic() + delay
            return
        if not self._kept and not self._spilled:
            self.outage = None
            self._failures = 0
        if more:
            self._wake.set()

    def _send_events(self) -> None:
        """Store the queued failure events; kept on an outage, spilled at close if refused."""
        events = self.failsafe.take_events()
        for index, event in enumerate(events):
            try:
                self.sink.add_event(self.run_id, event["kind"], event["message"], event["data"])
            except AttemptSuperseded:
                raise
            except Exception as exc:  # StoreUnavailable: retried; another error: spilled
                self.failsafe.give_back(events[index:])
                if not isinstance(exc, StoreUnavailable):
                    self._events_refused = True
                return

    def _upload_failed(self, message: str, kept: str) -> None:
        self.failsafe.report("upload", "an upload", message, kept)

    def _store_head(self) -> None:
        """Store the overflow segment the writer has reached, a few batches per cycle."""
        overflow, seg = self._overflow, self._head
        if seg is None:
            return
        overflow.seal(seg)  # log() keeps what comes next in memory again, after the segment
        for _ in range(SEGMENT_BATCHES_PER_CYCLE):
            batch = overflow.next_batch(seg, MAX_BATCH_RECORDS)
            if batch is None:
                overflow.finish(seg)
                self._head = None
                for marker in seg.markers:
                    marker.done.set()
                break
            records, position = batch
            n = sum(len(r[2]) for r in records)
            rejected = self._write(self.run_id, records)
            if self._abandoned:  # close() gave up meanwhile and copied the segment's rest
                return
            overflow.advance(seg, position, n)
            self.points_written += n - rejected
        self._wake.set()  # go on at once (the segment's rest, or the queue behind it)

    @property
    def points_rejected(self) -> int:
        """Points the store refused and that were set aside in ``rejected_path``."""
        return self._isolator.points_rejected

    def _spill_if_over_limit(self) -> None:
        if self._kept_points <= self.max_memory_points or time.monotonic() < self._spill_retry_at:
            return
        try:
            self._spill(everything=False)
        except OSError as exc:  # the spill's disk is full too: memory holds them, past the cap
            self._spill_retry_at = time.monotonic() + SPILL_RETRY_S
            self.failsafe.report(
                "spill", "spilling the points kept through the outage", exc,
                f"they stay in memory, past the cap, until {self.spill_path} or the store "
                f"has room again",
            )  # fmt: skip

    def _spill(self, *, everything: bool) -> None:
        """Move the oldest kept batches (all with ``everything``) to the spill file. The
        file gets whole lines or nothing: on an OSError (a full disk) it is cut back to its
        old size, the batches stay kept and the error is raised."""
        with self._lock:
            if self._abandoned:  # close() spilled everything already
                return
            target = 0 if everything else self.max_memory_points // 2
            moved: list[tuple[list[Record], int]] = []  # (batch, its points), oldest first
            points = self._kept_points
            for batch in self._kept:
                if points <= target and not everything:
                    break
                n = sum(len(r[2]) for r in batch)
                moved.append((batch, n))
                points -= n
            if not moved:
                return
            data = "".join(
                json.dumps({"run_id": self.run_id, "records": b}) + "\n" for b, _ in moved
            ).encode("utf-8")
            self.spill_path.parent.mkdir(parents=True, exist_ok=True)
            append_whole(self.spill_path, data)
            for batch, n in moved:
                self._kept.popleft()
                self._kept_points -= n
                self._overflow.bytes_released += held_bytes(len(batch), n)
            self._spilled = True

    def _spill_all(self, path: Path | None = None) -> int:
        """Write every point held to ``path`` (default: the spill file) in the order logged:
        kept batches, the overflow segments (their files are deleted) and the queue between
        them. Returns the number of points written from memory (not counting segments)."""
        overflow = self._overflow
        target = self.spill_path if path is None else path
        count = 0
        with self._lock:
            overflow.seal_open()  # log() stops moving entries into it
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "a", encoding="utf-8") as fh:
                while True:
                    while self._kept:
                        batch = self._kept.popleft()
                        count += sum(len(r[2]) for r in batch)
                        fh.write(json.dumps({"run_id": self.run_id, "records": batch}) + "\n")
                    self._kept_points = 0
                    seg = self._head
                    if seg is not None:
                        count += seg.pending_points()
                        overflow.seal(seg)
                        overflow.copy_rest(seg, fh)
                        overflow.finish(seg)
                        self._markers.extend(seg.markers)
                        self._head = None
                    if not self._queue:
                        break
                    batch = self._drain(self._markers)
                    if batch:
                        self._kept.append(batch)
                fh.flush()
                os.fsync(fh.fileno())
            if path is None:
                self._spilled = True
        return count

    def _replay_spill(self) -> None:
        """Store the spill file, then delete it, unless close() gave up meanwhile: its
        message named the file to the user (replaying it again is harmless: idempotent)."""
        replay_spill_file(
            self.sink, self.spill_path, write=self._write, stop=lambda: self._abandoned,
            delete=False,
        )  # fmt: skip
        with self._lock:  # _abandon() lists the files that exist under this lock
            if self._abandoned:
                return
            self.spill_path.unlink(missing_ok=True)
            self._spilled = False

    def _settle(self) -> None:
        # One bounded step: the sink refreshes for a fraction of a second in short
        # transactions and says whether rollups are left; new batches go first.
        unsettled = False
        self._settling = True
        try:
            # An outage: the sink keeps the ranges and the next idle cycle retries.
            with contextlib.suppress(StoreUnavailable):
                unsettled = self.sink.settle() is False
        finally:
            self._unsettled = unsettled
            self._settling = False
            self._settle_calls += 1
        if unsettled:
            self._wake.set()  # the next step comes at once, not after flush_interval

    def _maybe_heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat < self.heartbeat_interval:
            return
        self._last_heartbeat = now
        # An outage: the batches are kept and retried; the next heartbeat goes out later.
        with contextlib.suppress(StoreUnavailable):
            if self.follower:
                control = self.sink.control(self.run_id)
            else:
                control = self.sink.heartbeat(self.run_id)
            if control and self.on_control is not None:
                self.on_control(control)

    def _fail(self, exc: BaseException) -> None:
        self.error = exc  # log() refuses from now on: the queue only shrinks
        markers = self._markers
        superseded = isinstance(exc, AttemptSuperseded)  # the store refuses them for good
        if superseded:
            self._kept.clear()
            self._kept_points = 0
        try:  # nothing accepted is discarded: what is left goes to the spill file
            if self._holds_points() and not self._abandoned and not superseded:
                self._spill_all()
            if not self._abandoned and not superseded:
                self.uploads.spill(self.spill_path)
        except Exception as spill_exc:
            self._spill_failure = spill_exc
        if not superseded and not self.failsafe.strict:
            self._report_failure(exc)
        self.uploads.close()
        for marker in markers:
            marker.done.set()
        # Points that log() queued meanwhile stay (not strict: for the spill at close())
        for item in list(self._queue):
            if type(item) is _Marker:
                item.done.set()
        if self._on_error is not None:
            self._on_error(exc)

    def _report_failure(self, exc: BaseException) -> None:
        """Not strict: say once that the writer stopped and where the points go."""
        if self._spill_failure is None:
            kept = kept_in(self.spill_path) + " (the points logged from now on go there too)"
        else:
            kept = f"{NOT_STORED} ({type(self._spill_failure).__name__}: {self._spill_failure})"
        self.failsafe.report("writer", "the tracker's writer thread", exc, kept)
        if self._spill_failure is None:
            events = self.failsafe.take_events()
            try:
                spill_events(self.spill_path, self.run_id, events)
            except OSError:  # kept: close() tries again
                self.failsafe.give_back(events)


def append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and fsync it, or leave the file as it was: on an OSError
    (a full disk) what was written of it is cut off again and the error is raised."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def replay_spill_file(
    sink: Sink,
    path: Path,
    *,
    write: Callable[[int, list[Record]], Any] | None = None,
    run_ids: dict[int, int] | None = None,
    stop: Callable[[], bool] | None = None,
    delete: bool = True,
) -> int:
    """Write every batch of a spill file to the sink (through ``write`` when given), then
    delete the file (unless not ``delete``). ``stop()``, asked before each line, ends the
    replay early when true; the file is then kept.

    A line that describes an offline run (:mod:`tracker.client.offline`) creates it; the
    lines after it that name its placeholder id are stored under the new id, recorded in
    ``run_ids`` (placeholder -> id) when given.

    Returns the number of points replayed. Safe to repeat: writes are idempotent (an offline
    run's creation is not: a replay interrupted after it creates the run again).
    """
    if not path.exists():
        return 0
    from tracker.client.offline import HEADER

    ids = run_ids if run_ids is not None else {}
    total = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            if not line.endswith("\n"):  # the last line, cut short by a killed process
                warnings.warn(
                    f"{path}: skipped its last line, cut short ({len(line)} bytes): the "
                    f"process writing it was killed mid-write",
                    stacklevel=2,
                )
                continue
            if stop is not None and stop():
                return total
            doc = json.loads(line)
            if HEADER in doc:  # an offline run: created now, its lines follow
                run = doc[HEADER]
                info = sink.create_run(
                    run["project"], run["name"], run["config"], run["tags"], **run["attrs"]
                )
                ids[int(doc["run_id"])] = info.id
                continue
            if int(doc["run_id"]) in ids:
                doc["run_id"] = ids[int(doc["run_id"])]
            if "artifact" in doc:  # an upload not stored (tracker.client.uploads)
                replay_artifact(sink, doc)
                continue
            if "event" in doc:  # a failure of the tracker (tracker.client.failsafe)
                event = doc["event"]
                sink.add_event(int(doc["run_id"]), event["kind"], event["message"], event["data"])
                continue
            if "checkpoint" in doc:  # a checkpoint saved while the store was away
                c = doc["checkpoint"]
                sink.add_checkpoint(
                    int(doc["run_id"]), c["step"], c["path"], c["bytes"], c["sha256"], c["metrics"]
                )
                continue
            if "records" not in doc:  # a run's final status (tracker.client.final_status)
                continue
            records = [(int(s), int(w), items) for s, w, items in doc["records"]]
            if write is None:
                sink.write_metrics(int(doc["run_id"]), records)
            else:
                write(int(doc["run_id"]), records)
            total += sum(len(r[2]) for r in records)
    if delete:
        path.unlink()
    return total
