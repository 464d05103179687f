"""An offline run: the store cannot be reached when ``tracker.init()`` creates the run.

Contract:

* Not strict (:mod:`tracker.client.failsafe`), a ``tracker.init()`` whose store cannot be
  opened or cannot create the run (a SQLite file that cannot be written or stays locked past
  its retries, a PostgreSQL server that is down, a ``TRACKER_URI`` dashboard that does not
  answer or answers garbage) returns an *offline* run instead of raising. The caller's own bad
  input (``InvalidInput``: a project name, a config value, a tag, a URI of no known kind)
  still raises; strict, every failure raises as it always did.
* The offline run's id is ``OFFLINE_RUN_ID`` (0: the store's ids start at 1) and
  ``run.offline`` is True. Everything it logs -- points, the tracker's failure events,
  checkpoint rows, images and other uploads, its final status -- goes to one spill file,
  ``<spill_dir>/run-0-<pid>-<ms>.jsonl`` (also where the writer spills what it holds, should
  the file system fail), whose first line describes the run to create::

      {"run_id": 0, "offline_run": {"project": "p", "name": null, "config": {...},
       "tags": [], "attrs": {"host": "h", "pid": 7, "git_commit": null,
       "command": [...], "now": 1764567890.5}}}

  ``tracker db replay FILE`` creates that run (with its original start time), then stores
  the lines after it under the new id (:func:`tracker.client.writer.replay_spill_file`).
  One warning line on stderr names the failure and the file.
* No reconnection is attempted during the run: the replay stores it later. Console output is
  not captured.

Failure modes: a spill file that cannot be written (a full or read-only disk) raises
``OSError`` from the sink's methods; the writer reports it once like any store failure and
the data is lost. A replay interrupted after it created the run creates it again when it is
repeated (the points are not lost; the first copy stays, partly stored).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracker.client import final_status
from tracker.client.final_status import FinalStatus
from tracker.client.sinks import Record
from tracker.entities import CheckpointInfo, RunInfo

OFFLINE_RUN_ID = 0  # the id of a run that the store has not created (ids start at 1)
HEADER = "offline_run"  # the field of a spill file's line that describes the run to create


class OfflineSink:
    """A sink that appends everything to the offline run's spill file ``path`` (see the
    module docstring). Thread-safe; never contacts a store.

    Raises (from each method): OSError: the file cannot be written.
    """

    offline = True

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = self.spill_path = path  # the writer spills into the same file
        self.media_dir = path.with_suffix(".media")
        self._lock = threading.Lock()
        self._files = 0
        self._append({"run_id": OFFLINE_RUN_ID, HEADER: run}, sync=True)

    def _append(self, doc: dict[str, Any], *, sync: bool = False) -> None:
        line = json.dumps(doc) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())

    def create_run(self, *args: Any, **kwargs: Any) -> RunInfo:
        raise NotImplementedError("an offline sink creates no run")

    def start_run(self, run_id: int, config: dict[str, Any] | None, **attrs: Any) -> RunInfo:
        raise NotImplementedError("an offline sink starts no run")

    def write_metrics(self, run_id: int, records: Sequence[Record]) -> None:
        if records:
            self._append({"run_id": run_id, "records": [list(r) for r in records]})

    def settle(self) -> bool:
        return True

    def heartbeat(self, run_id: int) -> dict[str, Any] | None:
        return None  # nobody to ask anything of an offline run

    def control(self, run_id: int) -> dict[str, Any] | None:
        return None

    def report_profile(self, run_id: int, profile_id: int, body: dict[str, Any]) -> None:
        return None

    def finish_run(self, run_id: int, status: str, **attrs: Any) -> None:
        final = FinalStatus(run_id, status, attrs.get("exit_code"), attrs.get("error"), time.time())
        with self._lock:
            final_status.append(self.path, final)

    def add_event(
        self, run_id: int, kind: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        event = {"kind": kind, "message": message, "data": data or {}}
        self._append({"run_id": run_id, "event": event}, sync=True)

    def add_checkpoint(
        self, run_id: int, step: int, path: str, size: int, sha256: str,
        metrics: dict[str, Any] | None = None,
    ) -> CheckpointInfo:  # fmt: skip
        row = {"step": step, "path": path, "bytes": size, "sha256": sha256,
               "metrics": metrics or {}}  # fmt: skip
        self._append({"run_id": run_id, "checkpoint": row}, sync=True)
        return CheckpointInfo(0, run_id, step, path, size, sha256, metrics or {}, "ok", time.time())

    def list_checkpoints(self, run_id: int) -> list[CheckpointInfo]:
        return []

    def set_checkpoint_state(self, checkpoint_id: int, state: str) -> None:
        return None

    def put_artifact(
        self, run_id: int, path: str, data: bytes | Path, *, media_type: str | None = None,
        step: int | None = None, meta: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """Keep a copy of the file under ``<spill>.media/`` and a line the replay uploads."""
        with self._lock:
            self._files += 1
            number = self._files
        self.media_dir.mkdir(parents=True, exist_ok=True)
        kept = self.media_dir / f"{number:06d}-{Path(path).name or 'file'}"
        if isinstance(data, bytes | bytearray | memoryview):
            kept.write_bytes(bytes(data))
        else:
            shutil.copyfile(data, kept)
        art = {"path": path, "file": str(kept), "temporary": True, "media_type": media_type,
               "step": step, "meta": meta or {}}  # fmt: skip
        self._append({"run_id": run_id, "artifact": art})

    def close(self) -> None:
        return None


def header(
    project: str, name: str | None, config: dict[str, Any], tags: Sequence[str], **attrs: Any
) -> dict[str, Any]:
    """The first line's run (``attrs``: host, pid, git_commit, command), started now."""
    return {"project": project, "name": name, "config": config, "tags": list(tags),
            "attrs": {**attrs, "now": time.time()}}  # fmt: skip


ENV_SPILL_DIR = "TRACKER_SPILL_DIR"
DEFAULT_SPILL_DIR = ".tracker/spill"


def spill_dir_of(spill_dir: str | os.PathLike[str] | None) -> Path:
    """Where a run spills: ``spill_dir`` if given, else ``$TRACKER_SPILL_DIR``, else
    ``.tracker/spill``. Put it on another filesystem than a SQLite store's, so a full disk
    there leaves room for what the store cannot take."""
    return Path(spill_dir or os.environ.get(ENV_SPILL_DIR) or DEFAULT_SPILL_DIR)


def spill_file(spill_dir: str | os.PathLike[str]) -> Path:
    """A new spill file for an offline run: one file per run (the writer spills into it too,
    see ``OfflineSink.spill_path``), so each file has one header."""
    stem = f"run-{OFFLINE_RUN_ID}-{os.getpid()}-{int(time.time() * 1000)}"
    path = Path(spill_dir) / f"{stem}.jsonl"
    number = 1
    while path.exists():
        number += 1
        path = Path(spill_dir) / f"{stem}-{number}.jsonl"
    return path


__all__ = ["HEADER", "OFFLINE_RUN_ID", "OfflineSink", "header", "spill_dir_of", "spill_file"]
