"""Poison records: a batch the store refuses is written in halves, down to the records it
refuses, which are set aside; everything else is stored. Used by the writer and by
``tracker db replay``.

* A batch the sink refuses with anything but ``StoreUnavailable`` is retried in halves;
  each record refused on its own is appended to the rejected file (``<spill>.rejected.jsonl``:
  the spill format plus ``"error"``, the error's type and message) and a ``RuntimeWarning``
  names its step, keys and the file. The halves stored meanwhile are stored once: writes
  are idempotent.
* What is not a poison record is raised, not set aside: ``StoreUnavailable`` (the caller keeps
  the batch and retries), more than ``MAX_REJECTED`` refused records in one batch, and a
  batch refused whole -- nothing tells a poison record from a broken sink then -- unless
  ``trust_after_success`` is set and a write through this isolator has already succeeded
  (a replay, where the store has just proven it takes points: a lone bad record is set aside).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from tracker.client.sinks import Record, Sink
from tracker.errors import AttemptSuperseded, StoreUnavailable

MAX_REJECTED = 10  # records of one batch refused past this: the error is not a poison record


class Isolator:
    """Writes batches to ``sink``, setting refused records aside in ``rejected_path``."""

    def __init__(
        self, sink: Sink, rejected_path: Path, *, trust_after_success: bool = False
    ) -> None:
        self.sink = sink
        self.rejected_path = rejected_path
        self.trust_after_success = trust_after_success
        self.points_rejected = 0
        self.errors: list[str] = []  # one per refused record: "TypeName: message"
        self._stored_any = False

    def write(self, run_id: int, batch: list[Record]) -> int:
        """Store ``batch``; records the sink refuses are set aside (see the module doc).

        Returns the number of points set aside.

        Raises:
            StoreUnavailable: the sink is away (the caller keeps the whole batch; the halves
                already stored are written again later, idempotently).
            Exception: the sink's error, when it refuses every record of the batch (see the
                module doc) or more than ``MAX_REJECTED`` of them.
        """
        try:
            self.sink.write_metrics(run_id, batch)
            self._stored_any = True
            return 0
        except (StoreUnavailable, AttemptSuperseded):  # no record's fault: never bisected
            raise
        except Exception as exc:
            refused: list[tuple[Record, BaseException]] = []
            trusted = self.trust_after_success and self._stored_any
            self._bisect(run_id, batch, exc, refused)
            if len(refused) == len(batch) and not trusted:
                raise exc from None  # nothing stored: the sink's error, not a record's
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
                self._stored_any = True
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
            self.errors.append(f"{type(exc).__name__}: {exc}")
            warnings.warn(
                f"run {run_id}: the store refused the record at step {record[0]} "
                f"({', '.join(sorted(record[2]))}): {type(exc).__name__}: {exc}; "
                f"set aside in {self.rejected_path}, the rest of its batch is stored",
                RuntimeWarning,
                stacklevel=1,
            )
