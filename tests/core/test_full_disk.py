"""A full disk under SQLite is an outage, not the end of logging (issue: "a full disk ... loses
nothing"). A real small filesystem (tmpfs) holds the store; a training process logs steadily
while the test fills that filesystem to the last byte, keeps it full for seconds and frees it.
Every point the process accepted ends up stored -- through the writer's retries when space
returns, or through ``tracker db replay`` of what it spilled -- the process trains through
and exits 0, and the run ends ``finished``. With the spill on the same full filesystem the
writer keeps what it cannot write in memory (within its cap) until space returns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.replay import named_spill_files
from tests.support.small_disk import fill, free, small_filesystem
from tracker.cli import main
from tracker.store import Store
from tracker.store.metrics import count_points
from tracker.store.runs import get_run

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "log_through_full_disk.py"
STEPS, KEYS = 2000, 200  # KEYS: the script's
SAID = "writing to the store failed"  # the writer's line, once the outage lasted 5 s


@pytest.mark.parametrize(
    ("spill", "cap_mib"),
    [
        ("same-disk", None),  # the default: the spill is full too, memory holds the points
        ("other-disk", "4"),  # a small cap: what is over it goes to the other filesystem
        ("same-disk", "4"),  # a small cap and nowhere to spill: memory past the cap, warned
    ],
)
def test_a_full_disk_loses_no_accepted_point(
    tmp_path: Path, spill: str, cap_mib: str | None
) -> None:
    with small_filesystem(tmp_path / "disk", 32) as disk:
        url = f"sqlite:///{disk / 'tracker.db'}"
        Store(url).close()
        spill_dir = disk / "spill" if spill == "same-disk" else tmp_path / "spill"
        env = {**os.environ, "TRACKER_URI": url, "TRACKER_STRICT": "0"}
        if cap_mib is not None:
            env["TRACKER_MAX_MEMORY_MB"] = cap_mib
        if spill == "other-disk":  # moved by the variable, as a user would
            env["TRACKER_SPILL_DIR"] = str(spill_dir)
        argv = "-" if spill == "other-disk" else str(spill_dir)
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), argv, str(STEPS)],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(proc.stderr or []), daemon=True)
        reader.start()
        store = Store(url)
        try:
            deadline = time.monotonic() + 120
            while count_points(store, 1) == 0 if _has_run(store) else True:
                assert proc.poll() is None, "".join(stderr)
                assert time.monotonic() < deadline, "no point stored in 120 s"
                time.sleep(0.1)
            filler = fill(disk)
            before = count_points(store, 1)
            # full until the writer says so (after OUTAGE_SAID_AFTER_S of failed writes)
            deadline = time.monotonic() + 60
            while not any(SAID in line for line in stderr) or not _spilled(spill, spill_dir):
                assert proc.poll() is None, "ended while the disk was full:\n" + "".join(stderr)
                assert time.monotonic() < deadline, "no outage said in 60 s:\n" + "".join(stderr)
                time.sleep(0.1)
            time.sleep(1.0)
            free(filler)
            out, _ = proc.communicate(timeout=300)
            reader.join(10)
            text = "".join(stderr)
            assert proc.returncode == 0, text
            assert f"DONE {STEPS}" in out, text
            assert "Traceback" not in text, text
            # said once, with the cause, and training went on
            said = [line for line in text.splitlines() if SAID in line]
            assert len(said) == 1 and "disk is full" in said[0], text
            assert before < STEPS * KEYS  # the disk was full mid-run, not after it
            files = named_spill_files(text)
            if files:
                result = CliRunner().invoke(main, ["db", "replay", "--uri", url, *files])
                assert result.exit_code == 0, result.output
            assert count_points(store, 1) == STEPS * KEYS, text
            assert get_run(store, 1).status == "finished"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            store.close()


def _spilled(spill: str, spill_dir: Path) -> bool:
    """On the other filesystem, the points over the cap are in the spill files there (the
    writer stores them and deletes the files once the store answers again)."""
    return spill == "same-disk" or any(spill_dir.glob("*.jsonl"))


def _has_run(store: Store) -> bool:
    try:
        get_run(store, 1)
    except Exception:
        return False
    return True
