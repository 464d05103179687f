"""The runs page's workspace in headless Chromium: 100 runs x 8 panels, from navigation to
every panel drawn, and the server time of its batch requests.

A sweep of ``--runs`` (100: 10 learning rates x 10 seeds) runs with 8 metrics each
(``train/loss`` every step, ``val/acc`` and ``val/loss`` every 10th step, 5 more every step;
``--steps`` 1,000 steps) is written into a fresh SQLite store
(``tests/support/workspace_seed.py``); the dashboard (``create_app``, ``--no-auth``) is served
on a free loopback port by a real HTTP server in a thread, and Debian's Chromium (through
Playwright) opens ``/?project=sweep&ws=1`` ``--visits`` (5) times, each in a new browser
context (empty cache), then once more in the same context (cache warm). Per visit, from the
navigation's start:

* ``drawn``: the workspace set ``data-drawn="1"`` on its grid (every panel's ``Plotly.react``
  resolved; the ``workspace-drawn`` performance mark), with 8 panels of 100 runs each;
* ``first_drawn``: the first panel drawn (the ``workspace-first-drawn`` mark): the page asks
  for the metrics a few at a time and draws each answer while the server reads the next;
* ``series``: the batch requests ``/api/v1/workspace/series`` as the browser saw them (from
  the first one's start to the last one's ``responseEnd``) and their bytes on the wire.

Then the whole batch, every metric in one request, is timed in the server alone (Flask's
test client, ``--repeats`` 7 times, median; wall and the thread's CPU time): what the store
read, the grouping and the JSON cost without the network or the browser; once plain and
once grouped by ``config.lr`` (10 groups of 10, without the members' own series, as the
page asks).

With ``--sealed`` every run's points are first sealed into chunks (``tracker.store.chunks``,
what the dashboard's periodic work does a minute after a run ends), so the reads are those
of a finished sweep rather than of one that just ended.

    python bench/bench_workspace.py [--visits 5] [--runs 100] [--steps 1000] [--sealed]
                                    [--json out.json]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common

TARGET_MS = 1500.0
PANELS = 8

MEASURE = """() => {
  const mark = performance.getEntriesByName('workspace-drawn')[0];
  const first = performance.getEntriesByName('workspace-first-drawn')[0];
  const series = performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/api/v1/workspace/series'));
  const keys = series.flatMap((e) => new URL(e.name).searchParams.get('keys').split(','));
  const url = series.length ? new URL(series[0].name) : null;
  if (url) url.searchParams.set('keys', keys.join(','));
  return {
    drawn: mark ? mark.startTime : null,
    first_drawn: first ? first.startTime : null,
    requests: series.length,
    keys_per_request: series.map((e) => new URL(e.name).searchParams.get('keys').split(',').length),
    series_ms: series.length
      ? Math.max(...series.map((e) => e.responseEnd)) - series[0].startTime : null,
    series_bytes: series.reduce((n, e) => n + e.transferSize, 0),
    series_url: url ? url.toString() : null,
    panels: document.querySelectorAll('.ws-chart').length,
    traces: [...document.querySelectorAll('.ws-chart')].map(
      (c) => c.data.reduce((n, t) => n + ((t.meta && t.meta.runs) || []).length, 0)),
  };
}"""


def seed(store_url: str, runs: int, steps: int) -> None:
    from tests.support.workspace_seed import LRS, seed_sweep
    from tracker.store import Store

    store = Store(store_url)
    lrs = LRS[: min(len(LRS), runs)]
    seed_sweep(store, lrs=lrs, seeds=max(1, runs // len(lrs)), steps=steps, extra_keys=5)
    store.close()


def seal_all(store_url: str) -> None:
    import sqlalchemy as sa

    from tracker.store import Store, chunks
    from tracker.store import models as m

    store = Store(store_url)
    with store.engine.connect() as conn:
        runs = conn.execute(sa.select(m.RunRow.id)).scalars().all()
    for run_id in runs:
        chunks.seal_run(store, run_id)
    store.close()


def visit(context: Any, url: str, runs: int) -> dict[str, Any]:
    page = context.new_page()
    page.goto(url, timeout=120_000)
    page.wait_for_selector("#ws-grid[data-drawn='1']", state="attached", timeout=120_000)
    result: dict[str, Any] = page.evaluate(MEASURE)
    page.close()
    if result["panels"] != PANELS or any(n != runs for n in result["traces"]):
        raise SystemExit(f"the workspace drew {result['traces']} runs, expected {PANELS} x {runs}")
    return result


def server_ms(app: Any, path: str, repeats: int) -> tuple[float, int, float]:
    """Median milliseconds of the request in the server alone, its body's bytes, and the
    median CPU milliseconds it took (this thread's: what it costs on a machine that is not
    shared, where wall time also waits for other processes)."""
    client = app.test_client()
    times = []
    cpu = []
    size = 0
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        response = client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}: {response.data[:300]!r}")
        size = len(response.data)
    return statistics.median(times), size, statistics.median(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--visits", type=int, default=5, help="cold visits (median reported)")
    parser.add_argument("--runs", type=int, default=100, help="runs drawn (10 lrs x runs/10 seeds)")
    parser.add_argument("--steps", type=int, default=1000, help="steps per run")
    parser.add_argument("--repeats", type=int, default=7, help="server-side timings (median)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument("--quick", action="store_true", help="a few seconds, for smoke tests")
    parser.add_argument(
        "--sealed", action="store_true", help="seal every run into chunks before the visits"
    )
    parser.add_argument(
        "--per-request",
        default="1",
        help="metrics per request of the page (ws_per_request), comma-separated to compare "
        "several in one run (visits interleaved); 8 or more: one request for all",
    )
    args = parser.parse_args()
    variants = [int(v) for v in args.per_request.split(",")]
    if args.quick:
        args.visits, args.runs, args.steps, args.repeats = 1, 10, 100, 2
    common.print_header("the runs page's workspace: 8 panels drawn in headless Chromium")

    from playwright.sync_api import sync_playwright

    from tests.support.chromium import launch_chromium
    from tests.support.servers import ServerThread
    from tracker.web.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        store_url = f"sqlite:///{Path(tmp) / 'tracker.db'}"
        seed(store_url, args.runs, args.steps)
        if args.sealed:
            seal_all(store_url)
        app = create_app({"STORE_URI": store_url, "NO_AUTH": True})
        server = ServerThread(app)
        url = f"{server.url}/?project=sweep&ws=1&ws_limit={args.runs}"
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                colds: dict[int, list[dict[str, Any]]] = {v: [] for v in variants}
                warms = {}
                for _ in range(args.visits):
                    for v in variants:
                        context = browser.new_context(viewport={"width": 1440, "height": 1000})
                        colds[v].append(visit(context, f"{url}&ws_per_request={v}", args.runs))
                        context.close()
                for v in variants:
                    context = browser.new_context(viewport={"width": 1440, "height": 1000})
                    visit(context, f"{url}&ws_per_request={v}", args.runs)
                    warms[v] = visit(context, f"{url}&ws_per_request={v}", args.runs)
                    context.close()
                browser.close()
            cold, warm = colds[variants[0]], warms[variants[0]]
            path = cold[-1]["series_url"].removeprefix(server.url)
            plain = server_ms(app, path, args.repeats)
            grouped = server_ms(app, f"{path}&group=config.lr&series=0", args.repeats)
        finally:
            server.stop()
            app.extensions["tracker"].store.close()

    meds = {
        variant: {
            k: statistics.median(v[k] for v in colds[variant])
            for k in ("drawn", "first_drawn", "series_ms", "series_bytes")
        }
        for variant in variants
    }
    med = meds[variants[0]]
    layout = "sealed into chunks" if args.sealed else "rows"
    print(f"workspace: {args.runs} runs x {PANELS} panels, {args.steps} steps ({layout})", end=", ")
    print(f"{args.visits} cold visits per variant")
    print(f"batch (all metrics): {path}")
    print(
        "| metrics per request (requests) | visit | all panels drawn ms | first panel drawn ms "
        "| batch requests ms (browser, first start to last end) | batch bytes on the wire |"
    )
    print("|---|---|---|---|---|---|")
    for variant in variants:
        n = colds[variant][-1]["requests"]
        for name, v in (("first (median)", meds[variant]), ("second (warm cache)", warms[variant])):
            print(
                f"| {variant} ({n}) | {name} | {v['drawn']:,.0f} | {v['first_drawn']:,.0f} "
                f"| {v['series_ms']:,.0f} | {v['series_bytes']:,.0f} |"
            )
        per_visit = ", ".join(f"{v['drawn']:.0f}" for v in colds[variant])
        print(f"| {variant} ({n}) | all panels drawn per cold visit | {per_visit} | | | |")
    print("| batch request in the server alone | median ms | CPU ms | body bytes |")
    print("|---|---|---|---|")
    print(f"| {args.runs} runs x {PANELS} metrics", end=" ")
    print(f"| {plain[0]:,.0f} | {plain[2]:,.0f} | {plain[1]:,} |")
    print(
        f"| the same, grouped by config.lr (series=0) | {grouped[0]:,.0f} | {grouped[2]:,.0f} "
        f"| {grouped[1]:,} |"
    )
    met = "met" if med["drawn"] <= TARGET_MS else "NOT met"
    print(f"target: every panel drawn <= {TARGET_MS:.0f} ms on a first visit -- {met}")
    if args.json:
        doc = {"benchmark": "workspace", "params": vars(args)}
        doc |= {"cold": cold, "warm": warm, "median": med, "env": common.environment()}
        doc |= {"variants": {str(v): {"cold": colds[v], "warm": warms[v]} for v in variants}}
        doc |= {"server_ms": plain[0], "server_grouped_ms": grouped[0], "body_bytes": plain[1]}
        doc |= {"server_cpu_ms": plain[2], "server_grouped_cpu_ms": grouped[2]}
        common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
