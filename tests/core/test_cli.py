"""The ``tracker`` command against a real store (click's runner, in process)."""

from __future__ import annotations

import csv
import io
import json
import math

import click
import pytest
from click.testing import CliRunner

from tracker.cli import COMMANDS, load_command, main
from tracker.rules.query import QueryError, parse_query
from tracker.store import Store
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, finish_run


def _seed(url: str) -> tuple[int, int]:
    store = Store(url)
    a = create_run(store, "digits", "a", {"lr": 0.1, "model": {"w": 64}}, ["baseline"])
    b = create_run(store, "other", "b", {"lr": 0.2}, [])
    log_metrics(store, a.id, 0, {"loss": 1.0, "acc": math.nan})
    log_metrics(store, a.id, 1, {"loss": 0.5, "acc": math.inf})
    finish_run(store, b.id, "failed", error="RuntimeError: x", failure_class="python_exception")
    return a.id, b.id


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    return result


def test_runs_ls_table_and_filters(store_url: str) -> None:
    a, _ = _seed(store_url)
    out = invoke("runs", "ls", "--uri", store_url, "--project", "digits").output
    assert "model.w=64" in out and "loss=0.5" in out and "other" not in out
    out = invoke("runs", "ls", "--uri", store_url, "--status", "failed").output
    assert "failed (python_exception)" in out and "digits" not in out
    out = invoke("runs", "ls", "--uri", store_url, "--tag", "baseline", "--json").output
    (row,) = json.loads(out)
    assert row["id"] == a and row["config"]["model"] == {"w": 64}
    assert row["last_metrics"] == {"loss": 0.5, "acc": "Infinity"}


def test_runs_ls_filter_uses_the_dashboards_search(store_url: str) -> None:
    a, b = _seed(store_url)
    out = invoke("runs", "ls", "--uri", store_url, "--filter", "config.lr > 0.15").output
    assert "other" in out and "digits" not in out
    query = "metrics.loss < 1 and config.model.w == 64"
    out = invoke("runs", "ls", "--uri", store_url, "-f", query, "--json").output
    assert [r["id"] for r in json.loads(out)] == [a]
    out = invoke("runs", "ls", "--uri", store_url, "-f", "config.lr >= 0.1", "-p", "digits",
                 "--json").output  # fmt: skip
    assert [r["id"] for r in json.loads(out)] == [a]
    out = invoke("runs", "ls", "--uri", store_url, "-f", "config.lr >= 0.1", "-n", "1",
                 "--json").output  # fmt: skip
    assert [r["id"] for r in json.loads(out)] == [b]
    result = invoke("runs", "ls", "--uri", store_url, "-f", 'name ~ "x" and status == failed')
    assert result.exit_code == 0 and "no runs match" in result.output


def test_runs_ls_bad_filter_is_the_dashboards_error(store_url: str) -> None:
    _seed(store_url)
    with pytest.raises(QueryError) as parsed:
        parse_query("config.lr >")
    result = invoke("runs", "ls", "--uri", store_url, "--filter", "config.lr >")
    assert result.exit_code == 2
    assert f"error [invalid_query]: {parsed.value.message}" in result.output
    result = invoke("runs", "ls", "--uri", store_url, "--filter", "config.lr > true")
    assert result.exit_code == 2
    assert "error [invalid_input]: '>' cannot compare config.lr with true" in result.output


def test_runs_show_and_errors(store_url: str) -> None:
    a, _ = _seed(store_url)
    out = invoke("runs", "show", str(a), "--uri", store_url).output
    assert "digits/a" in out and '"w": 64' in out
    result = invoke("runs", "show", "999", "--uri", store_url)
    assert result.exit_code == 2
    assert "error [not_found]: run 999 does not exist" in result.output


def test_runs_export_csv(store_url: str) -> None:
    a, _ = _seed(store_url)
    result = invoke("runs", "export", str(a), "--uri", store_url, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [(r["key"], r["step"], r["value"]) for r in rows] == [
        ("acc", "0", "nan"), ("acc", "1", "inf"), ("loss", "0", "1.0"), ("loss", "1", "0.5"),
    ]  # fmt: skip


def test_db_upgrade_and_help(empty_store_url: str) -> None:
    out = invoke("db", "upgrade", "--uri", empty_store_url).output
    assert "upgraded (empty) -> 0" in out
    assert "already at revision" in invoke("db", "upgrade", "--uri", empty_store_url).output
    for args in (["--help"], ["runs", "--help"], ["runs", "ls", "--help"], ["db", "--help"]):
        result = invoke(*args)
        assert result.exit_code == 0 and "Usage:" in result.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_module_imports(name: str) -> None:
    # A missing command module is an import error, never a command quietly left out of --help.
    assert isinstance(load_command(name), click.Command)


def test_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0, result.output
    for name in COMMANDS:
        assert f"  {name} " in result.output or f"  {name}\n" in result.output
