"""Every install line the README documents, tested as installed (issue 24, item 1).

The wheel is built once per session; each line gets a fresh ``python -m venv`` with
``pip install -c constraints.txt '<wheel>[extra]'`` alone (never editable, never the ``dev``
extra; torch first where the line's users have it) and runs a smoke of what it promises:

- ``pip install tracker`` (+ torch, as a training host has): the README's ``tracker.log()``
  example with ``log_image``/``log_histogram`` of a tensor and a numpy array, then ``tracker
  runs ls`` shows it finished with its metrics; ``import tracker`` loads neither flask nor
  torch; numpy is there exactly when the base install declares it. Also without torch.
- ``[server]``: ``tracker ui`` serves the runs page to its sign-in token.
- ``[runner]``: ``tracker worker`` runs a ``tracker submit``-ted job to ``succeeded``.
- the demo's set (``server,runner`` + torch, scripts/demo.sh): ``tracker up --demo`` until
  every demo job succeeded, then Ctrl-C ends it.
- ``[integrations]`` (+ torch): examples/lightning_tiny.py and examples/hf_tiny.py store
  their runs.

The suite's own venv has the ``dev`` extra, which is how a demo with a missing dependency
shipped green; these venvs have what a user's has. Slow (minutes: installs and real
training), so marked ``slow`` and ``install``.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.install.installed import ROOT, Server, Venv, build_wheel, make_venv
from tests.support.web import free_port

pytestmark = [pytest.mark.slow, pytest.mark.install, pytest.mark.timeout(900)]

SMOKE_CLIENT = Path(__file__).with_name("smoke_client.py")
DEMO_JOBS = 4  # tracker.cli.ui's DEMO_GRID: 2 learning rates x 2 widths
DEMO_TIMEOUT_S = 600
LOADED_BY_IMPORT = (
    "import json, sys, tracker; print(json.dumps(sorted(set(sys.argv[1:]) & set(sys.modules))))"
)
NEVER_AT_IMPORT = ("flask", "torch", "plotly", "apscheduler", "lightning", "transformers")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def venvs(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Any:
    """``venvs(extras, torch=...)``: a fresh venv per install line, made once per session."""
    made: dict[tuple[str, bool], Venv] = {}

    def get(extras: str, *, torch: bool) -> Venv:
        key = (extras, torch)
        if key not in made:
            name = f"venv-{extras.replace(',', '-') or 'base'}{'-torch' if torch else ''}"
            made[key] = make_venv(tmp_path_factory.mktemp(name) / "venv", wheel, extras,
                                  torch=torch)  # fmt: skip
        return made[key]

    return get


def sqlite_uri(path: Path) -> str:
    return f"sqlite:///{path}"


def smoke_client(venv: Venv, tmp_path: Path) -> tuple[str, int]:
    """Run the README example in ``venv``; the store's URI and the run id."""
    uri = sqlite_uri(tmp_path / "store" / "tracker.db")
    (tmp_path / "store").mkdir()
    done = venv.run("python", str(SMOKE_CLIENT), uri, cwd=tmp_path, what="the README example")
    return uri, int(done.stdout.split()[-1])


def check_readme_run(venv: Venv, uri: str, run_id: int, tmp_path: Path, *, torch: bool) -> None:
    [run] = venv.json("tracker", "runs", "ls", "--uri", uri, cwd=tmp_path)
    assert (run["id"], run["status"], run["name"]) == (run_id, "finished", "readme-example")
    assert run["last_metrics"]["train/loss"] == pytest.approx(1 / 20)
    assert run["config"]["model"] == {"layers": 4, "width": 64}
    arts = venv.json("tracker", "artifacts", "ls", str(run_id), "--uri", uri, cwd=tmp_path)
    paths = {a["path"] for a in arts}
    assert "config.yaml" in paths, paths
    kinds = ["array", "tensor"] if torch else ["array"]  # numpy: the base install's own
    for kind in kinds:  # media/<what>/<key>/<step>.<ext>, the step zero-padded
        assert any(re.fullmatch(rf"media/images/samples/{kind}/0*19\.png", p) for p in paths)
        assert any(re.fullmatch(rf"media/histograms/weights/{kind}/0*19\.json", p) for p in paths)


