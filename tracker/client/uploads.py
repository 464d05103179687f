"""The artifact and media upload queue, drained by the writer thread (:mod:`.writer`).

* ``put()`` (the training thread) appends a :class:`~tracker.client.media.Pending` entry:
  the data is held as given (a numpy copy, a detached tensor, bytes); converting and
  encoding happen in the encoder thread in the idle scheduling class
  (:mod:`tracker.client.encoder`, started by the first entry), then the writer thread
  stores the result with ``sink.put_artifact``, in the order logged.
* Memory is bounded by a byte budget (``max_media_mb``, default ``$TRACKER_MAX_MEDIA_MB``
  or 512 MiB). Past it, ``put()`` waits up to ``MEDIA_WAIT_S`` for the writer to make room
  (not at all while the store is unavailable), the writer building entries itself meanwhile
  as during a flush (below); if there is still none, the entry is built
  in the calling thread and its files go to ``<spill>.media/`` on disk, from where the
  writer uploads (and deletes) them in order. So a loop that logs faster than the writer
  encodes slows down briefly, and an outage never grows memory.
* ``StoreUnavailable`` from the sink (a passing outage) is retried with the writer's
  backoff, the entry staying first (storing an artifact is idempotent: same path, same
  bytes). Any other error fails that entry only; later entries go on. With ``on_failure``
  (the run is not strict, see :mod:`tracker.client.failsafe`) the failure is reported
  there, and the files an upload could not store are written to ``<spill>.media/`` with a
  line each in the spill file (``tracker db replay`` uploads them once the cause is fixed;
  an entry that could not be built, or that the store refused as ``InvalidInput``, is not
  stored). Without it (strict) the failure is
  recorded in ``failures`` and the next call on the run raises ``UploadError`` naming it.
* ``flush()``/``finish()`` wait for the entries logged before them (a marker, as for
  points); meanwhile the writer builds, at the normal priority, the entries the encoder has
  not started, and one it has not finished within ``HANDOFF_S`` (the encoder's result is
  then unused), so a busy machine that leaves the idle-class encoder no CPU does not hold
  ``finish()`` up. When ``finish()`` gives up on an unavailable store, or the writer fails, the
  entries left are built and written to ``<spill>.media/`` with a line each in the spill
  file, which ``tracker db replay`` uploads.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.client.encoder import Encoder, encoder_nice
from tracker.client.failsafe import NOT_STORED, kept_in
from tracker.client.media import Artifact, Pending
from tracker.errors import AttemptSuperseded, InvalidInput, StoreUnavailable, UploadError

MEDIA_WAIT_S = 2.0  # put(): how long a call over the byte budget waits for room
DEFAULT_MAX_MEDIA_MB = 512.0
HANDOFF_S = 0.05  # send() during a flush: how long the encoder may take to finish an entry

__all__ = ["DEFAULT_MAX_MEDIA_MB", "MEDIA_WAIT_S", "Uploads", "media_budget_bytes"]


def media_budget_bytes(max_media_mb: float | None) -> int:
    """The byte budget: the argument, else ``$TRACKER_MAX_MEDIA_MB``, else 512 MiB."""
    raw: Any = max_media_mb
    if raw is None:
        raw = os.environ.get("TRACKER_MAX_MEDIA_MB") or DEFAULT_MAX_MEDIA_MB
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise InvalidInput(
            f"max_media_mb={raw!r}: the memory budget of media not yet stored is a number "
            f"of MiB > 0 (also $TRACKER_MAX_MEDIA_MB)",
            field="max_media_mb",
        )
    return int(value * 1024 * 1024)


class Uploads:
    def __init__(
        self, sink: Any, run_id: int, spill_path: Path, budget_bytes: int,
        wait_s: float = MEDIA_WAIT_S, on_built: Callable[[], None] | None = None,
        on_failure: Callable[[str, str], None] | None = None,
    ) -> None:  # fmt: skip
        self.sink = sink
        self.run_id = run_id
        self.spill_file = spill_path
        self.spill_dir = spill_path.with_suffix(".media")
        # (what failed and why, where its data went); None: strict, raised by the next call
        self.on_failure = on_failure
        self.budget_bytes = budget_bytes
        self.wait_s = wait_s
        self.held_bytes = 0
        self.stored = 0  # artifacts stored (the progress close() watches)
        self.spilled_on_put = 0  # entries built in the caller because the budget was full
        self.failures: list[str] = []  # raised by the next call on the run, then cleared
        self._queue: deque[Any] = deque()  # Pending entries and flush markers, in order
        self._built: list[Artifact] | None = None  # artifacts of the head entry left to store
        self._cond = threading.Condition()
        self._names = itertools.count()
        self.closed = False  # the writer stopped: put() no longer waits for room
        self._on_built = on_built or (lambda: None)  # wakes the writer
        self._nice = encoder_nice()  # checked now: a bad value fails init(), not a thread
        self._encoder: Encoder | None = None  # started by the first entry
        self._encoder_waiting = False
        # While a flush marker is queued or a put() waits for room, the writer builds too.
        self._markers = 0
        self._room_waiters = 0

    # ------------------------------------------------------------- training side

    def put(self, entry: Pending, *, outage: bool) -> None:
        need = entry.nbytes
        with self._cond:
            if self.held_bytes and self.held_bytes + need > self.budget_bytes:
                if not outage and not self.closed:
                    self._room_waiters += 1  # the writer builds entries too meanwhile
                    self._on_built()  # wakes it
                    try:
                        self._cond.wait_for(
                            lambda: (
                                self.held_bytes + need <= self.budget_bytes
                                or not self.held_bytes
                                or self.closed
                            ),
                            timeout=self.wait_s,
                        )
                    finally:
                        self._room_waiters -= 1
                full = bool(self.held_bytes) and self.held_bytes + need > self.budget_bytes
            else:
                full = False
            if not full:
                self.held_bytes += need
                self._queue.append(entry)
                if self._encoder_waiting:
                    self._cond.notify_all()
                if self._encoder is None:
                    self._encoder = Encoder(self, self._entry_built, self._nice)
                return
        try:
            entry = self._to_disk(entry)  # encoded here, outside the lock the writer needs
        except Exception as exc:  # a full disk, an encoding error: not the caller's input
            if self.on_failure is None:
                raise
            self.on_failure(f"{entry.what}: {type(exc).__name__}: {exc}", NOT_STORED)
            return
        with self._cond:
            self._queue.append(entry)
            if self._encoder_waiting:
                self._cond.notify_all()

    def put_marker(self, marker: Any) -> None:
        with self._cond:
            if self.closed:  # no writer to reach it
                marker.done.set()
            else:
                self._queue.append(marker)
                self._markers += 1

    def raise_failures(self) -> None:
        """Raise ``UploadError`` for the uploads that failed since the last call."""
        with self._cond:
            failures, self.failures[:] = list(self.failures), []
        if failures:
            more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
            raise UploadError(
                f"{len(failures)} upload(s) of run {self.run_id} failed and were not stored: "
                + "; ".join(failures[:3])
                + more
            )

    def has_work(self) -> bool:
        return bool(self._queue)

    def pending(self) -> int:
        return sum(1 for e in list(self._queue) if type(e) is Pending)

    # -------------------------------------------------------------- encoder side

    def next_to_build(self, ahead: int) -> Pending | None:
        """The first entry nobody builds yet, once fewer than ``ahead`` built entries wait
        for the writer (blocks); None once closed."""
        with self._cond:
            while not self.closed:
                entry, claimed = self._claim(ahead)
                if entry is not None:
                    return entry
                # put() wakes it only when it waits for a new entry; the writer's _done()
                # (notify_all) when it waits for room
                self._encoder_waiting = claimed < ahead
                self._cond.wait()
                self._encoder_waiting = False
            return None

    def _claim(self, ahead: int) -> tuple[Pending | None, int]:
        """The first unclaimed entry, claimed now, else None and how many are claimed (up to
        ``ahead``). A function of its own, so that no variable of the waiting encoder
        thread refers to an entry the writer then stores: the thread would free it, with
        its tensor (see :mod:`tracker.client.encoder`)."""
        claimed = 0
        for item in self._queue:
            if type(item) is not Pending:
                continue
            if not item.claimed:
                item.claimed = True
                return item, claimed
            claimed += 1
            if claimed >= ahead:
                break
        return None, claimed

    # --------------------------------------------------------------- writer side

    def send(self, budget_s: float) -> bool:
        """Store entries for about ``budget_s`` seconds; True when some are left.

        Raises:
            StoreUnavailable: the sink is away; the entry stays first and is retried.
            AttemptSuperseded: this job attempt was taken over (the writer stops).
        """
        end = time.monotonic() + budget_s
        while self._queue:
            head = self._queue[0]
            if type(head) is not Pending:
                with self._cond:
                    if self._queue and self._queue[0] is head:
                        self._queue.popleft()
                        self._markers -= 1
                head.done.set()
                continue
            if self._built is None:
                if head.built is None and head.failed is None and self._encoding():
                    if not self._markers and not self._room_waiters:
                        return False  # the encoder builds it, and wakes the writer when done
                    self._take_or_wait(head)  # someone waits: build it here if need be
                if head.failed is not None:
                    self._done(head, failure=head.failed)
                    continue
                if head.built is not None:
                    self._built = list(head.built)
                else:
                    try:
                        self._built = head.build()
                    except Exception as exc:
                        self._done(head, failure=exc)
                        continue
            while self._built:
                art = self._built[0]
                try:
                    self._put(art)
                except (StoreUnavailable, AttemptSuperseded):
                    raise
                except Exception as exc:
                    # Kept for the replay, unless the store refused the file itself (a replay
                    # would be refused the same way and stop there)
                    keep = self.on_failure is not None and not isinstance(exc, InvalidInput)
                    kept = self._keep(self._built) if keep else NOT_STORED
                    self._done(head, failure=exc, artifact=art, kept=kept)
                    break
                if not self._queue or self._queue[0] is not head:
                    return bool(self._queue)  # spilled meanwhile (finish() gave up)
                self._built.pop(0)
                self.stored += 1
                if art.temporary and isinstance(art.data, Path):
                    art.data.unlink(missing_ok=True)
            else:
                self._done(head)
            if time.monotonic() >= end:
                return bool(self._queue)
        return False

    def _encoding(self) -> bool:
        return self._encoder is not None and self._encoder.thread.is_alive()

    def _take_or_wait(self, head: Pending) -> None:
        """While a flush or a ``put()`` waits: claim ``head`` for the writer if the encoder
        has not, else give the encoder ``HANDOFF_S`` to finish it (if it has not by then,
        the writer builds it and the encoder's late result is unused)."""
        with self._cond:
            if not head.claimed:
                head.claimed = True
            else:
                self._cond.wait_for(
                    lambda: head.built is not None or head.failed is not None, HANDOFF_S
                )

    def _entry_built(self) -> None:
        """The encoder built an entry: wake ``_take_or_wait`` and the writer."""
        with self._cond:
            self._cond.notify_all()
        self._on_built()

    def _put(self, art: Artifact) -> None:
        self.sink.put_artifact(
            self.run_id, art.path, art.data, media_type=art.media_type, step=art.step,
            meta=art.meta,
        )  # fmt: skip

    def _done(
        self, entry: Pending, *, failure: BaseException | None = None,
        artifact: Artifact | None = None, kept: str = NOT_STORED,
    ) -> None:  # fmt: skip
        text = ""
        if failure is not None:
            where = f" ({artifact.path})" if artifact is not None else ""
            text = f"{entry.what}{where}: {type(failure).__name__}: {failure}"
        with self._cond:
            if self._queue and self._queue[0] is entry:
                self._queue.popleft()
                self.held_bytes -= entry.nbytes
            self._built = None
            if text and self.on_failure is None:
                self.failures.append(text)
            self._cond.notify_all()
        if text and self.on_failure is not None:
            self.on_failure(text, kept)

    def _keep(self, arts: list[Artifact] | None) -> str:
        """Write the files an upload could not store to the spill file; where they went."""
        try:
            self.spill_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.spill_file, "a", encoding="utf-8") as fh:
                self._write_lines(fh, arts or [])
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:  # the disk refuses them too
            return NOT_STORED
        return kept_in(self.spill_file)

    def close(self) -> None:
        """The writer stopped: wake a ``put()`` waiting for room, and flush markers."""
        with self._cond:
            self.closed = True
            for item in self._queue:
                if type(item) is not Pending:
                    item.done.set()
            self._cond.notify_all()
        # The encoder may be finishing an entry the writer built too (HANDOFF_S): the
        # process must not exit while it is inside a torch op (Encoder.stop).
        encoder = self._encoder
        if encoder is not None and encoder.thread is not threading.current_thread():
            encoder.stop()

    # ------------------------------------------------------------------- spilling

    def _to_disk(self, entry: Pending) -> Pending:
        """Build ``entry`` now and keep its files on disk (the budget is full)."""
        arts = [self._file_of(a) for a in entry.build()]
        self.spilled_on_put += 1
        return Pending(entry.what, lambda: list(arts), 0)

    def _file_of(self, art: Artifact) -> Artifact:
        if isinstance(art.data, Path):
            return art
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        target = self.spill_dir / f"{os.getpid()}-{next(self._names)}-{Path(art.path).name}"
        target.write_bytes(art.data)
        return Artifact(art.path, target, art.media_type, art.step, art.meta, temporary=True)

    def spill(self, spill_file: Path) -> int:
        """Write every entry left to ``<spill>.media/`` and a line each to ``spill_file``
        (``tracker db replay`` uploads them). Returns the number of files. An entry that
        cannot be built is recorded in ``failures``."""
        with self._cond:
            entries = [e for e in self._queue if type(e) is Pending]
            for item in self._queue:
                if type(item) is not Pending:
                    item.done.set()  # a flush waiting on it: what it waits for is spilled
            first_built = self._built
            self._queue.clear()
            self._markers = 0
            self._built = None
            self.held_bytes = 0
            self._cond.notify_all()
        count = 0
        if not entries:
            return 0
        spill_file.parent.mkdir(parents=True, exist_ok=True)
        with open(spill_file, "a", encoding="utf-8") as fh:
            for index, entry in enumerate(entries):
                try:
                    if index == 0 and first_built:
                        arts = first_built
                    elif entry.failed is not None:
                        raise entry.failed
                    else:
                        arts = entry.built if entry.built is not None else entry.build()
                except Exception as exc:
                    text = f"{entry.what}: {type(exc).__name__}: {exc}"
                    if self.on_failure is None:
                        self.failures.append(text)
                    else:
                        self.on_failure(text, NOT_STORED)
                    continue
                count += self._write_lines(fh, arts)
            fh.flush()
            os.fsync(fh.fileno())
        return count

    def _write_lines(self, fh: Any, arts: list[Artifact]) -> int:
        """A spill line for each of ``arts``, its bytes kept under ``<spill>.media/``."""
        for art in arts:
            kept = self._file_of(art)
            doc = {
                "run_id": self.run_id,
                "artifact": {
                    "path": kept.path,
                    "file": str(kept.data),
                    "temporary": kept.temporary,
                    "media_type": kept.media_type,
                    "step": kept.step,
                    "meta": kept.meta,
                },
            }
            fh.write(json.dumps(doc) + "\n")
        return len(arts)


def replay_artifact(sink: Any, doc: dict[str, Any]) -> None:
    """Upload one spilled artifact line (see :meth:`Uploads.spill`), then delete its file
    if it is one of ours."""
    art = doc["artifact"]
    path = Path(art["file"])
    if not path.exists():
        raise UploadError(f"spilled artifact {art['path']!r}: its file {path} is gone")
    sink.put_artifact(
        int(doc["run_id"]), art["path"], path, media_type=art.get("media_type"),
        step=art.get("step"), meta=art.get("meta") or {},
    )  # fmt: skip
    if art.get("temporary"):
        path.unlink(missing_ok=True)
