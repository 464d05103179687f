"""The CLI's percentages of a profile summary (tracker.cli.profile_text): a small share is
shown as such, not rounded to 0 %."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.cli.profile_text import _pct


@pytest.mark.parametrize(
    ("share", "shown"),
    [(0.0, "0 %"), (0.0003, "<0.1 %"), (0.008, "0.8 %"), (0.0949, "9.5 %"), (0.1, "10 %"),
     (0.956, "96 %"), (1.0, "100 %"), (None, "-"), ("x", "-")],
)  # fmt: skip
def test_a_share_keeps_its_size(share: Any, shown: str) -> None:
    assert _pct(share) == shown
