"""Code snapshot of a 10,000-file project: time to collect (list + hash), store (blobs the
store lacks + the file list) and, the second time, to find that nothing is new.

    python bench/bench_snapshot.py [--files 10000] [--git] [--http]

``--http``: through a real ``tracker ui`` (its own SQLite store and artifact root) as
``tracker submit --uri http://...`` does: ask which files are missing, PUT each of them,
save the list.

Prints one line per step with seconds and what was written. The tree: FILES files of 200 B to
20 KiB spread over 100 directories (a source tree's shape), about 100 MB at most.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tracker.cli.remote_submit import upload_snapshot
from tracker.cli.snapshot import collect, store_snapshot
from tracker.store import Store

TRACKER = os.path.join(os.path.dirname(sys.executable), "tracker")


def make_tree(root: Path, files: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    total = 0
    for i in range(files):
        d = root / f"pkg{i % 100}"
        d.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(rng.randint(200, 20_000))
        (d / f"mod{i}.py").write_bytes(data)
        total += len(data)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--git", action="store_true", help="make the tree a git work tree")
    parser.add_argument("--http", action="store_true", help="upload to a real dashboard")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    project = work / "project"
    size = make_tree(project, args.files)
    if args.git:
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
               "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}  # fmt: skip
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
            subprocess.run(["git", *cmd], cwd=project, env=env, check=True)
    os.sync()  # a tree that has been on disk a while, not one in the page cache only
    print(f"tree: {args.files} files, {size / 1e6:.1f} MB, git={args.git}")
    store = Store(f"sqlite:///{work}/tracker.db", artifact_root=str(work / "artifacts"))
    server = _dashboard(work) if args.http else None
    for attempt in ("first", "second"):
        t0 = time.perf_counter()
        collected = collect(str(project))
        t1 = time.perf_counter()
        if server is None:
            info, written = store_snapshot(store, collected)
        else:
            info, written = upload_snapshot(server[1], collected)
        t2 = time.perf_counter()
        print(f"{attempt} submission: collect {t1 - t0:.2f} s, store {t2 - t1:.2f} s "
              f"({written} files written), total {t2 - t0:.2f} s, snapshot {info.id}")  # fmt: skip
    store.close()
    if server is not None:
        server[0].kill()
        server[0].wait()


def _dashboard(work: Path) -> tuple[subprocess.Popen[bytes], Any]:
    """A real ``tracker ui`` on the bench's store, and an API client for it."""
    import socket
    import urllib.request

    from tracker.client.http import ApiClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "bench-token-" + "x" * 32
    env = {**os.environ, "TRACKER_ARTIFACT_ROOT": str(work / "artifacts")}
    proc = subprocess.Popen(
        [TRACKER, "ui", "--port", str(port), "--uri", f"sqlite:///{work}/tracker.db",
         "--token", token],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/api/v1/health", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, ApiClient(url, token)


if __name__ == "__main__":
    main()
