"""A run's final status kept in its spill file when the store is away as the run ends.

When ``finish()`` (or the exit of the process) cannot reach the store, the points go to the
spill file (``tracker.client.writer``) and the run's final status goes to the end of the same
file, as one JSON line::

    {"run_id": 5, "final_status": {"status": "failed", "exit_code": 1,
     "error": "ValueError: ...", "ended_at": 1764567890.5}}

``tracker db replay FILE`` stores the file's points first, then applies the status (with
the original ``ended_at``), so the run does not stay ``running``. A run that housekeeping
marked ``crashed`` meanwhile (its heartbeats stopped) gets its true final status; a run that
already has another final status keeps it, and the replay says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

FIELD = "final_status"
REPLACEABLE = ("running", "crashed")  # statuses the replayed final status may overwrite


@dataclass(frozen=True)
class FinalStatus:
    run_id: int
    status: str
    exit_code: int | None
    error: str | None
    ended_at: float

    def describe(self) -> str:
        code = "" if self.exit_code is None else f", exit code {self.exit_code}"
        return f"{self.status}{code}"


def append(path: Path, final: FinalStatus) -> None:
    """Append ``final`` to the spill file ``path`` (created if needed), fsynced.

    Raises:
        OSError: the file cannot be written.
    """
    body = {
        "status": final.status,
        "exit_code": final.exit_code,
        "error": final.error,
        "ended_at": final.ended_at,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"run_id": final.run_id, FIELD: body}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read(path: Path) -> list[FinalStatus]:
    """The final statuses recorded in the spill file ``path`` (none for an older file).

    Raises:
        OSError / ValueError: the file cannot be read, or a line is not JSON.
    """
    found = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if FIELD not in line:  # cheap pre-filter: point lines are most of the file
                continue
            doc = json.loads(line)
            body = doc.get(FIELD)
            if body is None:
                continue
            found.append(
                FinalStatus(
                    run_id=int(doc["run_id"]),
                    status=str(body["status"]),
                    exit_code=None if body.get("exit_code") is None else int(body["exit_code"]),
                    error=body.get("error"),
                    ended_at=float(body["ended_at"]),
                )
            )
    return found
