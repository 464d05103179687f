"""First visit of a run page in headless Chromium: how long until the page is usable.

A run with ``--keys`` (6) metric series of ``--steps`` (2,000) steps each is logged into a
fresh SQLite store with ``tracker.init`` / ``tracker.log``; the dashboard (``create_app``,
``--no-auth``) is served on a free loopback port by a real HTTP server in a thread, and
Debian's Chromium (through Playwright) opens ``/runs/<id>`` ``--visits`` (7) times, each in
a new browser context (empty cache: a first visit), then once more in the same context (a
second visit, cache warm). Per visit, from the navigation's start:

* ``dcl``: DOMContentLoaded (``domContentLoadedEventEnd``) -- the page's scripts have run;
* ``chart``: the first metric chart has drawn a trace (``.js-plotly-plot .trace``);
* ``idle``: the last network response of the page (``responseEnd``, after Playwright's
  ``networkidle``);
* ``bytes``: bytes on the wire (``transferSize`` of the document and every resource).

Medians of the cold visits are reported. ``--plotly PATH`` serves that file wherever the
page asks for plotly.js (a WSGI wrapper in this script; the app is unchanged), so the full
bundle and the dashboard's own can be measured under the same serving.

    python bench/bench_pages.py [--visits 7] [--plotly PATH] [--json out.json] [--quick]

``--quick`` (2 visits of a run with 2 series of 200 steps) only checks that it runs.
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import common

TARGET_CHART_MS = 1000.0
PLOTLY_PATH = re.compile(r"^/static/vendor/plotly[\w.-]*\.js$")


def seed(store_url: str, keys: int, steps: int) -> int:
    """A finished run with ``keys`` metric series of ``steps`` steps; its id."""
    import tracker

    run = tracker.init(
        project="bench-pages", name="pages", config={"lr": 3e-4}, uri=store_url, quiet=True
    )
    names = [f"train/m{i}" for i in range(keys)]
    for step in range(steps):
        tracker.log({name: 1.0 / (1 + step + i) for i, name in enumerate(names)}, step=step)
    tracker.finish()
    return int(run.id)


def serve_plotly_from(app: Any, path: Path) -> Callable[..., Iterable[bytes]]:
    """``app`` with every request for plotly.js answered with the bytes of ``path``."""
    body = path.read_bytes()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if PLOTLY_PATH.match(environ.get("PATH_INFO", "")):
            start_response(
                "200 OK",
                [("Content-Type", "text/javascript"), ("Content-Length", str(len(body)))],
            )
            return [body]
        result: Iterable[bytes] = app(environ, start_response)
        return result

    return wrapped


MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource');
  const ends = resources.map((e) => e.responseEnd);
  return {
    dcl: nav.domContentLoadedEventEnd,
    idle: Math.max(nav.responseEnd, ...ends),
    bytes: nav.transferSize + resources.reduce((n, e) => n + e.transferSize, 0),
    chart: window.__chartAt,
  };
}"""

# Time of the first drawn trace, recorded by the page itself (no polling from Python).
WATCH_CHART = """
new MutationObserver((_m, obs) => {
  if (document.querySelector('.js-plotly-plot .trace')) {
    window.__chartAt = performance.now();
    obs.disconnect();
  }
}).observe(document, { childList: true, subtree: true });
"""


def visit(context: Any, url: str) -> dict[str, float]:
    page = context.new_page()
    page.add_init_script(WATCH_CHART)
    page.goto(url, wait_until="networkidle", timeout=120_000)
    page.wait_for_function("() => window.__chartAt !== undefined", timeout=120_000)
    result: dict[str, float] = page.evaluate(MEASURE)
    page.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--visits", type=int, default=7, help="cold visits (median reported)")
    parser.add_argument("--keys", type=int, default=6, help="metric series of the run")
    parser.add_argument("--steps", type=int, default=2000, help="steps per series")
    parser.add_argument("--plotly", type=Path, help="serve this file as plotly.js")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument("--quick", action="store_true", help="a few seconds, for smoke tests")
    args = parser.parse_args()
    if args.quick:
        args.visits, args.keys, args.steps = 2, 2, 200
    common.print_header("a run page's first visit in headless Chromium")

    from playwright.sync_api import sync_playwright

    from tests.support.chromium import launch_chromium
    from tests.support.servers import ServerThread
    from tracker.web.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        store_url = f"sqlite:///{Path(tmp) / 'tracker.db'}"
        run_id = seed(store_url, args.keys, args.steps)
        app = create_app({"STORE_URI": store_url, "NO_AUTH": True})
        server = ServerThread(serve_plotly_from(app, args.plotly) if args.plotly else app)
        url = f"{server.url}/runs/{run_id}"
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                cold = []
                for _ in range(args.visits):
                    context = browser.new_context(viewport={"width": 1440, "height": 1000})
                    cold.append(visit(context, url))
                    context.close()
                context = browser.new_context(viewport={"width": 1440, "height": 1000})
                visit(context, url)
                warm = visit(context, url)
                context.close()
                browser.close()
        finally:
            server.stop()
            app.extensions["tracker"].store.close()

    med = {k: statistics.median(v[k] for v in cold) for k in ("dcl", "chart", "idle", "bytes")}
    print(f"run page, {args.keys} series x {args.steps} steps, {args.visits} cold visits")
    print("| visit | DOMContentLoaded ms | first chart ms | network idle ms | bytes |")
    print("|---|---|---|---|---|")
    print(
        f"| first (median) | {med['dcl']:,.0f} | {med['chart']:,.0f} | {med['idle']:,.0f} "
        f"| {med['bytes']:,.0f} |"
    )
    print(
        f"| second (warm cache) | {warm['dcl']:,.0f} | {warm['chart']:,.0f} "
        f"| {warm['idle']:,.0f} | {warm['bytes']:,.0f} |"
    )
    charts = ", ".join(f"{v['chart']:.0f}" for v in cold)
    print(f"first chart per cold visit (ms): {charts}")
    met = "met" if med["chart"] <= TARGET_CHART_MS else "NOT met"
    print(f"target: first chart <= {TARGET_CHART_MS:.0f} ms on a first visit -- {met}")
    if args.json:
        doc = {"benchmark": "pages", "params": vars(args) | {"plotly": str(args.plotly)}}
        doc |= {"cold": cold, "warm": warm, "median": med, "env": common.environment()}
        common.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
