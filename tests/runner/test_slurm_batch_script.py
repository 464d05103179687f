"""The dispatcher's batch script (``tracker-batch.sh`` in its log folder): written whole,
executable, and safe when several dispatchers sharing the folder start at once."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.support.threads import raised_at_once
from tracker.rules.slurm import SlurmSite
from tracker.runner.slurm import SlurmExecutor


def test_dispatchers_starting_at_once_share_one_whole_script(tmp_path: Path) -> None:
    # Three dispatchers on one machine once raced on one temporary name: one renamed the
    # file from under another's chmod, which died with FileNotFoundError.
    logs = tmp_path / "logs"

    def start() -> None:
        for _ in range(25):
            (logs / "tracker-batch.sh").unlink(missing_ok=True)  # each one rewrites it
            SlurmExecutor(SlurmSite(), str(logs))

    assert raised_at_once(start, 8) == []
    script = logs / "tracker-batch.sh"
    SlurmExecutor(SlurmSite(), str(logs))
    assert script.read_text().startswith("#!") and os.stat(script).st_mode & stat.S_IXUSR
    assert sorted(p.name for p in logs.iterdir()) == ["tracker-batch.sh"]  # no temporary left
