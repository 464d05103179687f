"""docker/compose.yaml's wiring, run without a Docker engine: the commands and environment
of its ``migrate``, ``web`` and ``worker`` services, read from the file itself, started as
plain processes on this machine -- PostgreSQL for ``postgres`` (the test cluster), a
directory for the ``data`` volume -- and a submitter in a directory that shares no file with
them, who knows only the dashboard's address and token. The submitted job must run from its
code snapshot on that worker and end ``succeeded``: what a team gets from ``docker compose
up`` and ``tracker submit --uri``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from tests.support.polling import wait_for
from tests.support.runner import TRACKER
from tests.support.web import TOKEN, Proc, free_port

ROOT = Path(__file__).resolve().parent.parent
TRAIN = "import json, os\nprint('lr', json.loads(os.environ['TRACKER_CONFIG'])['lr'])\n"


def _service(doc: dict[str, Any], name: str) -> tuple[list[str], dict[str, str]]:
    service = doc["services"][name]
    env = {str(k): str(v) for k, v in (service.get("environment") or {}).items()}
    return [str(a) for a in service["command"]], env


def _substitute(text: str, values: dict[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}`` from ``values``."""

    def one(match: re.Match[str]) -> str:
        name, op, rest = match.group(1), match.group(2) or "", match.group(3) or ""
        if name in values and (values[name] or op != ":-"):
            return values[name]
        if op == ":?":
            raise AssertionError(f"compose needs {name}: {rest}")
        return rest if op == ":-" else ""

    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, text)


def _on_this_machine(value: str, pg: sa.URL, data: Path, port: int) -> str:
    """A compose value for processes here: the ``postgres`` service is the test cluster,
    the ``data`` volume a directory, the published port a free one."""
    value = value.replace("tracker:tracker@postgres:5432/tracker", _pg_part(pg))
    value = re.sub(r"(?<![\w/])/data\b", str(data), value)
    return value.replace("5000", str(port))


def _pg_part(pg: sa.URL) -> str:
    user = pg.username or "postgres"
    auth = f"{user}:{pg.password}" if pg.password else user
    return f"{auth}@{pg.host}:{pg.port}/{pg.database}"


@pytest.mark.slow
def test_the_compose_services_run_a_job_submitted_from_elsewhere(
    empty_store_url: str, tmp_path: Path
) -> None:
    if not empty_store_url.startswith("postgresql"):
        pytest.skip("compose runs PostgreSQL")
    doc = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    pg = sa.make_url(empty_store_url)
    data, server, submitter = tmp_path / "data", tmp_path / "server", tmp_path / "laptop"
    for d in (data, server, submitter / "project"):
        d.mkdir(parents=True)
    port = free_port()
    values = {"TRACKER_TOKEN": TOKEN, "TRACKER_ALLOWED_HOSTS": ""}
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}

    def command(name: str) -> tuple[list[str], dict[str, str]]:
        argv, env = _service(doc, name)
        assert argv[0] == "tracker", argv
        argv = [
            *TRACKER,
            *(_on_this_machine(_substitute(a, values), pg, data, port) for a in argv[1:]),
        ]
        env = {k: _on_this_machine(_substitute(v, values), pg, data, port) for k, v in env.items()}
        return argv, {**base, **env}

    argv, env = command("migrate")
    done = subprocess.run(argv, env=env, cwd=server, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    argv, env = command("web")
    assert "--host" in argv and "0.0.0.0" in argv  # as compose binds it: the token is needed
    web = Proc(argv, env, server)
    argv, env = command("worker")
    worker = Proc([*argv, "--gpus", "none", "--poll-interval", "0.2"], env, server)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _health(url), 60, "the dashboard to answer")
        (submitter / "project" / "train.py").write_text(TRAIN)
        laptop_env = {k: v for k, v in base.items() if k != "TRACKER_URI"}
        remote = ["--uri", url, "--token", TOKEN]
        sent = subprocess.run(
            [*TRACKER, "submit", "train.py", "-c", "lr=0.5", *remote], env=laptop_env,
            cwd=submitter / "project", capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        follow = subprocess.run(
            [*TRACKER, "jobs", "logs", "1", "--follow", *remote], env=laptop_env,
            cwd=submitter, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:
        worker.kill()
        web.kill()
    assert follow.returncode == 0, (follow.stderr, worker.output()[-3000:])
    assert "lr 0.5" in follow.stdout
    # the code lives on the data volume: its blobs and the attempt's copy
    assert (data / "artifacts").is_dir() and (data / "snapshots" / "job-1" / "attempt-1").is_dir()


def _health(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/api/v1/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
