"""The tests' line reader: lines a child wrote in one go are all seen (tests/support/lines.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.lines import Lines

# Two lines in one write, then the child waits for stdin: nothing more comes on its stdout.
CHILD = "import sys; sys.stdout.write('RUN 1\\nREADY\\n'); sys.stdout.flush(); sys.stdin.read()"


def test_a_line_that_came_in_the_same_read_as_the_one_awaited_is_seen() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = Lines(child.stdout)  # type: ignore[arg-type]
        assert lines.wait_for("RUN", 30) == "RUN 1"
        # A buffered readline() after select() found nothing here: both lines were in its
        # buffer, and the pipe had no more bytes.
        assert lines.wait_for("READY", 5) == "READY"
        assert lines.wait_for("NEVER", 0.2) is None
    finally:
        child.kill()
        child.wait()
    assert lines.rest() == "RUN 1\nREADY\n"
