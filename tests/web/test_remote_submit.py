"""Remote submission (issue 28): ``tracker submit|sweep --uri http://host:port --token T``
uploads a code snapshot to a real ``tracker ui`` and queues the job there; a real ``tracker
worker`` that shares no directory with the submitter runs it from the snapshot, and the
output and final status come back over HTTP (``tracker jobs logs --follow --uri ...``).
Editing a file after submitting changes no queued job; the same tree again uploads nothing;
a ``log`` token may not submit or upload; a blob that does not hash to its name is refused
with nothing kept; a file list with ``..`` is refused; and random untrusted file lists never
get a 500 (Hypothesis, through the Flask test client). SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.polling import wait_for
from tests.support.runner import TRACKER, Procs
from tests.support.web import TOKEN, Proc, envelope, free_port
from tracker.store import Store, snapshots, tokens
from tracker.store.artifacts import blob_store

TRAIN = """\
import json, os
import helper
VERSION = {version}
lr = json.loads(os.environ["TRACKER_CONFIG"])["lr"]
with open(os.path.join("data", "settings.txt")) as f:
    settings = f.read().strip()
print(f"version {{VERSION}} lr {{lr}} helper {{helper.NAME}} settings {{settings}}")
print(f"cwd {{os.getcwd()}}")
"""


@dataclass
class Dashboard:
    """A real ``tracker ui`` on its own store, the only thing the submitter can reach."""

    url: str
    store_url: str
    artifact_root: Path
    log_token: str


@pytest.fixture
def dashboard(store_url: str, tmp_path: Path) -> Iterator[Dashboard]:
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    artifact_root = server_dir / "artifacts"
    log_token = tokens.create_token(Store(store_url), "log", "laptop")[1]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_ARTIFACT_ROOT"] = str(artifact_root)
    argv = [*TRACKER, "ui", "--port", str(port), "--uri", store_url, "--token", TOKEN]
    server = Proc(argv, env, server_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _status(f"{url}/api/v1/health") == 200, 60, "the dashboard to start")
        yield Dashboard(url, store_url, artifact_root, log_token)
    finally:
        server.kill()
    assert TOKEN not in server.output()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def api(
    dash: Dashboard, method: str, path: str, token: str, body: Any = None, data: bytes | None = None
) -> tuple[int, Any]:
    """One request to the dashboard's API: (status, JSON answer)."""
    headers = {"Authorization": f"Bearer {token}"}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        dash.url + "/api/v1" + path, data=data, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def submitter_env() -> dict[str, str]:
    """The submitter knows the dashboard's address and nothing of its store."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}


def tracker(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRACKER, *args], capture_output=True, text=True, env=submitter_env(), cwd=cwd,
        timeout=timeout, check=False,
    )  # fmt: skip


def remote(dash: Dashboard, token: str = TOKEN) -> list[str]:
    return ["--uri", dash.url, "--token", token]


def make_project(root: Path, version: int = 1) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "train.py").write_text(TRAIN.format(version=version))
    (root / "helper.py").write_text("NAME = 'helped'\n")
    (root / "data" / "settings.txt").write_text("fast\n")
    (root / ".gitignore").write_text("*.bin\n")
    (root / "weights.bin").write_bytes(b"\0" * 4096)  # ignored: never uploaded
    return root


def blob_files(root: Path) -> set[str]:
    """The names of the blobs under a local artifact root."""
    return {p.name for p in root.rglob("*") if p.is_file() and len(p.name) == 64}


def upload_files(root: Path) -> list[Path]:
    """Temporary upload files left under the artifact root (none after any request)."""
    tmp = root / "tmp"
    return [p for p in tmp.iterdir() if p.is_file()] if tmp.is_dir() else []


class WorkerProcs(Procs):
    """``tracker worker`` on the dashboard's store and blobs, in a directory of its own."""

    def __init__(self, dash: Dashboard, tmp: Path) -> None:
        super().__init__(dash.store_url, tmp)
        self.artifact_root = dash.artifact_root

    def env(self) -> dict[str, str]:
        return {**super().env(), "TRACKER_ARTIFACT_ROOT": str(self.artifact_root)}


