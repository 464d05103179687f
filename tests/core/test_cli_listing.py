"""``tracker runs ls`` and ``tracker jobs ls`` (issue 24, item 6) against a real store: the
same ``--limit`` / ``-n`` option, and a config column with the keys that differ between the
listed runs or jobs (the dashboard's rule), not a whole config cut at the column's width."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tracker.cli import main
from tracker.cli.listing import config_cells
from tracker.entities import JobSpec
from tracker.store import Store
from tracker.store.queue import enqueue
from tracker.store.runs import create_run

# Many keys alike, then the one that tells the items apart, sorted after them: a whole
# flattened config is cut at the column's 60 characters long before it.
COMMON = {"batch_size": 128, "epochs": 8, "model": {"depth": 12, "width": 512},
          "optimizer": "adamw", "scheduler": "cosine"}  # fmt: skip
LRS = (0.1, 0.01, 0.001)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _table(result: Result) -> dict[str, str]:
    """The rows of a printed table by their first cell (the id)."""
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    return {line.split()[0]: line for line in lines[2:] if line.strip()}


def _jobs(url: str, configs: list[dict[str, Any]]) -> list[int]:
    store = Store(url)
    try:
        return [enqueue(store, JobSpec(argv=[sys.executable, "train.py"], project="p",
                                       config=c)).id for c in configs]  # fmt: skip
    finally:
        store.close()


def _runs(url: str, configs: list[dict[str, Any]]) -> list[int]:
    store = Store(url)
    try:
        return [create_run(store, "p", f"r{i}", c, []).id for i, c in enumerate(configs)]
    finally:
        store.close()


@pytest.mark.parametrize("what", ["jobs", "runs"])
def test_the_config_column_shows_the_keys_that_differ(store_url: str, what: str) -> None:
    make = _jobs if what == "jobs" else _runs
    configs = [{**COMMON, "warmup": {"lr": lr}} for lr in LRS]
    ids = make(store_url, configs)
    rows = _table(invoke(what, "ls", "--uri", store_url))
    for item, lr in zip(ids, LRS, strict=True):
        assert f"warmup.lr={lr:g}" in rows[str(item)], rows
        assert "batch_size" not in rows[str(item)] and "scheduler" not in rows[str(item)]
    # --json keeps every item's whole config.
    listed = json.loads(invoke(what, "ls", "--uri", store_url, "--json").output)
    assert sorted(i["config"]["warmup"]["lr"] for i in listed) == sorted(LRS)
    assert all(i["config"]["model"] == {"depth": 12, "width": 512} for i in listed)


@pytest.mark.parametrize("what", ["jobs", "runs"])
def test_one_item_or_items_alike_show_every_key(store_url: str, what: str) -> None:
    make = _jobs if what == "jobs" else _runs
    (only,) = make(store_url, [{"lr": 0.1, "model": {"width": 64}}])
    assert "lr=0.1 model.width=64" in _table(invoke(what, "ls", "--uri", store_url))[str(only)]


def test_config_cells_leave_out_a_key_an_item_lacks() -> None:
    cells = config_cells([{"lr": 0.1, "seed": 1}, {"lr": 0.1}, {}])
    assert cells == ["lr=0.1 seed=1", "lr=0.1", "-"]
    assert config_cells([{"a": 1, "b": 2}, {"a": 1.0, "b": 2}]) == ["a=1 b=2"] * 2  # alike
    assert config_cells([]) == []


@pytest.mark.parametrize("what", ["jobs", "runs"])
def test_ls_takes_n_as_limit(store_url: str, what: str) -> None:
    make = _jobs if what == "jobs" else _runs
    ids = make(store_url, [{"i": i} for i in range(4)])
    for flag in ("-n", "--limit"):
        rows = _table(invoke(what, "ls", "--uri", store_url, flag, "2"))
        assert sorted(rows) == sorted(str(i) for i in ids[-2:])  # the newest two
    for bad in ("0", "-1", "many"):
        result = invoke(what, "ls", "--uri", store_url, "-n", bad)
        assert result.exit_code == 2 and "Invalid value for '--limit' / '-n'" in result.output
    assert "-n, --limit INTEGER RANGE" in invoke(what, "ls", "--help").output
