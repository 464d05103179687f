"""``tracker artifacts ls|get --uri http://...``: the same commands over a real dashboard."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from flask import Flask

from tests.support.web import TOKEN
from tracker.cli import main
from tracker.store import artifacts as art
from tracker.store.runs import create_run


def test_ls_and_get_over_http(
    make_app: Callable[..., Flask], serve: Callable[..., Any], tmp_path: Path
) -> None:
    app = make_app(ARTIFACT_ROOT=str(tmp_path / "root"), TOKEN=TOKEN)
    store = app.extensions["tracker"].store
    run = create_run(store, "cli", "r").id
    data = os.urandom(2 * 1024 * 1024 + 3)
    art.put_artifact(store, run, "deep/dir/w é.bin", data)
    server = serve(app)
    runner = CliRunner()
    listed = runner.invoke(main, ["artifacts", "ls", str(run), "--uri", server.url,
                                  "--token", TOKEN, "--json"])  # fmt: skip
    assert listed.exit_code == 0, listed.stderr
    assert [a["path"] for a in json.loads(listed.stdout)] == ["deep/dir/w é.bin"]
    target = tmp_path / "got.bin"
    got = runner.invoke(main, ["artifacts", "get", str(run), "deep/dir/w é.bin", "-o", str(target),
                               "--uri", server.url, "--token", TOKEN])  # fmt: skip
    assert got.exit_code == 0, got.stderr
    assert target.read_bytes() == data
    missing = runner.invoke(main, ["artifacts", "get", str(run), "deep/none", "--uri", server.url,
                                   "--token", TOKEN])  # fmt: skip
    assert missing.exit_code == 2 and "has no artifact 'deep/none'" in missing.stderr
    denied = runner.invoke(main, ["artifacts", "ls", str(run), "--uri", server.url])
    assert denied.exit_code == 2 and "unauthorized" in denied.stderr
