"""The memory cap of the log buffer: past it, accepted points go to disk, not to RAM.

Contract:

* The points that ``log()`` accepted and the writer has not stored yet are held in memory up
  to a cap: ``tracker.init(..., max_memory_mb=256)`` or ``TRACKER_MAX_MEMORY_MB`` (MiB;
  the argument wins). The size is an estimate, never a ``sizeof`` walk: ``ENTRY_BYTES`` per
  ``log()`` call plus ``KEY_BYTES`` per metric in it (measured with ``tracemalloc`` on
  CPython 3.11 for dicts of 1, 5 and 16 float metrics: 344, 439 and 983 bytes per call; the
  formula gives 300, 500 and 1,050). It is counted in by ``log()`` and out when the writer
  stored or spilled the points, or when they were moved to disk here.
* Past the cap ``log()`` opens a *segment*: it puts a marker in the queue and creates
  ``<spill file stem>.overflow-N.jsonl`` next to the run's spill file (the spill format, so
  ``tracker db replay`` reads it). From then on each entry that ``log()`` appends is moved
  from the tail of the queue into the segment, written in chunks of ``CHUNK_RECORDS``
  records (one-element GPU tensors are converted per chunk, one sync per device), so memory
  stops growing. ``log()`` never waits for the writer: the writer holds the segment's lock
  only to flip a flag; past the cap, a ``log()`` may wait for another thread's ``log()``
  writing a chunk (the lock makes each thread's entry moved before its next one).
* The writer drains the queue up to the marker (the older points), then *seals* the segment:
  what ``log()`` appends from then on stays in memory, after the segment. The writer replays
  the segment's file into the store, deletes it and goes on with the queue; a new segment
  opens if the cap is passed again meanwhile. The store sees every point in the order of
  the ``log()`` calls (each thread's own order; the last value of a (key, step) wins), each
  once. A flush marker that was moved into a segment is released when the segment is stored.
* Failure modes: a disk error (full, read-only) while writing a chunk keeps the chunk in
  memory (the cap is then exceeded; one warning names the file and the error) and the next
  chunk retries; the writer stores such a chunk from memory. After SIGKILL the segment files
  already written stay on disk and ``tracker db replay FILE`` stores them (the unwritten
  chunk, at most ``CHUNK_RECORDS`` calls, is lost with the rest of memory). Counters are
  updated without a lock on the ``log()`` path: two threads logging at the same instant can
  lose one entry's bytes from the estimate (never points), so the cap is approximate by a
  few hundred bytes, never by a drift upward.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections import deque
from pathlib import Path
from typing import Any

from tracker.client.sinks import Record
from tracker.client.values import is_tensor, tensors_to_floats
from tracker.errors import InvalidInput

ENTRY_BYTES = 250  # one log() call held in memory: the tuple, its dict, step and wall time
KEY_BYTES = 50  # one more metric in that call's dict: the slot and its float
CHUNK_RECORDS = 2_000  # log() calls per line of a segment file
# The share of the cap kept free of queued points: the writer's batch in flight (its records
# and the driver's parameters), the chunk being encoded and the allocator's slack also live
# in the process, so the queue's budget is the cap less this share (bench_memory.py: the
# growth of RSS stays within the cap).
RESERVE_SHARE = 1 / 6
DEFAULT_MAX_MEMORY_MB = 256.0
ENV_MAX_MEMORY_MB = "TRACKER_MAX_MEMORY_MB"
MIB = 1024 * 1024

# (step, wall_time, {key: value}, has_tensor), as the writer's queue holds them
Entry = tuple[int, float, dict[str, Any], bool]


def memory_cap_bytes(max_memory_mb: float | None) -> int:
    """The cap in bytes: ``max_memory_mb`` if given, else ``$TRACKER_MAX_MEMORY_MB``, else 256.

    Raises:
        InvalidInput: the value is not a finite number of MiB greater than 0 (the message
            names the argument or the environment variable).
    """
    field = "max_memory_mb"
    value: Any = max_memory_mb
    if value is None:
        raw = os.environ.get(ENV_MAX_MEMORY_MB, "").strip()
        if not raw:
            return int(DEFAULT_MAX_MEMORY_MB * MIB)
        field = ENV_MAX_MEMORY_MB
        try:
            value = float(raw)
        except ValueError:
            value = raw
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(
            f"{field}={value!r} is not a number: the memory cap of unstored points, in MiB "
            f"(default {DEFAULT_MAX_MEMORY_MB:g})",
            field=field,
        )
    if not math.isfinite(value) or value <= 0:
        raise InvalidInput(
            f"{field}={value!r}: the memory cap of unstored points must be a number of MiB "
            f"greater than 0 (default {DEFAULT_MAX_MEMORY_MB:g})",
            field=field,
        )
    return max(1, int(value * MIB))


def held_bytes(calls: int, points: int) -> int:
    """The estimated memory of ``calls`` log() calls holding ``points`` metrics in all."""
    return calls * ENTRY_BYTES + points * KEY_BYTES


def to_records(entries: list[Entry]) -> list[Record]:
    """Queue entries as sink records ``(step, wall_ms, items)``, GPU tensors converted with
    one sync per device."""
    tensors: list[Any] = []
    for entry in entries:
        if entry[3]:
            tensors.extend(v for v in entry[2].values() if is_tensor(v))
    if tensors:
        floats = iter(tensors_to_floats(tensors))
        return [
            (s, int(w * 1000), {k: next(floats) if is_tensor(v) else v for k, v in it.items()})
            if t
            else (s, int(w * 1000), it)
            for s, w, it, t in entries
        ]
    return [(s, int(w * 1000), it) for s, w, it, _ in entries]


class Segment:
    """The points of one overflow episode: a file of chunks, plus the chunk being filled."""

    __slots__ = (
        "_fh",
        "buffer",
        "markers",
        "offset",
        "path",
        "points_buffered",
        "points_on_disk",
        "points_replayed",
        "sealed",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buffer: list[Entry] = []  # moved out of the queue, not yet written
        self.markers: list[Any] = []  # flush markers moved with the entries
        self.sealed = False
        self.offset = 0  # the writer's replay position in the file (bytes)
        self.points_on_disk = 0
        self.points_buffered = 0
        self.points_replayed = 0
        self._fh: Any = None

    def pending_points(self) -> int:
        return self.points_on_disk + self.points_buffered - self.points_replayed

    def __repr__(self) -> str:
        state = "sealed" if self.sealed else "open"
        return f"<overflow segment {self.path.name} {state}, {self.pending_points()} points>"


class Overflow:
    """The memory budget of one writer's queue and its segments (see the module doc)."""

    def __init__(self, run_id: int, spill_path: Path, cap_bytes: int) -> None:
        self.run_id = run_id
        self.cap_bytes = cap_bytes
        self.budget_bytes = cap_bytes - int(cap_bytes * RESERVE_SHARE)  # for queued points
        # Three counters, each written by one side only, so no update is ever lost to a
        # race between log() and the writer: in (log), released (writer), diverted (lock).
        self.bytes_in = 0
        self.bytes_released = 0
        self.bytes_diverted = 0
        self.open: Segment | None = None  # the segment log() moves entries into
        self.segments: list[Segment] = []  # opened and not yet stored
        self.segments_opened = 0
        self.points_diverted = 0
        self.lock = threading.Lock()
        self._stem = spill_path.with_suffix("")
        self._warned = False

    def held(self) -> int:
        """Estimated bytes of accepted points in memory (queue and writer)."""
        return self.bytes_in - self.bytes_released - self.bytes_diverted

    def pending_points(self) -> int:
        return sum(seg.pending_points() for seg in self.segments)

    # ---------------------------------------------------------------- log() side

    def divert(self, queue: deque[Any]) -> None:
        """Called by ``log()`` after its append when a segment is open or the cap is passed:
        open a segment, or move the queue's tail into the open one. Never waits for the
        writer (see ``seal``); may wait for another thread's ``divert``."""
        lock = self.lock
        lock.acquire()
        try:
            seg = self.open
            if seg is None:
                if self.held() > self.budget_bytes:
                    self._open_segment(queue)
                return
            # The tail after the marker is newer than everything in the segment; only the
            # lock holder pops from the right, the writer never pops past an open marker,
            # and every other thread has at most one entry there (its divert waits here).
            moved: list[Any] = []
            while queue and queue[-1] is not seg:
                moved.append(queue.pop())
            if not moved:
                return
            moved.reverse()
            calls = points = 0
            buffer = seg.buffer
            for item in moved:
                if type(item) is tuple:
                    buffer.append(item)
                    calls += 1
                    points += len(item[2])
                else:  # a flush marker: released once the segment is stored
                    seg.markers.append(item)
            self.bytes_diverted += held_bytes(calls, points)
            seg.points_buffered += points
            self.points_diverted += points
            if len(buffer) >= CHUNK_RECORDS:
                self._write_chunk(seg)
        finally:
            lock.release()

    def _open_segment(self, queue: deque[Any]) -> None:
        self.segments_opened += 1
        path = Path(f"{self._stem}.overflow-{self.segments_opened}.jsonl")
        seg = Segment(path)
        self.open = seg
        self.segments.append(seg)
        queue.append(seg)

    def _write_chunk(self, seg: Segment) -> None:
        """Append the segment's buffer to its file as one line (lock held, or sealed)."""
        if not seg.buffer:
            return
        records = to_records(seg.buffer)
        points = sum(len(r[2]) for r in records)
        line = json.dumps({"run_id": self.run_id, "records": records}) + "\n"
        try:
            if seg._fh is None:
                seg.path.parent.mkdir(parents=True, exist_ok=True)
                seg._fh = open(seg.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
            seg._fh.write(line)
            seg._fh.flush()  # whole chunks reach the OS: a SIGKILL keeps them
        except OSError as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"run {self.run_id}: could not write points past the memory cap to "
                    f"{seg.path} ({type(exc).__name__}: {exc}); they stay in memory, past "
                    f"the cap, and are retried",
                    RuntimeWarning,
                    stacklevel=1,
                )
            return
        seg.buffer = []
        seg.points_buffered -= points
        seg.points_on_disk += points

    # -------------------------------------------------------------- writer side

    def seal(self, seg: Segment) -> None:
        """End the segment's episode (writer side): later entries stay in the queue, after
        it; its last chunk goes to its file. The lock is held only to flip the state, so a
        ``log()`` never waits for this file write."""
        with self.lock:
            if seg.sealed:
                return
            seg.sealed = True
            if self.open is seg:
                self.open = None
        self._write_chunk(seg)  # no log() touches a sealed segment
        if seg._fh is not None:
            seg._fh.close()
            seg._fh = None

    def seal_open(self) -> None:
        """Seal the open segment, if any (before everything is written to the spill file)."""
        seg = self.open
        if seg is not None:
            self.seal(seg)

    def next_batch(self, seg: Segment, max_records: int) -> tuple[list[Record], int] | None:
        """The next records of a sealed segment from its replay position, and the position
        after them (-1: the chunk kept in memory); None when everything is stored."""
        if seg.offset >= 0 and seg.path.exists():
            records: list[Record] = []
            with open(seg.path, "rb") as fh:
                fh.seek(seg.offset)
                while len(records) < max_records:
                    line = fh.readline()
                    if not line:
                        break
                    if line.strip():
                        doc = json.loads(line)
                        records.extend((int(s), int(w), it) for s, w, it in doc["records"])
                end = fh.tell()
            if records:
                return records, end
        if seg.buffer:
            return to_records(seg.buffer), -1
        return None

    def advance(self, seg: Segment, position: int, points: int) -> None:
        """Record that the batch before ``position`` is stored."""
        if position < 0:  # the chunk that never reached the file
            seg.points_buffered = 0
            seg.buffer = []
            seg.offset = -1
        else:
            seg.points_replayed += points
            seg.offset = position

    def copy_rest(self, seg: Segment, out: Any) -> int:
        """Write what is left of a sealed segment to ``out`` (a spill file open for text);
        returns its points. The segment is done afterwards (``finish``)."""
        total = 0
        while True:
            batch = self.next_batch(seg, 10_000)
            if batch is None:
                return total
            records, position = batch
            out.write(json.dumps({"run_id": self.run_id, "records": records}) + "\n")
            points = sum(len(r[2]) for r in records)
            self.advance(seg, position, points)
            total += points

    def finish(self, seg: Segment) -> None:
        """The segment is stored (or copied to the spill file): delete its file."""
        if seg._fh is not None:
            seg._fh.close()
            seg._fh = None
        seg.path.unlink(missing_ok=True)
        if seg in self.segments:
            self.segments.remove(seg)