@pytest.mark.slow
def test_a_job_submitted_over_http_runs_from_its_snapshot_on_a_worker_that_shares_nothing(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "submitter" / "project")
    first = tracker(project, "submit", "train.py", *remote(dashboard), "-c", "lr=0.1")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "job 1 queued (run 1, priority 0)\n"
    assert "snapshot 1: 4 files" in first.stderr and ", 4 new," in first.stderr
    # the same tree again: every file is on the dashboard already, the same snapshot
    again = tracker(project, "submit", "train.py", *remote(dashboard), "-c", "lr=0.2")
    assert again.returncode == 0, again.stderr
    assert "snapshot 1: 4 files" in again.stderr and ", 0 new," in again.stderr
    # edited after submitting: the queued jobs keep the code they were submitted with
    (project / "train.py").write_text(TRAIN.format(version=2))
    swept = tracker(project, "sweep", "train.py", *remote(dashboard), "-c", "lr=0.3,0.4")
    assert swept.returncode == 0, swept.stderr
    assert "2 jobs queued, tagged sweep-" in swept.stdout and ": 3..4" in swept.stdout
    assert "snapshot 2: 4 files" in swept.stderr and ", 1 new," in swept.stderr

    status, job = api(dashboard, "GET", "/jobs/1", dashboard.log_token)
    assert status == 200 and job["snapshot_id"] == 1 and job["cwd"] == "."
    status, snap = api(dashboard, "GET", "/snapshots/2", dashboard.log_token)
    assert status == 200 and snap["files"] == 4 and snap["root_name"] == "project"
    assert [f["path"] for f in snap["file_list"]] == [
        ".gitignore", "data/settings.txt", "helper.py", "train.py",
    ]  # fmt: skip

    worker_dir = tmp_path / "worker"  # empty: no copy of the project
    worker_dir.mkdir()
    snapshot_dir = worker_dir / "snapshots"
    procs = WorkerProcs(dashboard, worker_dir)
    try:
        worker = procs.worker("--gpus", "none", "--exit-when-idle",
                              "--snapshot-dir", str(snapshot_dir))  # fmt: skip
        for job_id, version, lr in ((1, 1, 0.1), (2, 1, 0.2), (3, 2, 0.3), (4, 2, 0.4)):
            followed = tracker(
                tmp_path / "submitter", "jobs", "logs", str(job_id), "--follow",
                "--interval", "0.1", *remote(dashboard, dashboard.log_token),
            )  # fmt: skip
            assert followed.returncode == 0, (followed.stdout, followed.stderr, worker.output())
            lines = followed.stdout.splitlines()
            assert lines[0] == f"version {version} lr {lr} helper helped settings fast"
            ran_in = Path(lines[1].removeprefix("cwd ")).resolve()
            assert ran_in == (snapshot_dir / f"job-{job_id}" / "attempt-1").resolve()
            assert f"job {job_id} succeeded: exit code 0" in followed.stderr
        assert worker.wait(60, "the worker to exit when the queue is empty") == 0
    finally:
        procs.close()
    assert not (snapshot_dir / "job-1" / "attempt-1" / "weights.bin").exists()