def declares_numpy(venv: Venv, tmp_path: Path) -> bool:
    code = ("import importlib.metadata as md; print(any(r.split()[0].lower().startswith("
            "'numpy') and 'extra ==' not in r for r in md.requires('tracker')))")  # fmt: skip
    return venv.run("python", "-c", code, cwd=tmp_path).stdout.strip() == "True"


def has_module(venv: Venv, name: str, tmp_path: Path) -> bool:
    code = f"import importlib.util; print(importlib.util.find_spec({name!r}) is not None)"
    return venv.run("python", "-c", code, cwd=tmp_path).stdout.strip() == "True"


def loaded_by_import(venv: Venv, tmp_path: Path) -> list[str]:
    done = venv.run("python", "-c", LOADED_BY_IMPORT, *NEVER_AT_IMPORT, cwd=tmp_path)
    return json.loads(done.stdout)


@pytest.mark.parametrize("torch", [True, False], ids=["with-torch", "without-torch"])
def test_base_install_runs_the_readme_example(venvs: Any, tmp_path: Path, torch: bool) -> None:
    venv = venvs("", torch=torch)
    assert has_module(venv, "torch", tmp_path) is torch
    uri, run_id = smoke_client(venv, tmp_path)
    check_readme_run(venv, uri, run_id, tmp_path, torch=torch)
    # numpy is there exactly as declared: the base install's own, not torch's (it brings none)
    assert has_module(venv, "numpy", tmp_path) is declares_numpy(venv, tmp_path) is True
    assert not has_module(venv, "flask", tmp_path)  # the dashboard is an extra
    assert loaded_by_import(venv, tmp_path) == []


def test_server_extra_serves_the_runs_page(venvs: Any, tmp_path: Path) -> None:
    venv = venvs("server", torch=False)
    uri, _ = smoke_client(venv, tmp_path)  # a run to list (numpy arrays, no torch)
    port = free_port()
    server = Server([str(venv.bin / "tracker"), "ui", "--uri", uri, "--port", str(port)],
                    venv.env(), tmp_path)  # fmt: skip
    try:
        line = server.wait_for_line(f"http://127.0.0.1:{port}/login?token=", 120)
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(line, timeout=30) as page:  # the printed sign-in link -> runs page
            assert (page.status, page.url) == (200, f"http://127.0.0.1:{port}/")
            html = page.read().decode()
        assets = re.findall(r'(?:src|href)="(/static/[^"?]+)', html)
        assert any(a.endswith(".js") for a in assets), html[:2000]
        for asset in assets:  # the wheel's package data: templates, scripts, styles
            with browser.open(f"http://127.0.0.1:{port}{asset}", timeout=30) as served:
                assert served.status == 200, asset
        with browser.open(f"http://127.0.0.1:{port}/api/v1/runs", timeout=30) as api:
            assert [r["name"] for r in json.load(api)["runs"]] == ["readme-example"]
        assert server.interrupt(60) == 0, server.output()
    finally:
        server.kill()


def test_runner_extra_runs_a_submitted_job(venvs: Any, tmp_path: Path) -> None:
    venv = venvs("runner", torch=False)
    uri = sqlite_uri(tmp_path / "tracker.db")
    (tmp_path / "job.py").write_text(
        "import tracker\ntracker.init(project='smoke')\n"
        "for step in range(3):\n    tracker.log({'loss': 1.0 / (step + 1)}, step=step)\n"
    )
    venv.run("tracker", "submit", "--uri", uri, "--project", "smoke", "job.py", cwd=tmp_path)
    venv.run("tracker", "worker", "--uri", uri, "--once", "--gpus", "none", cwd=tmp_path,
             what="tracker worker --once")  # fmt: skip
    [job] = venv.json("tracker", "jobs", "ls", "--uri", uri, cwd=tmp_path)
    logs = venv.run("tracker", "jobs", "logs", str(job["id"]), "--uri", uri, cwd=tmp_path)
    assert job["status"] == "succeeded", logs.stdout + logs.stderr
    [run] = venv.json("tracker", "runs", "ls", "--uri", uri, cwd=tmp_path)
    assert run["status"] == "finished" and run["last_metrics"]["loss"] == pytest.approx(1 / 3)


