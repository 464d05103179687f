"""The CLI's read commands against a real dashboard over real HTTP (``--uri http://...``):
the same answers as from the database, the token rules of the API, clear errors for the
commands that need the database; and the read commands' new columns and formats."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from flask import Flask

from tests.support.servers import ServerThread
from tests.support.web import TOKEN
from tracker.cli import main
from tracker.entities import Failure, GpuDevice, JobSpec
from tracker.store import Store, logs, queue, tokens
from tracker.store import workers as store_workers
from tracker.store.checkpoints import add_checkpoint
from tracker.store.events import add_event
from tracker.store.metrics import intern_keys, log_metrics, write_points
from tracker.store.runs import create_run, finish_run

LONG_PATH = "/data/checkpoints/" + "very-long-experiment-name/" * 4 + "step-000120.pt"
POINTS = 12_345  # more than one page (10,000) of `runs export`


def _seed(store: Store, tmp_path: Path) -> dict[str, int]:
    """Runs with metrics (bytes, NaN, many points), a checkpoint with a long path, an event;
    a two-job sweep a worker runs (one failed with output, one running), a queued job."""
    run = create_run(store, "vision", "r1", {"lr": 0.001, "model": {"width": 64}}, ["base"])
    log_metrics(store, run.id, 0, {"train/loss": 1.25, "sys/rss_bytes": 522895360.0})
    log_metrics(store, run.id, 1, {"train/loss": math.nan, "sys/rss_bytes": 622895360.0})
    key_id = intern_keys(store, ["long/series"])["long/series"]
    write_points(
        store, [(run.id, key_id, s, 1_700_000_000_000 + s, s * 0.5) for s in range(POINTS)]
    )
    add_checkpoint(store, run.id, 120, LONG_PATH, 3 * 1024**3, "ab" * 32, {"val/acc": 0.93})
    add_event(store, run.id, "diagnosis", "loss is NaN at step 1")
    finish_run(store, run.id, "failed", exit_code=1, failure_class="nan_loss", failure_hint="h")
    other = create_run(store, "nlp", "r2", {"lr": 0.1}, [])
    log_metrics(store, other.id, 0, {"val/acc": 0.5, "io/read_bytes": 2 * 1024**3})

    argv = [sys.executable, "train.py"]
    sweep = queue.enqueue_many(
        store,
        [JobSpec(argv=argv, cwd=str(tmp_path), config={"lr": lr}, env={"SECRET": "hunter2-value"})
         for lr in (0.1, 0.01)],
    )  # fmt: skip
    store_workers.register_worker(
        store, "w-1", host="gpu-01", pid=7, gpus=[GpuDevice(0, "H100")], max_jobs=2
    )
    first, _ = queue.claim(store, "w-1", lease_s=600, max_gpus=1) or pytest.fail("no claim")
    second, _ = queue.claim(store, "w-1", lease_s=600, max_gpus=1) or pytest.fail("no claim")
    logs.append(store, first, [("stdout", 1.0, "step 1 loss 0.5\n"), ("stderr", 2.0, "OOM!\n")])
    queue.finish(store, first, exit_code=1, failure=Failure("oom", "lower the batch size"))
    queue.enqueue(store, JobSpec(argv=argv, cwd=str(tmp_path), project="later", fail_on="none"))
    return {"run": run.id, "failed_job": first.job.id, "running_job": second.job.id,
            "sweep": sweep[0].id}  # fmt: skip


@pytest.fixture
def dashboard(
    store_url: str, make_app: Callable[..., Flask], tmp_path: Path
) -> Iterator[tuple[str, str, dict[str, int]]]:
    """(store URL, dashboard URL, seeded ids): a token-protected app served over HTTP."""
    app = make_app(TOKEN=TOKEN)
    ids = _seed(app.extensions["tracker"].store, tmp_path)
    server = ServerThread(app)
    yield store_url, server.url, ids
    server.stop()


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    base = {"TRACKER_URI": None, "TRACKER_TOKEN": None}
    return CliRunner().invoke(main, list(args), env={**base, **(env or {})})


def local(store_url: str, *args: str) -> Result:
    return cli(*args, "--uri", store_url)


def remote(url: str, *args: str, token: str | None = TOKEN) -> Result:
    extra = ["--token", token] if token else []
    return cli(*args, "--uri", url, *extra)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


READS = [
    ("runs", "ls"),
    ("runs", "ls", "--json"),
    ("runs", "ls", "-f", "config.lr < 0.01", "--status", "failed"),
    ("runs", "ls", "--project", "nlp", "--json"),
    ("runs", "show", "1"),
    ("runs", "show", "1", "--json"),
    ("runs", "export", "1"),
    ("runs", "export", "1", "--key", "train/loss"),
    ("jobs", "ls", "--json"),
    ("jobs", "ls", "--status", "failed"),
    ("jobs", "ls", "--status", "queued", "--status", "running", "--json"),
    ("jobs", "show", "1"),
    ("jobs", "show", "2", "--json"),
    ("jobs", "show", "3"),
    ("jobs", "logs", "1"),
    ("jobs", "logs", "1", "--stream", "stderr"),
    ("jobs", "logs", "1", "--attempt", "2"),
    ("workers", "ls"),
    ("workers", "ls", "--json"),
]


def test_every_read_gives_the_same_answer_over_http(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    store_url, url, _ = dashboard
    for args in READS:
        here, there = local(store_url, *args), remote(url, *args)
        assert here.exit_code == there.exit_code == 0, (args, here.output, there.output)
        assert there.stdout == here.stdout, args
        assert here.stdout.strip() or args[:2] == ("jobs", "logs"), args


def test_export_pages_through_every_point_over_http(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, ids = dashboard
    rows = list(csv.reader(io.StringIO(ok(remote(url, "runs", "export", str(ids["run"]),
                                                  "--key", "long/series")).stdout)))  # fmt: skip
    assert rows[0] == ["key", "step", "wall_time", "value"]
    assert [int(r[1]) for r in rows[1:]] == list(range(POINTS))
    assert rows[-1][3] == repr((POINTS - 1) * 0.5)


def test_export_of_a_missing_key_is_an_error_naming_it(
    dashboard: tuple[str, str, dict[str, int]], tmp_path: Path
) -> None:
    store_url, url, ids = dashboard
    out = tmp_path / "out.csv"
    for result in (
        local(store_url, "runs", "export", str(ids["run"]), "--key", "nope", "-o", str(out)),
        remote(url, "runs", "export", str(ids["run"]), "--key", "nope", "--key", "train/loss"),
    ):
        assert result.exit_code == 2, result.output
        assert "run 1 has no metric 'nope'" in result.stderr
        assert "its metrics: long/series, sys/rss_bytes, train/loss" in result.stderr
        assert result.stdout == "" and "points written" not in result.output
    assert not out.exists() or out.read_text() == ""


def test_runs_show_prints_bytes_with_units_and_whole_paths(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, ids = dashboard
    shown = ok(remote(url, "runs", "show", str(ids["run"]))).stdout
    assert "sys/rss_bytes = 594 MiB" in shown  # 622,895,360 bytes
    assert "e+08" not in shown and "e+09" not in shown
    assert LONG_PATH in shown and "..." not in shown
    assert "3 GiB" in shown and "val/acc=0.93" in shown
    assert "exit code: 1" in shown and "train/loss = nan" in shown


def test_runs_ls_prints_byte_metrics_with_units(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, _ = dashboard
    listed = ok(remote(url, "runs", "ls", "--project", "nlp")).stdout
    assert "io/read_bytes=2 GiB" in listed and "val/acc=0.5" in listed


def test_jobs_show_gives_the_fail_on_policy_over_http(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, _ = dashboard
    assert "  fail on:         none\n" in ok(remote(url, "jobs", "show", "3")).stdout
    assert '"fail_on": "none"' in ok(remote(url, "jobs", "show", "3", "--json")).stdout
    assert "  fail on:         errors\n" in ok(remote(url, "jobs", "show", "1")).stdout


def test_jobs_ls_shows_the_config_of_each_sweep_job(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, ids = dashboard
    table = ok(remote(url, "jobs", "ls")).stdout.splitlines()
    header = table[0].split()
    assert "CONFIG" in header
    rows = {line.split()[0]: line for line in table[2:]}
    assert "lr=0.1 " in rows[str(ids["sweep"])] or rows[str(ids["sweep"])].endswith("lr=0.1")
    assert "lr=0.01" in rows[str(ids["sweep"] + 1)]
    assert " - " in rows["3"]  # the job without overrides
    bad = remote(url, "jobs", "ls", "--status", "done")
    assert bad.exit_code == 2 and "'done' is not one of 'queued', 'running'" in bad.output
    assert (
        "[queued|running|succeeded|failed|cancelled|timed_out|crashed|pruned]"
        in ok(cli("jobs", "ls", "--help")).output
    )


def test_workers_ls_shows_job_ids_apart_from_the_count(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, ids = dashboard
    header, _, row = ok(remote(url, "workers", "ls")).stdout.splitlines()[:3]
    cells = dict(zip(header.split(), _cells(header, row), strict=True))
    assert cells["RUNNING"] == "1" and cells["MAX"] == "2"
    assert cells["JOBS"] == f"#{ids['running_job']}"


def _cells(header: str, row: str) -> list[str]:
    """Split a table row at the columns' start positions in the header."""
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    ends = [*starts[1:], None]
    return [row[a:b].strip() for a, b in zip(starts, ends, strict=True)]


