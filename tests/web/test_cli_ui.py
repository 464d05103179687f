"""``tracker ui`` and ``tracker up`` as real processes: a public bind with a token, the
token never printed; with no token, a generated admin token in a printed sign-in link
(revoked at exit); ``--no-auth`` on loopback only; and ``tracker up --demo`` running the
example sweep until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.polling import wait_for
from tests.support.web import TOKEN, TRACKER, Proc, free_port
from tracker.store import Store
from tracker.store.tokens import list_tokens

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"


def get(port: int, path: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, None


def test_public_bind_with_a_token_serves_only_with_it(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "TRACKER_TOKEN": TOKEN}
    argv = [*TRACKER, "ui", "--host", "0.0.0.0", "--port", str(port), "--uri",
            f"sqlite:///{tmp_path / 't.db'}"]  # fmt: skip
    server = Proc(argv, env, tmp_path)
    try:
        wait_for(lambda: get(port, "/api/v1/health")[0] == 200, 60, "the dashboard to start")
        assert get(port, "/api/v1/runs")[0] == 401
        assert get(port, "/api/v1/runs", "wrong")[0] == 401
        status, body = get(port, "/api/v1/runs", TOKEN)
        assert status == 200 and body["runs"] == []
    finally:
        server.kill()
    assert "http://127.0.0.1:" in server.output() and TOKEN not in server.output()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("TRACKER_URI", "TRACKER_TOKEN")}


def test_without_a_token_ui_prints_a_sign_in_link_with_a_fresh_admin_token(
    tmp_path: Path,
) -> None:
    port = free_port()
    uri = f"sqlite:///{tmp_path / 't.db'}"
    server = Proc([*TRACKER, "ui", "--port", str(port), "--uri", uri], _env(), tmp_path)
    try:
        token = server.login_token(port)
        wait_for(lambda: get(port, "/api/v1/health")[0] == 200, 60, "the dashboard to start")
        assert get(port, "/api/v1/runs")[0] == 401  # loopback is no boundary
        assert get(port, "/api/v1/runs", token)[0] == 200
        link = urllib.request.Request(f"http://127.0.0.1:{port}/login?token={token}")
        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as signed_in:
            opener.open(link, timeout=5)
        assert signed_in.value.code == 302 and signed_in.value.headers["Location"] == "/"
        assert "tracker_session=" in signed_in.value.headers["Set-Cookie"]
        assert token not in signed_in.value.headers["Set-Cookie"]
    finally:
        os.kill(server.popen.pid, signal.SIGTERM)  # a clean stop revokes the token
        assert server.wait(60) == 0, server.output()
    store = Store(uri)
    [made] = list_tokens(store)
    assert made.scope == "admin" and made.name.startswith("ui-") and made.revoked_at
    store.close()


def test_no_auth_serves_everyone_on_loopback_with_a_warning(tmp_path: Path) -> None:
    port = free_port()
    uri = f"sqlite:///{tmp_path / 't.db'}"
    server = Proc([*TRACKER, "ui", "--no-auth", "--port", str(port), "--uri", uri], _env(),
                  tmp_path)  # fmt: skip
    try:
        server.wait_for_line("WARNING: --no-auth: authentication is OFF", 60)
        wait_for(lambda: get(port, "/api/v1/runs")[0] == 200, 60, "the dashboard to start")
    finally:
        server.kill()
    refused = subprocess.run(
        [*TRACKER, "ui", "--no-auth", "--host", "0.0.0.0", "--uri", uri],
        capture_output=True, text=True, timeout=60, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2 and "only allowed on a loopback" in refused.stderr


def test_a_weak_token_is_refused_off_loopback(tmp_path: Path) -> None:
    refused = subprocess.run(
        [*TRACKER, "ui", "--host", "0.0.0.0", "--uri", f"sqlite:///{tmp_path / 't.db'}"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**_env(), "TRACKER_TOKEN": "hunter2"},
    )  # fmt: skip
    assert refused.returncode == 2
    assert "weak access token" in refused.stderr and "at least 32 characters" in refused.stderr
    assert "hunter2" not in refused.stderr
    assert not (tmp_path / "t.db").exists()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.mark.slow
@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/train_digits.py is not there")
def test_up_demo_runs_the_sweep_live_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    up = Proc([*TRACKER, "up", "--demo", "--port", str(port)], _env(), tmp_path)
    try:
        token = up.login_token(port)  # one click: the printed sign-in link
        wait_for(lambda: get(port, "/api/v1/health")[0] == 200, 60, "the dashboard to start")
        jobs = get(port, "/api/v1/jobs", token)[1]["jobs"]
        assert len(jobs) == 4 and all(j["project"] == "digits" for j in jobs)

        def live_points() -> bool:
            runs = get(port, "/api/v1/runs?q=status%20==%20running", token)[1]["runs"]
            return any(
                get(port, f"/api/v1/runs/{r['id']}/metrics", token)[1]["metrics"] for r in runs
            )

        wait_for(live_points, 180, "a demo run to log metrics while running")
        worker_pids = [p.pid for p in psutil.Process(up.popen.pid).children(recursive=True)]
        assert worker_pids
        os.killpg(up.popen.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert up.wait(90) in (0, 1, -signal.SIGINT), up.output()
        wait_for(lambda: not any(psutil.pid_exists(p) and _alive(p) for p in worker_pids), 60,
                 "the worker and its jobs to stop")  # fmt: skip
    finally:
        if up.popen.poll() is None:
            up.kill()
    assert (tmp_path / ".tracker" / "tracker.db").exists()  # the embedded SQLite default


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
