"""The fault-injection suite's report: one line per case, points accepted vs stored.

Each test calls the ``fault_report`` fixture once with its counts; the lines are printed
together at the end of the session (``pytest tests/faults``), after the usual summary, so a
CI log shows what every fault cost, not only that the assertions held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

REPORT = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[REPORT] = []


@pytest.fixture
def fault_report(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``fault_report(accepted=..., stored=..., on_disk=0, **more)`` for the calling test."""

    def report(*, accepted: int, stored: int, on_disk: int = 0, **more: Any) -> None:
        lost = accepted - stored - on_disk
        extra = "".join(f" {k}={v}" for k, v in more.items())
        line = (
            f"{request.node.name}: accepted={accepted} stored={stored} on_disk={on_disk} "
            f"lost={lost}{extra}"
        )
        request.config.stash[REPORT].append(line)
        request.node.user_properties.append(("fault_report", line))

    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lines = config.stash.get(REPORT, [])
    if lines:
        terminalreporter.section("fault injection: points accepted vs stored")
        for line in lines:
            terminalreporter.write_line(line)
