"""Start and stop a throwaway PostgreSQL cluster for the integration tests.

Usable as a module (``start_cluster(dir)`` / ``stop_cluster(dir)``) and as a script::

    python -m tests.support.pg_cluster start DIR   # prints the SQLAlchemy URL on stdout
    python -m tests.support.pg_cluster stop DIR    # stops the server and removes DIR

The cluster lives entirely inside DIR: data directory, server log and unix socket. It listens
on 127.0.0.1 only, on a free port, with trust authentication and fsync off: fast and
disposable, never for real data. The server binaries come from ``pg_config --bindir``
(override with ``PG_BINDIR``). initdb and pg_ctl refuse to run as root, so as root they run
as the ``postgres`` OS user and DIR is handed to that user.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

DATABASE = "tracker_test"
SUPERUSER = "postgres"
OS_USER_WHEN_ROOT = "postgres"
START_TIMEOUT_S = 60.0
PORT_ATTEMPTS = 3
# A unix socket path must fit in sockaddr_un.sun_path (108 bytes on Linux, with the NUL).
_MAX_SOCKET_PATH = 107


class ClusterError(RuntimeError):
    """The throwaway cluster could not be created, started or stopped."""


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _bindir() -> Path:
    override = os.environ.get("PG_BINDIR")
    if override:
        bindir = Path(override)
    else:
        pg_config = shutil.which("pg_config")
        if pg_config is None:
            raise ClusterError(
                "pg_config is not on PATH: install PostgreSQL 15 server binaries "
                "(Debian: apt-get install postgresql-15) or set PG_BINDIR"
            )
        out = subprocess.run(
            [pg_config, "--bindir"], check=True, capture_output=True, text=True
        ).stdout
        bindir = Path(out.strip())
    if not (bindir / "initdb").is_file():
        raise ClusterError(
            f"no initdb in {bindir}: the PostgreSQL server package is missing "
            "(pg_config alone comes with libpq-dev; Debian: apt-get install postgresql-15)"
        )
    return bindir


def _as_server_user(argv: list[str]) -> list[str]:
    """Prefix argv so it runs as a user that initdb/pg_ctl accept."""
    if _is_root():
        return ["runuser", "-u", OS_USER_WHEN_ROOT, "--", *argv]
    return argv


def _run(argv: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    # cwd=DIR: as root, the caller's working directory may not be readable by postgres.
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(
            f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n{proc.stdout}{proc.stderr}"
        )
    return proc


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError as exc:
        return f"(server log {log} unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(server log is empty)"


def _prepare_dir(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise ClusterError(f"{root} is not empty: give start_cluster a fresh directory")
    if _is_root():
        shutil.chown(root, user=OS_USER_WHEN_ROOT, group=OS_USER_WHEN_ROOT)
        root.chmod(0o700)
        probe = subprocess.run(
            ["runuser", "-u", OS_USER_WHEN_ROOT, "--", "test", "-w", str(root)], check=False
        )
        if probe.returncode != 0:
            raise ClusterError(
                f"user {OS_USER_WHEN_ROOT!r} cannot write {root}: a parent directory is not "
                "traversable by it; use a directory under /tmp (e.g. mktemp -d)"
            )


def _write_config(data: Path, root: Path) -> None:
    settings = {
        "listen_addresses": "'127.0.0.1'",
        "unix_socket_directories": f"'{root}'",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "200",
    }
    with (data / "postgresql.conf").open("a") as conf:
        conf.write("\n# throwaway test cluster\n")
        for key, value in settings.items():
            conf.write(f"{key} = {value}\n")
    (data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")


def _wait_ready(bindir: Path, port: int, log: Path, deadline: float) -> None:
    """Bounded poll until the server accepts TCP connections on 127.0.0.1:port."""
    argv = [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
    argv += ["-U", SUPERUSER, "-d", "postgres"]
    while True:
        if subprocess.run(argv, check=False).returncode == 0:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"PostgreSQL did not accept connections on 127.0.0.1:{port} within "
                f"{START_TIMEOUT_S:.0f}s; server log tail:\n{_log_tail(log)}"
            )
        time.sleep(0.1)


def _start_server(bindir: Path, root: Path, data: Path, log: Path) -> int:
    """Start postgres on a free port; retry if another process grabs the port first."""
    for _ in range(PORT_ATTEMPTS):
        port = _free_port()
        argv = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", f"-p {port}"]
        argv += ["-w", "-t", str(int(START_TIMEOUT_S)), "start"]
        proc = subprocess.run(
            _as_server_user(argv), cwd=root, capture_output=True, text=True, check=False
        )
        if proc.returncode == 0:
            return port
        tail = _log_tail(log)
        if "could not bind" not in tail:
            raise ClusterError(
                f"pg_ctl start failed (exit {proc.returncode}) on port {port}:\n"
                f"{proc.stdout}{proc.stderr}\nserver log tail:\n{tail}"
            )
    raise ClusterError(
        f"every port tried was taken before postgres could bind it ({PORT_ATTEMPTS} tries);"
        f" server log tail:\n{_log_tail(log)}"
    )


def start_cluster(directory: str | os.PathLike[str]) -> str:
    """Create and start a cluster in DIR; return its SQLAlchemy URL.

    The URL is ``postgresql+psycopg://postgres@127.0.0.1:PORT/tracker_test``; the database
    exists and is empty. DIR is created if missing and must be empty.

    Raises ClusterError when the binaries are missing, DIR is unusable, or the server does
    not start within START_TIMEOUT_S (the message carries the server log tail).
    """
    root = Path(directory).resolve()
    bindir = _bindir()
    socket_path = root / ".s.PGSQL.65535"
    if len(str(socket_path)) > _MAX_SOCKET_PATH:
        raise ClusterError(f"{root} is too long for a unix socket path; use a shorter DIR")
    _prepare_dir(root)
    data = root / "data"
    log = root / "server.log"

    initdb = [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust"]
    initdb += ["--encoding=UTF8", "--no-locale", "--no-sync"]
    _run(_as_server_user(initdb), root, "initdb")
    _write_config(data, root)

    deadline = time.monotonic() + START_TIMEOUT_S
    port = _start_server(bindir, root, data, log)
    _wait_ready(bindir, port, log, deadline)

    createdb = [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port)]
    createdb += ["-U", SUPERUSER, DATABASE]
    _run(createdb, root, "createdb")

    url = f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"
    (root / "url").write_text(url + "\n")
    return url


def stop_cluster(directory: str | os.PathLike[str]) -> None:
    """Stop the cluster in DIR (immediate shutdown) and remove DIR.

    Safe to call when the cluster never started or DIR is already gone.
    Raises ClusterError if a running server cannot be stopped; DIR is then left in place
    so the server log can be read.
    """
    root = Path(directory).resolve()
    data = root / "data"
    if (data / "postmaster.pid").exists():
        argv = [str(_bindir() / "pg_ctl"), "-D", str(data), "-m", "immediate"]
        argv += ["-w", "-t", "30", "stop"]
        proc = subprocess.run(
            _as_server_user(argv), cwd=root, capture_output=True, text=True, check=False
        )
        # pg_ctl exits 1 with "PID file ... does not exist"/"Is server running?" when the
        # server is already gone: nothing left to stop, so only a live server is an error.
        if proc.returncode != 0 and (data / "postmaster.pid").exists():
            raise ClusterError(f"pg_ctl stop failed:\n{proc.stdout}{proc.stderr}")
    if root.exists():
        shutil.rmtree(root)


def pause_server(directory: str | os.PathLike[str]) -> None:
    """Stop the server in DIR (fast shutdown) but keep its data, for outage tests."""
    root = Path(directory).resolve()
    argv = [str(_bindir() / "pg_ctl"), "-D", str(root / "data"), "-m", "fast", "-w", "stop"]
    _run(_as_server_user(argv), root, "pg_ctl stop")


def resume_server(directory: str | os.PathLike[str]) -> None:
    """Start a paused server in DIR again on the port its URL names."""
    root = Path(directory).resolve()
    port = int((root / "url").read_text().strip().rsplit(":", 1)[1].split("/")[0])
    data, log = root / "data", root / "server.log"
    argv = [str(_bindir() / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", f"-p {port}"]
    _run(_as_server_user([*argv, "-w", "-t", str(int(START_TIMEOUT_S)), "start"]), root, "start")
    _wait_ready(_bindir(), port, log, time.monotonic() + START_TIMEOUT_S)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("start", "stop"):
        print(f"usage: {argv[0]} start|stop DIR", file=sys.stderr)
        return 2
    try:
        if argv[1] == "start":
            print(start_cluster(argv[2]), flush=True)
        else:
            stop_cluster(argv[2])
    except (ClusterError, OSError, subprocess.SubprocessError) as exc:
        print(f"pg_cluster {argv[1]} as {getpass.getuser()}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
