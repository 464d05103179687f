"""When each pytest-xdist worker finished, and what it spent its time on: a table at the end of
a parallel run (``scripts/test.sh``), so every CI log shows which worker set the wall time and
which of its tests made it the last one.

Loaded by ``tests/conftest.py``; it reports only in the controller of an xdist run (the hooks
that feed it are pytest-xdist's) and says nothing in a plain pytest run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

TOP_TESTS = 3  # per worker: its slowest tests, named in the table


@dataclass
class _Worker:
    busy_s: float = 0.0
    tests: int = 0
    finished_s: float | None = None
    slowest: list[tuple[float, str]] = field(default_factory=list)
    by_test: dict[str, float] = field(default_factory=dict)


class _Timeline:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.workers: dict[str, _Worker] = {}

    def report(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # set by xdist on the controller only
        gateway = getattr(getattr(node, "gateway", None), "id", None)
        if gateway is None:
            return
        worker = self.workers.setdefault(gateway, _Worker())
        worker.busy_s += report.duration
        worker.by_test[report.nodeid] = worker.by_test.get(report.nodeid, 0.0) + report.duration
        if report.when == "teardown":
            worker.tests += 1

    def down(self, gateway: str) -> None:
        worker = self.workers.setdefault(gateway, _Worker())
        worker.finished_s = time.monotonic() - self.start

    def lines(self) -> list[str]:
        out = []
        ordered = sorted(self.workers.items(), key=lambda kv: kv[1].finished_s or 0.0)
        for gateway, worker in ordered:
            finished = "-" if worker.finished_s is None else f"{worker.finished_s:7.0f} s"
            top = sorted(((s, n) for n, s in worker.by_test.items()), reverse=True)[:TOP_TESTS]
            named = ", ".join(f"{n} {s:.0f} s" for s, n in top)
            out.append(
                f"{gateway}: finished at {finished}, {worker.busy_s:7.0f} s in "
                f"{worker.tests} tests; slowest: {named}"
            )
        return out


_timeline = _Timeline()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _timeline.report(report)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    _timeline.down(str(node.gateway.id))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = _timeline.lines()
    if not lines:
        return
    terminalreporter.section("xdist workers: when each finished (the last sets the wall time)")
    for line in lines:
        terminalreporter.write_line(line)
