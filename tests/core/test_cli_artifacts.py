"""``tracker artifacts ls|get`` and ``tracker gc`` on a real store (SQLite and PostgreSQL)
with a real artifact root; over HTTP in tests/web/test_cli_artifacts_remote.py."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.cli import main
from tracker.store import Store
from tracker.store import artifacts as art
from tracker.store.runs import create_run


@pytest.fixture
def seeded(store_url: str, tmp_path: Path) -> tuple[str, str, int, bytes]:
    root = str(tmp_path / "root")
    store = Store(store_url, artifact_root=root)
    run = create_run(store, "cli", "r").id
    data = os.urandom(70_000)
    art.put_artifact(store, run, "model/w.bin", data, step=3)
    art.put_artifact(store, run, "notes.txt", b"hello\n")
    store.close()
    return store_url, root, run, data


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_ls_table_and_json(seeded: tuple[str, str, int, bytes]) -> None:
    url, root, run, data = seeded
    code, out, err = _cli("artifacts", "ls", str(run), "--uri", url, "--artifact-root", root)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["path", "size", "type", "step", "sha256", "created"]
    assert lines[2].split()[:2] == ["model/w.bin", "68.4"]
    assert "application/octet-stream" in lines[2] and "text/plain" in lines[3]
    code, out, _ = _cli("artifacts", "ls", str(run), "--uri", url, "--json", "--prefix", "model/")
    got = json.loads(out)
    assert [(a["path"], a["size"], a["step"]) for a in got] == [("model/w.bin", len(data), 3)]
    assert got[0]["sha256"] == hashlib.sha256(data).hexdigest()


def test_get_writes_the_file_and_stdout(
    seeded: tuple[str, str, int, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root, run, data = seeded
    monkeypatch.setenv("TRACKER_ARTIFACT_ROOT", root)
    target = tmp_path / "out.bin"
    code, _, err = _cli(
        "artifacts", "get", str(run), "model/w.bin", "-o", str(target), "--uri", url
    )
    assert code == 0, err
    assert target.read_bytes() == data and hashlib.sha256(data).hexdigest() in err
    code, _, err = _cli("artifacts", "get", str(run), "notes.txt", "--uri", url)
    assert code == 0 and Path("notes.txt").read_bytes() == b"hello\n"
    result = CliRunner().invoke(main, ["artifacts", "get", str(run), "notes.txt", "-o", "-",
                                       "--uri", url])  # fmt: skip
    assert result.exit_code == 0 and result.stdout_bytes == b"hello\n"
    code, _, err = _cli("artifacts", "get", str(run), "nope.txt", "--uri", url)
    assert code == 2 and f"run {run} has no artifact 'nope.txt'" in err


def test_get_refuses_bytes_that_do_not_match(
    seeded: tuple[str, str, int, bytes], tmp_path: Path
) -> None:
    url, root, run, data = seeded
    sha = hashlib.sha256(data).hexdigest()
    blob = Path(root) / sha[:2] / sha[2:4] / sha
    blob.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped on disk
    target = tmp_path / "w.bin"
    code, _, err = _cli("artifacts", "get", str(run), "model/w.bin", "-o", str(target),
                        "--uri", url, "--artifact-root", root)  # fmt: skip
    assert code == 2 and "artifact_corrupt" in err and sha in err
    assert not target.exists() and not (tmp_path / "w.bin.part").exists()


def test_gc_dry_run_then_yes(seeded: tuple[str, str, int, bytes]) -> None:
    url, root, run, data = seeded
    store = Store(url, artifact_root=root)
    art.delete_artifact(store, run, "model/w.bin")
    young = art.blob_store(store).put_bytes(b"just now")
    store.close()
    sha = hashlib.sha256(data).hexdigest()
    two_hours_ago = time.time() - 7200
    os.utime(Path(root) / sha[:2] / sha[2:4] / sha, (two_hours_ago, two_hours_ago))
    code, out, err = _cli("gc", "--uri", url, "--artifact-root", root)
    assert code == 0, err
    assert (
        f"blobs: would remove 1 unreferenced blob(s), 68.4 KiB ({len(data)} bytes), of 3 in {root}"
        in out
    )
    assert "kept 1 unreferenced blob(s) younger than the blob grace" in out
    assert "nothing was removed" in err
    assert (Path(root) / sha[:2] / sha[2:4] / sha).exists()
    code, out, _ = _cli("gc", "--uri", url, "--artifact-root", root, "--yes", "--json")
    report = json.loads(out)["blobs"]
    assert (report["deleted"], report["unreferenced"], report["young"]) == (1, 1, 1)
    assert report["artifact_root"] == root
    assert not (Path(root) / sha[:2] / sha[2:4] / sha).exists()
    code, out, _ = _cli("gc", "--uri", url, "--artifact-root", root, "--yes", "--blob-grace", "0")
    assert "blobs: removed 1 unreferenced blob(s)" in out
    assert not (Path(root) / young[:2] / young[2:4] / young).exists()
    code, out, _ = _cli("artifacts", "ls", str(run), "--uri", url, "--artifact-root", root)
    assert "notes.txt" in out  # referenced blobs stay


def test_postgresql_without_a_root_names_the_setting(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACKER_ARTIFACT_ROOT", raising=False)
    store = Store(store_url)
    run = create_run(store, "cli", "r").id
    store.close()
    code, out, err = _cli("gc", "--uri", store_url)
    assert code == 0, err
    if store_url.startswith("sqlite"):
        assert "blobs: would remove 0 unreferenced blob(s)" in out
        return
    assert "blobs: skipped: " in out and "TRACKER_ARTIFACT_ROOT" in out  # runs still purged
    assert "--artifact-root" in out and f"run {run}" not in out


def test_a_root_holding_the_database_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    Store(url).close()
    code, _, err = _cli("gc", "--uri", url, "--artifact-root", str(tmp_path), "--yes")
    assert code == 2 and "contains the database" in err


@pytest.mark.parametrize("command", ["ui", "up"])
def test_ui_and_up_refuse_a_root_holding_the_database_before_starting(
    tmp_path: Path, command: str
) -> None:
    import socket

    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    code, _, err = _cli(command, "--uri", url, "--artifact-root", str(tmp_path), "--no-auth",
                        "--port", str(free))  # fmt: skip
    assert code == 2 and "contains the database" in err, err


@pytest.mark.parametrize("root_option", ["--checkpoint-root", "--log-root"])
@pytest.mark.parametrize("command", ["ui", "up"])
def test_ui_and_up_refuse_a_file_root_holding_the_database_before_starting(
    tmp_path: Path, command: str, root_option: str
) -> None:
    """Refused before the port is bound or a sign-in link printed (it used to be refused
    only when the gunicorn worker booted: a crash loop behind a printed link)."""
    import socket

    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    code, out, err = _cli(command, "--uri", url, root_option, str(tmp_path), "--no-auth",
                          "--port", str(free))  # fmt: skip
    assert code == 2 and "contains the store" in err, err
    assert "http://" not in out + err
