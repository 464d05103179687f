"""Signals captured without user code, from real training processes (SQLite and PostgreSQL).

Step time and RSS per step, exit status of ``sys.exit(N)``, console capture of a run started
by hand (and the failure class read from it), and ``tracker.watch()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.store import Store
from tracker.store import logs as store_logs
from tracker.store.diagnoses import diagnose_run
from tracker.store.metrics import count_points, metric_history, metric_keys
from tracker.store.runs import get_run

SCRIPT = str(Path(__file__).parent / "scripts" / "signals_script.py")
pytestmark = pytest.mark.slow


def run_script(
    uri: str, mode: str, arg: str = "", env: dict[str, str] | None = None
) -> tuple[int, subprocess.CompletedProcess[str]]:
    done = subprocess.run(
        [sys.executable, SCRIPT, uri, mode, *([arg] if arg else [])],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
        check=False,
    )
    first = done.stdout.splitlines()[0] if done.stdout else ""
    assert first.startswith("RUN "), f"no RUN line; stdout={done.stdout!r} stderr={done.stderr!r}"
    return int(first.split()[1]), done


def series(store: Store, run_id: int, key: str) -> dict[int, float]:
    return {p.step: p.value for p in metric_history(store, run_id, key)}


def console_text(store: Store, run_id: int) -> str:
    job_id, chunks = store_logs.run_logs(store, run_id, limit=5000)
    assert job_id is None
    return "".join(c.text for c in chunks)


# ------------------------------------------------------------------ step time and memory


def test_step_time_is_recorded_per_step_without_user_code(store_url: str) -> None:
    run_id, done = run_script(store_url, "steps")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    step_time = series(store, run_id, "sys/step_time_s")
    assert sorted(step_time) == list(range(1, 50))  # every step after the first
    assert all(0.045 <= v < 5.0 for v in step_time.values()), step_time  # 50 ms sleeps
    rss = series(store, run_id, "sys/rss_bytes")
    # init (step 0), at least 2 samples from the 2.5 s loop at >= 1 Hz, finish (step 49)
    assert 0 in rss and 49 in rss and len(rss) >= 4, rss
    assert all(v > 10 * 2**20 for v in rss.values())


def test_a_short_run_still_has_a_memory_series(store_url: str) -> None:
    run_id, done = run_script(store_url, "short")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    assert sorted(series(store, run_id, "sys/rss_bytes")) == [0, 2]  # init and finish
    assert sorted(series(store, run_id, "sys/step_time_s")) == [1, 2]


def test_system_metrics_off_turns_the_automatic_signals_off(store_url: str) -> None:
    run_id, done = run_script(store_url, "no-signals")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    assert metric_keys(store, run_id) == ["loss"]
    assert count_points(store, run_id) == 3


# ------------------------------------------------------------------ exit status


@pytest.mark.parametrize(("code", "status"), [("3", "failed"), ("0", "finished")])
def test_sys_exit_code_decides_the_run_status(store_url: str, code: str, status: str) -> None:
    run_id, done = run_script(store_url, "exit", code)
    assert done.returncode == int(code)
    run = get_run(Store(store_url), run_id)
    assert run.status == status
    assert run.exit_code == int(code)
    if status == "failed":
        assert run.failure_class == "exit_code" and "code 3" in (run.failure_hint or "")


def test_a_caught_sys_exit_does_not_fail_the_run(store_url: str) -> None:
    run_id, done = run_script(store_url, "caught-exit")
    assert done.returncode == 0, done.stderr
    run = get_run(Store(store_url), run_id)
    assert run.status == "finished" and run.exit_code is None


def test_uncaught_exception_is_failed_with_code_1_and_classified(store_url: str) -> None:
    run_id, done = run_script(store_url, "raise")
    assert done.returncode == 1
    assert "ValueError: bad batch shape (3, 4)" in done.stderr  # still on the terminal
    run = get_run(Store(store_url), run_id)
    assert (run.status, run.exit_code) == ("failed", 1)
    assert run.failure_class == "python_exception"
    assert "ValueError" in (run.failure_hint or "")


# ------------------------------------------------------------------ console capture


def test_console_is_teed_into_the_store_and_still_printed(store_url: str) -> None:
    run_id, done = run_script(store_url, "raise")
    # The terminal got everything, in order, as without the tracker.
    assert done.stdout.splitlines()[1:] == ["line one on stdout"]
    # tracker.init's own line first (the run and its store), then the script's, unchanged
    init_line, script_err = done.stderr.split("\n", 1)
    assert init_line.startswith(f"tracker: run {run_id} ")
    assert script_err.startswith("line two on stderr\nTraceback (most recent call last):")
    store = Store(store_url)
    stored = console_text(store, run_id)
    assert "line one on stdout\n" in stored
    assert "line two on stderr\n" in stored
    assert stored.rstrip().endswith("ValueError: bad batch shape (3, 4)")
    _, chunks = store_logs.run_logs(store, run_id, stream="stderr")
    assert "line one" not in "".join(c.text for c in chunks)


def test_failure_class_comes_from_the_captured_output(store_url: str) -> None:
    run_id, done = run_script(store_url, "oom")
    assert done.returncode == 1
    run = get_run(Store(store_url), run_id)
    assert run.failure_class == "cuda_oom"
    assert "2.00 GiB" in (run.failure_hint or "")


def test_capture_console_false_stores_nothing(store_url: str) -> None:
    run_id, done = run_script(store_url, "quiet")
    assert "epoch 0 starting" in done.stdout
    store = Store(store_url)
    assert console_text(store, run_id) == ""
    assert get_run(store, run_id).status == "failed"


def test_no_capture_under_a_worker(store_url: str) -> None:
    run_id, done = run_script(store_url, "raise", env={"TRACKER_JOB_ID": "12345"})
    assert "line one on stdout" in done.stdout
    assert store_logs._own_logs(Store(store_url), run_id, 0, 100, None, False) == []


def test_console_output_is_bounded_keeping_the_newest(store_url: str) -> None:
    run_id, done = run_script(store_url, "noisy", "2000")  # 200,000 characters, cap 10,000
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 2002  # RUN, 2000 lines, DONE: nothing swallowed
    stored = console_text(Store(store_url), run_id)
    assert len(stored) <= 10_000 + 200
    assert "characters of older output were trimmed" in stored
    assert "line 001999 " in stored and "line 000000 " not in stored


# ------------------------------------------------------------------ watch()


def test_watch_logs_gradient_update_and_amp_health(store_url: str) -> None:
    run_id, done = run_script(store_url, "watch")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    grad = series(store, run_id, "grad/global_norm")
    assert sorted(grad) == [4, 9, 14, 19]  # every 5th optimizer step, at the step logged next
    assert all(v > 0 for v in grad.values())
    assert sorted(series(store, run_id, "param/global_norm")) == [4, 9, 14, 19]
    ratio = series(store, run_id, "update/ratio")
    assert all(0 < v < 1 for v in ratio.values())
    assert set(series(store, run_id, "amp/loss_scale").values()) == {65536.0}
    assert set(series(store, run_id, "amp/skipped_steps").values()) == {0.0}
    keys = {k for k in metric_keys(store, run_id) if k.startswith("grad/norm/")}
    assert keys <= {"grad/norm/conv.weight", "grad/norm/conv.bias", "grad/norm/head.weight",
                    "grad/norm/head.bias"}  # fmt: skip
    for step in (4, 9, 14, 19):  # top=3: three per watched step
        assert sum(step in series(store, run_id, k) for k in keys) == 3


def test_watch_counts_amp_skipped_steps(store_url: str) -> None:
    run_id, done = run_script(store_url, "watch", "nan")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    skipped = series(store, run_id, "amp/skipped_steps")
    scale = series(store, run_id, "amp/loss_scale")
    assert max(skipped.values()) == 1.0
    assert min(scale.values()) == 32768.0  # halved by the skipped step


def test_watch_follows_the_amp_scale_when_every_step_is_skipped(store_url: str) -> None:
    """GradScaler never calls optimizer.step() on a skipped step: the scale is read after
    scaler.update(), so the series keeps going through a collapse (it went silent before)."""
    run_id, done = run_script(store_url, "watch", "nan_from_5")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    skipped = series(store, run_id, "amp/skipped_steps")
    scale = series(store, run_id, "amp/loss_scale")
    assert sorted(skipped) == list(range(4, 20)), skipped  # step 4 (every 5th), then each skip
    assert skipped[19] == 15.0
    assert scale[19] == 65536.0 / 2**15  # halved by each of the 15 skipped steps
    found = {d.code for d in diagnose_run(store, run_id)}
    assert "amp_scale_collapse" in found, found


def test_watch_under_torch_compile_counts_graph_breaks_and_recompiles(store_url: str) -> None:
    run_id, done = run_script(store_url, "compile")
    assert done.returncode == 0, done.stderr
    store = Store(store_url)
    breaks = series(store, run_id, "compile/graph_breaks")
    recompiles = series(store, run_id, "compile/recompiles")
    assert max(breaks.values()) >= 1
    assert max(recompiles.values()) >= 1  # four batch sizes with dynamic=False
    # hooks sit on the original module: names without the _orig_mod. prefix
    assert any(k.startswith("grad/norm/conv.") for k in metric_keys(store, run_id))


def test_watch_under_ddp_logs_on_rank_0_only_with_the_modules_names(
    store_url: str, tmp_path: Path
) -> None:
    rendezvous = tmp_path / "rendezvous"
    procs = [
        subprocess.Popen(
            [sys.executable, SCRIPT, store_url, "ddp", str(rendezvous)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "2"},
        )
        for rank in (0, 1)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert "WATCHING _Watcher" in outs[0][0]  # rank 0 watches
    assert "WATCHING Watch" in outs[1][0]  # rank 1 gets a watch that does nothing
    store = Store(store_url)
    run_id = int(outs[0][0].splitlines()[0].split()[1])
    grads = {k for k in metric_keys(store, run_id) if k.startswith("grad/norm/")}
    assert grads and all(k.startswith(("grad/norm/0.", "grad/norm/2.")) for k in grads), grads
    assert sorted(series(store, run_id, "grad/global_norm")) == [4, 9, 14, 19]