def _demo_outcome(venv: Venv, uri: str, tmp_path: Path, server: Server) -> list[dict[str, Any]]:
    """Bounded poll until every demo job has ended (or ``tracker up`` has)."""
    ended = {"succeeded", "failed", "cancelled", "timed_out", "crashed"}
    deadline = time.monotonic() + DEMO_TIMEOUT_S
    while time.monotonic() < deadline and server.popen.poll() is None:
        jobs = venv.json("tracker", "jobs", "ls", "--uri", uri, cwd=tmp_path)
        if len(jobs) == DEMO_JOBS and all(j["status"] in ended for j in jobs):
            return jobs
        time.sleep(2)
    pytest.fail(f"the demo jobs did not all end within {DEMO_TIMEOUT_S} s (or `tracker up` "
                f"exited); `tracker up` output:\n{server.output()[-8000:]}")  # fmt: skip


def _job_report(venv: Venv, uri: str, job: dict[str, Any], tmp_path: Path) -> str:
    out = venv.run("tracker", "jobs", "logs", str(job["id"]), "--uri", uri, cwd=tmp_path)
    head = f"--- job {job['id']}: {job['status']} ({job['failure_class']}: {job['failure_hint']})"
    return f"{head}\n{out.stdout[-3000:]}"


def test_demo_set_runs_every_demo_job_to_success(venvs: Any, tmp_path: Path) -> None:
    venv = venvs("server,runner", torch=True)  # what scripts/demo.sh installs
    assert loaded_by_import(venv, tmp_path) == []  # flask and torch are there, not loaded
    uri = sqlite_uri(tmp_path / ".tracker" / "tracker.db")
    (tmp_path / ".tracker").mkdir()
    port = free_port()
    argv = [str(venv.bin / "tracker"), "up", "--demo", "--uri", uri, "--port", str(port)]
    server = Server(argv, venv.env(), tmp_path)
    try:
        server.wait_for_line(f"http://127.0.0.1:{port}/login?token=", 180)
        jobs = _demo_outcome(venv, uri, tmp_path, server)
        bad = [j for j in jobs if j["status"] != "succeeded"]
        if bad:
            logs = [_job_report(venv, uri, job, tmp_path) for job in bad]
            pytest.fail(f"{len(bad)} of {DEMO_JOBS} demo jobs did not succeed:\n" + "\n".join(logs))
        script = jobs[0]["argv"][-1]
        assert re.search(r"site-packages/tracker/demo/train_digits\.py$", script), script
        status = server.interrupt(60)  # Ctrl-C
        assert status in (0, 130, -2), f"exit status {status}\n{server.output()[-4000:]}"
    finally:
        server.kill()
    runs = venv.json("tracker", "runs", "ls", "--uri", uri, "--project", "digits", cwd=tmp_path)
    assert len(runs) == DEMO_JOBS and {r["status"] for r in runs} == {"finished"}


def test_integrations_extra_runs_the_lightning_and_hf_examples(venvs: Any, tmp_path: Path) -> None:
    venv = venvs("integrations", torch=True)
    uri = sqlite_uri(tmp_path / "tracker.db")
    examples = ROOT / "examples"
    venv.run("python", str(examples / "lightning_tiny.py"), "--epochs", "1", cwd=tmp_path,
             what="examples/lightning_tiny.py", TRACKER_URI=uri)  # fmt: skip
    venv.run("python", str(examples / "hf_tiny.py"), "--epochs", "1", cwd=tmp_path,
             what="examples/hf_tiny.py", TRACKER_URI=uri)  # fmt: skip
    runs = venv.json("tracker", "runs", "ls", "--uri", uri, cwd=tmp_path)
    assert sorted(r["project"] for r in runs) == ["hf-tiny", "lightning-tiny"]
    assert all(r["status"] == "finished" and r["last_metrics"] for r in runs), runs


def test_the_tested_lines_are_the_documented_ones() -> None:
    """The README's install table lists exactly the extras these smokes install."""
    readme = (ROOT / "README.md").read_text()
    table = re.findall(r"^\| [^|]+ \| `pip install '?tracker(?:\[(\w+)\])?'?` \|", readme, re.M)
    assert sorted(table) == ["", "integrations", "runner", "server"]
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    assert "TRACKER_EXTRAS=server,runner " in demo