def test_submitting_needs_an_admin_token(dashboard: Dashboard, tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    refused = tracker(project, "submit", "train.py", *remote(dashboard, dashboard.log_token))
    assert refused.returncode == 2
    assert "error [forbidden_scope]" in refused.stderr and "'admin' scope" in refused.stderr
    anonymous = tracker(project, "submit", "train.py", "--uri", dashboard.url)
    assert anonymous.returncode == 2 and "error [unauthorized]" in anonymous.stderr

    data = b"print('hi')\n"
    sha = hashlib.sha256(data).hexdigest()
    files = [{"path": "train.py", "sha256": sha, "size": len(data), "executable": False}]
    for method, path, body, raw in (
        ("POST", "/jobs", {"argv": ["python", "train.py"]}, None),
        ("POST", "/snapshots/missing", {"sha256": [sha]}, None),
        ("PUT", f"/snapshots/blobs/{sha}", None, data),
        ("POST", "/snapshots", {"files": files}, None),
        ("POST", "/jobs/1/cancel", {}, None),
    ):
        status, answer = api(dashboard, method, path, dashboard.log_token, body, raw)
        assert status == 403, (method, path, answer)
        assert answer["error"]["code"] == "forbidden_scope", answer
    assert blob_files(dashboard.artifact_root) == set()
    status, jobs = api(dashboard, "GET", "/jobs", dashboard.log_token)
    assert status == 200 and jobs["jobs"] == []
    # the admin token may; a log token may read what it made
    assert api(dashboard, "PUT", f"/snapshots/blobs/{sha}", TOKEN, data=data)[0] == 201
    status, made = api(dashboard, "POST", "/snapshots", TOKEN, {"files": files})
    assert status == 201 and made["files"] == 1
    status, read = api(dashboard, "GET", f"/snapshots/{made['id']}", dashboard.log_token)
    assert status == 200 and read["file_list"] == files


def test_cancel_over_http(dashboard: Dashboard, tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    assert tracker(project, "submit", "train.py", *remote(dashboard), "-c", "lr=1").returncode == 0
    refused = tracker(project, "jobs", "cancel", "1", *remote(dashboard, dashboard.log_token))
    assert refused.returncode == 2 and "error [forbidden_scope]" in refused.stderr
    done = tracker(project, "jobs", "cancel", "1", *remote(dashboard))
    assert done.returncode == 0 and done.stdout == "job 1: cancelled\n", done.stderr
    again = tracker(project, "jobs", "cancel", "1", *remote(dashboard))
    assert again.stdout == "job 1: not cancelled: already cancelled\n"
    shown = tracker(project, "jobs", "show", "1", *remote(dashboard, dashboard.log_token))
    assert "status:          cancelled" in shown.stdout


def test_no_snapshot_over_http_says_the_worker_uses_its_own_files(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "project")
    done = tracker(project, "submit", "train.py", "--no-snapshot", *remote(dashboard),
                   "-c", "lr=1", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note: no code snapshot (--no-snapshot): the worker runs the job from its own files" in (
        done.stderr
    )
    job = json.loads(done.stdout)
    assert job["snapshot_id"] is None and job["argv"] == ["python", "train.py"]
    assert blob_files(dashboard.artifact_root) == set()


def test_a_blob_that_does_not_hash_to_its_name_is_refused_and_nothing_kept(
    dashboard: Dashboard,
) -> None:
    claimed = hashlib.sha256(b"the real file").hexdigest()
    sent = b"something else"
    status, answer = api(dashboard, "PUT", f"/snapshots/blobs/{claimed}", TOKEN, data=sent)
    assert status == 400, answer
    error = answer["error"]
    assert error["code"] == "sha256_mismatch" and error["field"] == "sha256"
    assert claimed in error["message"] and hashlib.sha256(sent).hexdigest() in error["message"]
    status, missing = api(dashboard, "POST", "/snapshots/missing", TOKEN, {"sha256": [claimed]})
    assert status == 200 and missing == {"missing": [claimed]}
    assert blob_files(dashboard.artifact_root) == set()
    assert upload_files(dashboard.artifact_root) == []
    status, answer = api(dashboard, "PUT", "/snapshots/blobs/not-a-hash", TOKEN, data=sent)
    assert status == 400 and answer["error"]["field"] == "sha256"


def test_a_file_list_that_leaves_the_project_root_is_refused(dashboard: Dashboard) -> None:
    data = b"x"
    sha = hashlib.sha256(data).hexdigest()
    assert api(dashboard, "PUT", f"/snapshots/blobs/{sha}", TOKEN, data=data)[0] == 201
    for path in ("../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b"):
        files = [{"path": path, "sha256": sha, "size": 1, "executable": False}]
        status, answer = api(dashboard, "POST", "/snapshots", TOKEN, {"files": files})
        assert status == 400, (path, answer)
        assert (
            answer["error"]["field"] == "path"
            and "relative to the project root" in (answer["error"]["message"])
        )
    status, jobs = api(dashboard, "POST", "/jobs", TOKEN, {"argv": ["python", "x.py"],
                                                          "snapshot_id": 1})  # fmt: skip
    assert status == 400 and "snapshot 1 does not exist" in jobs["error"]["message"]


# ------------------------------------------------------------- Flask test client


def test_a_job_body_is_checked_field_by_field(client: FlaskClient) -> None:
    argv = ["python", "train.py"]
    for body, field, words in (
        ({"argv": argv, "command": "rm -rf /"}, "command", "unknown field 'command'"),
        ({"argv": argv, "schedule_id": 1}, "schedule_id", "unknown field"),
        ({"argv": argv, "gpus": "2"}, "gpus", "gpus must be an integer, not str"),
        ({"argv": argv, "priority": True}, "priority", "priority must be an integer"),
        ({"argv": argv, "timeout_s": "1h"}, "timeout_s", "timeout_s must be a number"),
        ({"argv": argv, "tags": ["a", 1]}, "tags", "tags[1] must be a string"),
        ({"argv": "python train.py"}, "argv", "argv must be a list"),
        ({"argv": ["python", 3]}, "argv", "argv[1] must be a string"),
        ({}, "argv", "argv is required"),
        ({"argv": argv, "env": {"TRACKER_URI": "x"}}, "env", "set by the worker"),
        ({"argv": argv, "gpus": 5000}, "gpus", "from 0 to 1024"),
        ({"argv": argv, "snapshot_id": 42}, "snapshot_id", "snapshot 42 does not exist"),
        ({"argv": argv, "sbatch": ["--wrap=sh"]}, "sbatch", ""),
        ({"argv": argv, "fail_on": "nonsense"}, "fail_on", "nonsense"),
        ({"argv": argv, "config": {"a": 1}, "configs": [{}]}, "configs", "not both"),
        ({"argv": argv, "configs": []}, "configs", "at least one"),
        ({"argv": argv, "configs": [{}] * 1001}, "configs", "at most 1000"),
        ({"argv": argv, "configs": [1]}, "configs", "configs[0] must be an object"),
    ):
        response = client.post("/api/v1/jobs", json=body)
        assert response.status_code == 400, (body, response.json)
        error = envelope(response)
        assert error.get("field") == field and words in error["message"], (body, error)
    for raw, field in (  # text no store can hold (PostgreSQL: no NUL; nobody: a lone surrogate)
        ('{"argv": ["python", "a\\u0000"]}', "argv"),
        ('{"argv": ["python"], "name": "\\ud800"}', "name"),
        ('{"argv": ["python"], "config": {"k\\u0000": 1}}', "config"),
        ('{"argv": ["python"], "configs": [{"k": ["\\udfff"]}]}', "configs[0].k[0]"),
    ):
        response = client.post("/api/v1/jobs", data=raw, content_type="application/json")
        assert response.status_code == 400, (raw, response.json)
        assert envelope(response)["field"] == field, raw
    assert client.get("/api/v1/jobs").json["total"] == 0


def test_a_sweep_body_queues_one_job_per_config(client: FlaskClient) -> None:
    body = {"argv": ["python", "train.py"], "cwd": ".", "tags": ["sweep-1"], "priority": 3,
            "configs": [{"lr": 0.1}, {"lr": 0.2}]}  # fmt: skip
    response = client.post("/api/v1/jobs", json=body)
    assert response.status_code == 201, response.json
    jobs = response.json["jobs"]
    assert [j["config"] for j in jobs] == [{"lr": 0.1}, {"lr": 0.2}]
    assert {j["priority"] for j in jobs} == {3} and {j["cwd"] for j in jobs} == {"."}
    one = client.post("/api/v1/jobs", json={"argv": ["python", "train.py"], "env": {"K": "v"}})
    assert one.status_code == 201 and one.json["env_keys"] == ["K"] and "env" not in one.json
    assert one.json["snapshot_id"] is None


def test_a_blob_past_the_per_file_limit_is_refused_and_nothing_kept(
    make_app: Any, tmp_path: Path
) -> None:
    root = tmp_path / "blobs"
    client = make_app(MAX_ARTIFACT_BYTES=1000, ARTIFACT_ROOT=str(root)).test_client()
    data = b"b" * 1001
    url = f"/api/v1/snapshots/blobs/{hashlib.sha256(data).hexdigest()}"
    announced = client.put(url, data=data)
    assert announced.status_code == 413, announced.json
    assert "at most 1000" in envelope(announced)["message"]
    streamed = client.put(  # no Content-Length: cut off while streaming
        url, input_stream=io.BytesIO(data), headers={"Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )  # fmt: skip
    assert streamed.status_code == 413, streamed.json
    error = envelope(streamed)
    assert error["code"] == "too_large" and "limit of 1000 bytes per file" in error["message"]
    assert blob_files(root) == set() and upload_files(root) == []
    fits = b"b" * 1000
    assert client.put(f"/api/v1/snapshots/blobs/{hashlib.sha256(fits).hexdigest()}",
                      data=fits).status_code == 201  # fmt: skip


# ---------------------------------------------------------------- untrusted lists

KNOWN = b"known file"
KNOWN_SHA = hashlib.sha256(KNOWN).hexdigest()
path_parts = st.one_of(
    st.sampled_from(["a", "b.py", "..", ".", "", "x y", "ü", "a\\b", "a\0b", "\n", "\ud800"]),
    st.text(st.characters(exclude_categories=()), max_size=8),  # surrogates too
)
paths = st.one_of(
    st.lists(path_parts, min_size=1, max_size=4).map("/".join),
    st.sampled_from(["/etc/passwd", "a" * 1025, "a/" * 600 + "b"]),
    st.integers(), st.none(), st.booleans(),
)  # fmt: skip
json_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10),
)  # fmt: skip
valid_entries = st.fixed_dictionaries(
    {"path": st.lists(st.sampled_from(["a", "b.py", "dir", "x y", "ü", "..a", "a.."]),
                      min_size=1, max_size=3).map("/".join),
     "sha256": st.just(KNOWN_SHA), "size": st.integers(0, 2**40)},
    optional={"executable": st.booleans()},
)  # fmt: skip
entries = st.one_of(
    valid_entries,
    st.fixed_dictionaries(
        {"path": paths,
         "sha256": st.one_of(st.just(KNOWN_SHA), st.just("0" * 64), st.just(KNOWN_SHA.upper()),
                             json_values),
         "size": st.one_of(st.just(len(KNOWN)), json_values),
         "executable": st.one_of(st.booleans(), json_values)},
        optional={"extra": json_values},
    ),
    json_values,
    st.lists(json_values, max_size=2),
)  # fmt: skip
bodies = st.fixed_dictionaries(
    {"files": st.one_of(st.lists(valid_entries, min_size=1, max_size=6),
                        st.lists(entries, max_size=6), json_values)},
    optional={"git_commit": st.one_of(st.text("0123456789abcdef", max_size=70), json_values),
              "git_diff": st.one_of(st.text(max_size=50), json_values),
              "root_name": st.one_of(st.text(max_size=300), json_values, st.just("a\ud800"))},
)  # fmt: skip


@pytest.fixture
def blob_client(make_app: Any, tmp_path: Path) -> FlaskClient:
    """An app with an artifact root of its own (a PostgreSQL store has none by default)."""
    return make_app(ARTIFACT_ROOT=str(tmp_path / "blobs")).test_client()  # type: ignore[no-any-return]


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies)
def test_untrusted_file_lists_never_get_a_500(
    blob_client: FlaskClient, body: dict[str, Any]
) -> None:
    client = blob_client
    store = client.application.extensions["tracker"].store
    if not blob_store(store).exists(KNOWN_SHA):
        assert client.put(f"/api/v1/snapshots/blobs/{KNOWN_SHA}", data=KNOWN).status_code == 201
    raw = json.dumps(body)  # ASCII: an unpaired surrogate travels as its \ud800 escape
    response = client.post("/api/v1/snapshots", data=raw, content_type="application/json")
    event(f"status {response.status_code}")  # --hypothesis-show-statistics: both happen
    assert response.status_code in (201, 400), (body, response.status_code, response.text[:300])
    if response.status_code == 400:
        envelope(response)
        return
    made = response.json
    files = snapshots.snapshot_files(store, made["id"])
    assert made["files"] == len(files) >= 1
    for f in files:  # every stored path stays inside the project root
        assert not f.path.startswith("/") and ".." not in f.path.split("/")
        assert f.sha256 == KNOWN_SHA
    read = client.get(f"/api/v1/snapshots/{made['id']}").json
    assert [f["path"] for f in read["file_list"]] == sorted(f.path for f in files)
