"""The benchmarks still run: ``bench/*.py --quick`` as real subprocesses, SQLite only.

Only the shape of the JSON report is checked -- every number that must exist is there and
positive. Speed is never asserted here (it belongs to bench/RESULTS.md), so a slow or busy
machine cannot fail this test; a benchmark that crashes, loses points (the benchmarks count
what was stored and exit non-zero on a mismatch) or stops reporting a field does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
HAVE_MLFLOW = importlib.util.find_spec("mlflow") is not None
HAVE_TORCH = importlib.util.find_spec("torch") is not None
CALL_FIELDS = ("calls", "median_us", "p99_us", "p999_us", "max_us", "mean_us")


def _run_bench(script: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / f"{script}.json"
    args = [sys.executable, str(BENCH / script), "--quick", "--json", str(out), *extra]
    if not HAVE_MLFLOW:
        args.append("--no-mlflow")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "MLFLOW_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}"
    assert done.stdout.startswith(f"$ python {BENCH / script} --quick"), done.stdout[:300]
    return json.loads(out.read_text(encoding="utf-8"))


def _positive(doc: dict[str, Any], *fields: str) -> None:
    for field in fields:
        value = doc.get(field)
        assert isinstance(value, int | float), f"{field} is {value!r} in {doc}"
        assert value > 0, f"{field} is {value!r}, expected > 0"


def test_bench_log_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_log.py", tmp_path)
    assert doc["benchmark"] == "log"
    assert doc["params"]["quick"] is True
    expected = {"float", "numpy_f64", "numpy_f32"} | ({"torch_0d"} if HAVE_TORCH else set())
    assert set(doc["tracker"]) == expected
    for variant in doc["tracker"].values():
        _positive(variant, *CALL_FIELDS, "loop_us_per_call", "timed_loop_s")
        assert variant["calls"] == doc["params"]["calls"]
        assert variant["median_us"] <= variant["p99_us"] <= variant["p999_us"]
        assert variant["p999_us"] <= variant["max_us"]
    if HAVE_MLFLOW:
        assert set(doc["mlflow"]) == {
            "log_metric_sync",
            "log_metrics_sync",
            "log_metric_async",
            "log_metrics_async",
        }
        for call in doc["mlflow"].values():
            _positive(call, *CALL_FIELDS, "points_per_s")
        _positive(doc["ratios"], "log_metric_sync_median_over_tracker")


@pytest.mark.skipif(not HAVE_TORCH, reason="bench_watch.py trains a small CNN with torch")
def test_bench_watch_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_watch.py", tmp_path)
    assert doc["benchmark"] == "watch"
    for side in ("plain", "watched"):
        _positive(doc["step_ms"][side], "cpu_mean_ms", "cpu_median_ms", "wall_mean_ms")
    assert set(doc["overhead_pct"]) == {
        "cpu_mean", "cpu_median", "wall_mean", "wall_median", "target"
    }  # fmt: skip


def test_bench_ingest_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_ingest.py", tmp_path)
    assert doc["benchmark"] == "ingest"
    results = doc["results"]
    sqlite = results["tracker_sqlite"]
    _positive(sqlite, "points", "seconds", "points_per_s", "db_bytes", "bytes_per_point")
    assert sqlite["points"] == doc["params"]["points"]
    assert "skipped" in results["tracker_postgres"]  # no server URL given to the subprocess
    assert doc["targets"]["sqlite_points_per_s"]["value"] == sqlite["points_per_s"]
    if HAVE_MLFLOW:
        _positive(results["mlflow_sqlite"], "points", "points_per_s", "bytes_per_point")
        _positive(
            doc["ratios"], "sqlite_points_per_s_over_mlflow", "mlflow_bytes_per_point_over_sqlite"
        )


def test_bench_queue_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_queue.py", tmp_path)
    assert doc["benchmark"] == "queue"
    sqlite = doc["results"]["sqlite"]
    _positive(sqlite["latency"], "samples", "median_s", "p90_s", "min_s", "max_s")
    assert sqlite["latency"]["samples"] == doc["params"]["samples"]
    throughput = sqlite["throughput"]
    _positive(throughput, "jobs", "workers", "workers_used", "seconds", "jobs_per_s",
              "claims_per_s", "cycle_ms_per_job_per_worker", "claim_to_end_ms_median")  # fmt: skip
    assert throughput["jobs"] == doc["params"]["jobs"]  # the script checked each ran once
    _positive(throughput["enqueue_to_start_s"], "median", "p99", "max")
    _positive(throughput["cpu_ms_per_job"], "workers", "jobs", "benchmark")
    assert throughput["cpu_ms_per_job"]["postgres"] is None  # SQLite has no server
    assert "skipped" in doc["results"]["postgres"]  # no server URL given to the subprocess
    assert doc["targets"]["sqlite_latency_median_s"]["value"] == sqlite["latency"]["median_s"]


def test_bench_abuse_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_abuse.py", tmp_path)
    assert doc["benchmark"] == "abuse"
    for upload in ("gzip_body", "zip_bomb"):
        result = doc[upload]
        _positive(result, "body_mib", "inflated_mib", "health_probes", "health_p50_ms",
                  "health_p99_ms", "rss_before_mib", "rss_peak_mib")  # fmt: skip
        assert result["upload_status"] != 200
    paths = doc["upload_paths"]  # 16 MiB against a 1 MiB limit, each path
    assert len(paths) == 5
    for name, result in paths.items():
        _positive(result, "rss_before_mib", "rss_peak_mib")
        assert result["disk_after_mib"] <= 1.0, name  # at most one part within the limit
        if "multipart" in name:
            assert result["answers"] == "1 x 200, 15 x 413", result
        else:
            assert result["answers"] == "413", result


def test_bench_memory_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_memory.py", tmp_path)
    assert doc["benchmark"] == "memory"
    assert set(doc["results"]) == {"capped", "capped-keys-per-call", "capped-torch", "uncapped"}
    for result in doc["results"].values():
        _positive(result, "points", "peak_rss_mib", "rss_before_loop_mib",
                  "peak_held_estimate_mib", "loop_us_per_call", "points_per_s")  # fmt: skip
        assert result["points"] == doc["params"]["points"]  # the script counted them stored
    capped = doc["results"]["capped"]
    assert capped["points_through_disk"] > 0  # the quick burst passes its small cap
    assert capped["peak_held_estimate_mib"] <= doc["params"]["cap_mb"] * 1.05
    assert doc["results"]["uncapped"]["points_through_disk"] == 0


def test_bench_artifacts_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_artifacts.py", tmp_path)
    rates = doc["mib_per_s"]
    expected = {"store put_artifact (file)", "store open_artifact", "HTTP PUT (streamed)",
                "HTTP GET (streamed)"}  # fmt: skip
    if importlib.util.find_spec("moto") is not None:
        expected |= {"S3 put_file (moto, multipart)", "S3 open (moto)"}
    assert set(rates) == expected and all(v > 0 for v in rates.values())


def test_bench_fleet_quick_reports_every_field(tmp_path: Path) -> None:
    server = os.environ.get("TRACKER_TEST_PG_URL")
    if not server:
        pytest.skip("bench_fleet.py needs PostgreSQL (TRACKER_TEST_PG_URL)")
    doc = _run_bench("bench_fleet.py", tmp_path, "--pg-url", server)
    assert doc["benchmark"] == "fleet"
    for setup in ("http", "postgres"):
        result = doc["results"][setup]
        _positive(result, "procs", "points", "points_per_s", "log_median_us", "log_p99_us",
                  "log_p999_us", "finish_s_max")  # fmt: skip
        assert result["stored_points"] == result["points"]  # the script counted them too


@pytest.mark.skipif(not HAVE_TORCH, reason="the torch variant needs torch")
def test_bench_media_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_media.py", tmp_path)
    assert doc["benchmark"] == "media"
    assert doc["params"]["quick"] is True
    assert set(doc["tracker"]) == {"numpy_uint8", "torch_float32"}
    for variant in doc["tracker"].values():
        _positive(variant, *CALL_FIELDS, "cpu_median_us", "loop_s", "drain_after_loop_s")
        assert variant["calls"] == doc["params"]["images"]
    assert set(doc["copy_floor"]) == {"fresh memory (copies kept)", "reused memory"}
    for row in doc["copy_floor"].values():
        _positive(row, *CALL_FIELDS)
    loop = doc["loop"]  # the training-loop part: every variant, each checked stored
    assert len(loop) == 5 and "no image" in loop
    assert "image, encoder in the idle class (default)" in loop
    assert "numpy image, idle class (default)" in loop
    for name, row in loop.items():
        _positive(row, "step_ms")
        assert len(row["step_ms_each_rep"]) == doc["params"]["loop_reps"]
        if name != "no image":
            _positive(row, "call_median_us", "call_p99_us", "call_mean_us")


@pytest.mark.skipif(not HAVE_MLFLOW, reason="bench_mlflow_route.py drives the mlflow client")
def test_bench_mlflow_route_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_mlflow_route.py", tmp_path)
    assert doc["benchmark"] == "mlflow_route"
    for server in ("tracker", "mlflow"):
        result = doc["results"][server]
        _positive(result, "points", "points_per_s", "log_metric_median_ms", "log_metric_p99_ms")
        assert result["stored"] == result["points"]  # the script checked it too
    _positive(doc["ratios"], "log_batch_speedup", "log_metric_median_speedup")


@pytest.mark.skipif(not HAVE_TORCH, reason="bench_corpus.py trains small models with torch")
def test_bench_corpus_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_corpus.py", tmp_path)
    assert doc["benchmark"] == "corpus"
    assert doc["params"]["quick"] is True and doc["params"]["configs"] == 10
    splits = doc["splits"]
    assert set(splits) == {"heldout", "tuning"}
    assert sum(s["configs"] for s in splits.values()) == 10
    for half in splits.values():
        assert half["crashed"] == 0  # every healthy training ran to its end
        assert half["runs"] >= half["configs"] >= half["configs_with_alarm"] >= 0
    assert len(doc["healthy"]) == 10
    for result in doc["healthy"]:
        assert result["ok"] and result["split"] in splits and result["runs"]
        assert all(isinstance(run["diagnoses"], list) for run in result["runs"])
    # the failing scripts ran, and each result says what was expected and what was found
    assert [f["script"] for f in doc["failing"]] == [
        "nan_lr.py", "divergence.py", "grad_explosion.py",
    ]  # fmt: skip
    for f in doc["failing"]:
        assert f["ok"], f.get("stderr")
        assert isinstance(f["detected"], bool) and f["code"] in doc["kinds"]
    for kind in doc["kinds"].values():
        assert set(kind) == {"heldout", "tuning", "scripts", "detected", "on_time"}
        assert kind["detected"] <= kind["scripts"]
    # a false alarm is what the user saw: the final pass's diagnoses, and what a live pass
    # showed that the final pass took back (each once)
    alarms = 0
    for r in doc["healthy"]:
        for run in r["runs"]:
            final = {(d["code"], d["metric"]) for d in run["diagnoses"]}
            live = {(d["code"], d["metric"]) for d in run["live"]} - final
            alarms += len(run["diagnoses"]) + len(live)
    assert len(doc["false_alarms"]) == alarms
    _positive(doc, "seconds")


def test_bench_pages_quick_reports_every_field(tmp_path: Path) -> None:
    from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path

    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    doc = _run_bench("bench_pages.py", tmp_path)
    assert doc["benchmark"] == "pages" and len(doc["cold"]) == doc["params"]["visits"] == 2
    for visit in [*doc["cold"], doc["warm"]]:
        _positive(visit, "dcl", "chart", "idle", "bytes")
        assert visit["dcl"] <= visit["chart"]  # the chart is drawn by the page's scripts


def test_bench_workspace_quick_reports_every_field(tmp_path: Path) -> None:
    from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path

    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    doc = _run_bench("bench_workspace.py", tmp_path)
    assert doc["benchmark"] == "workspace" and len(doc["cold"]) == doc["params"]["visits"] == 1
    for visit in [*doc["cold"], doc["warm"]]:
        _positive(visit, "drawn", "first_drawn", "series_ms", "panels")
        assert visit["traces"] == [doc["params"]["runs"]] * 8  # every run in every panel
        assert visit["first_drawn"] <= visit["drawn"]
        # a first draw asks one metric per request; a page whose table answered after the
        # workspace's first requests began asks again (seen under load: 11 requests)
        assert visit["keys_per_request"].count(1) >= 8, visit["keys_per_request"]
    _positive(doc, "server_ms", "server_grouped_ms", "body_bytes")


@pytest.mark.skipif(not HAVE_TORCH, reason="sweep_search.py trains a small MLP with torch")
def test_bench_sweep_search_quick_reports_every_field(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    doc = _run_bench("sweep_search.py", tmp_path)
    assert doc["benchmark"] == "sweep_search"
    params = doc["params"]
    known = doc["landscape"]
    _positive(known, "optimum", "optimum_lr", "optimum_wd", "threshold", "trainings")
    assert known["threshold"] > known["optimum"]
    # the refined optimum is never above the coarse grid's minimum it refines
    assert known["grid_minimum_over_optimum"] >= 1
    assert 0 <= known["share_within"] <= known["share_within_10pct"] <= 1
    # the trial's own training (one model) lands where the batched grid said
    assert known["optimum_trained_alone"] == pytest.approx(known["optimum"], rel=1e-3)
    for method in ("tpe", "random"):
        found = doc["search"][method]
        assert len(found["trials_to_within"]) == len(found["best"]) == params["seeds"]
        for n in found["trials_to_within"]:
            assert n is None or 1 <= n <= params["trials"]
    pruning = doc["pruning"]
    assert set(pruning) == {"none", "asha", "hyperband", "median"}
    assert pruning["none"]["step_saving"] == 0
    assert all(s.get("pruned", 0) == 0 for s in pruning["none"]["states"])
    for doc_ in pruning.values():
        _positive(doc_, "steps", "seconds", "median_best")
        # every trial of every sweep ended (the script checked the count per sweep)
        for states in doc_["states"]:
            assert sum(states.values()) == params["trials"] and "running" not in states


def test_bench_chunks_quick_reports_every_field(tmp_path: Path) -> None:
    doc = _run_bench("bench_chunks.py", tmp_path)
    assert doc["benchmark"] == "chunks"
    results = doc["results"]
    assert len(results) == 4
    for result in results:
        _positive(result, "points", "rows_bytes_per_point", "chunks_bytes_per_point",
                  "codec_bytes_per_point", "seal_points_per_s", "encode_points_per_s",
                  "decode_points_per_s", "history_rows_ms", "history_chunks_ms",
                  "read_points_chunks_ms")  # fmt: skip
        assert result["points"] == doc["params"]["points"]
        # the one claim of the layout: fewer bytes than a row per point, whatever the series
        assert result["chunks_bytes_per_point"] < result["rows_bytes_per_point"], result
    reads = doc["charts"]
    assert [r["read"] for r in reads] == [
        "whole run (100,000 steps)", "5,000 steps", "1,000 steps",
        "10 runs x 5,000 points (workspace)",
    ]  # fmt: skip
    for read in reads:
        _positive(read, "rows_ms", "chunks_ms")
        assert read["rows_source"] == read["chunks_source"], read
    assert [r["rows_source"] for r in reads] == ["rollup-256", "points", "points", "aligned"]
    # 5 runs x 100,000 points, packed: the 256 level (a 114-bucket panel's bucket spans 877
    # steps; at 400 and 1,000 buckets 250 and 100, where 100,000 points are past the row
    # budget); then the workspace's own request at a narrow and the widest panel
    long = doc["long_overlay"]
    assert [r["source"] for r in long[:4]] == ["rollup-256"] * 4, long
    assert [r["read"] for r in long[4:]] == [
        "GET workspace/series, 5 runs, 114 buckets", "GET workspace/series, 5 runs, 400 buckets"
    ], long  # fmt: skip
    assert all(r["source"].endswith(" B of JSON") for r in long[4:]), long
    for read in long:
        _positive(read, "ms", "write_points_per_s")