def test_workers_jobs_column_lists_several_ids(store: Store, tmp_path: Path) -> None:
    store_workers.register_worker(store, "w-2", host="h", pid=1, gpus=[], max_jobs=3)
    for _ in range(2):
        queue.enqueue(store, JobSpec(argv=["python", "x.py"], cwd=str(tmp_path)))
        queue.claim(store, "w-2", lease_s=600)
    header, _, row = ok(local(store.uri, "workers", "ls")).stdout.splitlines()[:3]
    cells = dict(zip(header.split(), _cells(header, row), strict=True))
    assert (cells["RUNNING"], cells["JOBS"]) == ("2", "#1, #2")


def test_follow_ends_with_the_final_status_over_http(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    store_url, url, ids = dashboard
    for result in (
        local(store_url, "jobs", "logs", str(ids["failed_job"]), "--follow"),
        remote(url, "jobs", "logs", str(ids["failed_job"]), "--follow"),
    ):
        assert result.exit_code == 1, result.output
        assert result.stdout == "step 1 loss 0.5\nOOM!\n"
        assert "job 1 failed: exit code 1, failure oom (lower the batch size)" in result.stderr


def test_a_token_is_needed_and_a_log_token_may_read(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    store_url, url, _ = dashboard
    refused = remote(url, "runs", "ls", token=None)
    assert refused.exit_code == 2
    assert "error [unauthorized]" in refused.stderr and "--token or TRACKER_TOKEN" in refused.stderr
    _, log_token = tokens.create_token(Store(store_url), "log", "laptop")
    assert ok(remote(url, "workers", "ls", token=log_token)).stdout.startswith("ID")
    by_env = cli("jobs", "ls", env={"TRACKER_URI": url, "TRACKER_TOKEN": log_token})
    assert "train.py" in ok(by_env).stdout


def test_commands_that_need_the_database_say_so(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    store_url, url, ids = dashboard
    for args in (("jobs", "requeue", "1"), ("db", "upgrade")):
        result = remote(url, *args, token=None)
        assert result.exit_code != 0, args
        name = " ".join(args[:2])
        assert f"`tracker {name}` needs the database, and {url} is a dashboard" in result.output
        assert (
            "runs ls, runs show, runs export, jobs ls, jobs show, jobs logs, workers ls"
            in result.output
        )
        assert "submits: submit, sweep, jobs cancel" in result.output
    # submit, sweep and cancel go through the API (tests/web/test_remote_submit.py): a token
    refused = remote(url, "jobs", "cancel", str(ids["running_job"]), token=None)
    assert refused.exit_code == 2 and "error [unauthorized]" in refused.stderr
    running = json.loads(ok(local(store_url, "jobs", "ls", "--json")).stdout)
    assert {j["id"]: j["cancel_requested"] for j in running}[ids["running_job"]] is False


def test_an_unreachable_dashboard_is_a_clear_error() -> None:
    from tests.support.web import refusing_port

    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}"
        result = remote(url, "runs", "ls")
    assert result.exit_code == 2
    assert f"error [store_unavailable]: {url} cannot be reached" in result.stderr


def test_http_reader_keeps_env_values_on_the_server(
    dashboard: tuple[str, str, dict[str, int]],
) -> None:
    _, url, ids = dashboard
    listed: list[dict[str, Any]] = json.loads(ok(remote(url, "jobs", "ls", "--json")).stdout)
    job = next(j for j in listed if j["id"] == ids["sweep"])
    assert job["env_keys"] == ["SECRET"] and "env" not in job and "hunter2" not in json.dumps(job)


@pytest.mark.slow
def test_follow_a_live_job_to_its_end_from_the_database_and_over_http(
    store_url: str, make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    """Followers started before a real worker runs the jobs print the output as it comes,
    then the final status, and exit 1 for a failed job, 0 for a succeeded one."""
    from tests.support.runner import Procs, script

    server = ServerThread(make_app(TOKEN=TOKEN))
    procs = Procs(store_url, tmp_path)
    try:
        assert procs.run("submit", "--", *script("fail.py", "oom")).returncode == 0
        ok_argv = [sys.executable, "-c", "print('all done')"]
        assert procs.run("submit", "--", *ok_argv).returncode == 0
        followers = {
            (job, where): procs.tracker(
                "jobs", "logs", str(job), "--follow", "--interval", "0.1",
                *(["--uri", server.url, "--token", TOKEN] if where == "http" else []),
                name=f"follow-{job}-{where}",
            )
            for job in (1, 2)
            for where in ("db", "http")
        }  # fmt: skip
        worker = procs.worker("--gpus", "none", "--exit-when-idle")
        for (job, where), proc in followers.items():
            code = proc.wait(120, f"`jobs logs {job} --follow` ({where}) to end with its job")
            out = proc.output()
            if job == 1:
                assert code == 1, out
                assert "step 1 loss 0.5 (oom)" in out and "CUDA out of memory" in out
                assert "job 1 failed: exit code 1, failure cuda_oom (CUDA ran out" in out
            else:
                assert code == 0, out
                assert out == "all done\njob 2 succeeded: exit code 0\n"
        worker.wait(60, "the worker to exit when the queue is empty")
    finally:
        procs.close()
        server.stop()
