"""What a new user saw wrong in the first hour, checked in the browser: the run page after a
requeue ("attempt 2/2", a Duration of the time the run ran), the wall-time axis of a resumed
run (no line back in time), schedule times with their zone, the queue's config columns (the
keys that differ, not a truncated config), and the styled sign-in page with its sign-out.

Each test gets its own empty store (``fresh``), so what it lists is only what it made."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path
from tests.support.servers import ServerThread
from tests.support.web import TOKEN
from tracker.entities import Failure, JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store.metrics import intern_keys, write_points
from tracker.store.runs import create_run, finish_run
from tracker.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]


CHART = '.chart-card[data-key="train/loss"] .chart'


@dataclass
class Served:
    url: str
    store: Store


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start the dashboard on an empty SQLite store (``TOKEN=...`` turns sign-in on)."""
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    started: list[tuple[Any, ServerThread, Store]] = []

    def start(**config: Any) -> Served:
        url = f"sqlite:///{tmp_path / f'dashboard{len(started)}.db'}"
        store = Store(url)
        config.setdefault("NO_AUTH", not config.get("TOKEN"))
        app = create_app({"STORE_URI": url, **config})
        started.append((app, ServerThread(app), store))
        return Served(started[-1][1].url, store)

    yield start
    for app, server, store in started:
        server.stop()
        app.extensions["tracker"].store.close()
        store.close()


def claim(store: Store, now: float) -> Any:
    claimed = queue.claim(store, "gpu-node-01:1", lease_s=3600, now=now)
    assert claimed is not None
    return claimed[0]


def fact(page: Any, label: str) -> Any:
    return page.locator("#run-facts .fact", has=page.locator("dt", has_text=label))


def test_run_page_after_a_requeue_says_attempt_2_of_2_and_how_long_it_ran(
    page: Any, fresh: Callable[..., Served]
) -> None:
    served = fresh()
    now = time.time()
    job = queue.enqueue(served.store, JobSpec(["python", "train.py"], "digits"), now=now - 400)
    first = claim(served.store, now - 250)  # 150 s in the queue
    failure = Failure("exit_nonzero", "exit code 1")
    queue.finish(served.store, first, exit_code=1, failure=failure, now=now - 240)
    store_jobs.requeue(served.store, job.id, reason="requeued by hand")
    second = claim(served.store, now - 30)  # 210 s until someone requeued it
    queue.finish(served.store, second, exit_code=0, failure=None, now=now - 20)
    page.goto(f"{served.url}/runs/{job.run_id}")
    fact(page, "Job").wait_for()
    assert "attempt 2/2" in fact(page, "Job").inner_text()
    duration = fact(page, "Duration")
    assert duration.locator("dd").inner_text() == "20s"  # 10 s + 10 s, not 3m 50s
    title = duration.locator(".duration").get_attribute("title") or ""
    assert "2 attempts" in title and "queue" in title, title


def test_the_wall_time_axis_never_runs_backwards(page: Any, fresh: Callable[..., Served]) -> None:
    """Attempt 1 logs steps 0-79; attempt 2 resumes from step 50's checkpoint, logs 50-65 and
    dies: steps 66-79 keep attempt 1's earlier times, so in step order time goes back."""
    served = fresh()
    start = time.time() - 3600
    run = create_run(served.store, "digits", "resumed", {}, [], now=start)
    (key,) = intern_keys(served.store, ["train/loss"]).values()
    rows = [(run.id, key, s, int((start + s) * 1000), 1.0 / (s + 1)) for s in range(80)]
    rows += [(run.id, key, s, int((start + 600 + s) * 1000), 0.5 / (s + 1)) for s in range(50, 66)]
    write_points(served.store, rows)
    finish_run(served.store, run.id, "finished", now=start + 700)
    page.goto(f"{served.url}/runs/{run.id}")
    chart = page.locator(CHART)
    chart.locator(".main-svg").first.wait_for()
    for axis in ("wall", "relative"):
        page.select_option("#x-axis", axis)
        title = "wall time" if axis == "wall" else "time since start"
        page.wait_for_function(  # plotly has redrawn on this axis (bounded by WAIT_MS)
            "([sel, title]) => { const el = document.querySelector(sel);"
            " return Boolean(el.layout && el.layout.xaxis.title.text.startsWith(title)); }",
            arg=[CHART, title],
        )
        assert chart.evaluate("(el) => el.layout.xaxis.type") == (
            "date" if axis == "wall" else "linear"
        )
        for role in ("last", "band-min", "band-max"):
            xs = chart.evaluate(
                "(el, role) => el.data.find((t) => t.meta && t.meta.role === role).x", role
            )
            drawn = [x for x in xs if x is not None]
            assert len(drawn) == 80, (axis, role, len(drawn))  # every step, once
            segments: list[list[Any]] = [[]]
            for x in xs:
                if x is None:
                    segments.append([])
                else:
                    segments[-1].append(x)
            for segment in segments:  # date strings and numbers both sort in time order
                assert segment == sorted(segment), (axis, role, segment)
            assert len(segments) == 2, (axis, role)  # the line breaks where the resume begins


def test_schedule_times_show_their_time_zone(page: Any, fresh: Callable[..., Served]) -> None:
    served = fresh()
    spec = JobSpec(["python", "train.py"], "digits")
    store_schedules.add_schedule(served.store, "0 6 * * *", spec, name="berlin",
                                 timezone="Europe/Berlin")  # fmt: skip
    store_schedules.add_schedule(served.store, "0 5 * * *", spec, name="utc")
    page.goto(f"{served.url}/jobs")
    berlin = page.locator("#schedules-table tbody tr", has_text="berlin")
    berlin.wait_for()
    when = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"
    next_fire = berlin.locator("td.next-fire").inner_text()
    assert re.fullmatch(when + r" Europe/Berlin \(UTC\+0[12]:00\)", next_fire), next_fire
    assert next_fire.split(" ")[1] == "06:00"  # the cron's 06:00, in the schedule's zone
    assert re.fullmatch(when + " Europe/Berlin .*", berlin.locator("td.created").inner_text())
    utc = page.locator('#schedules-table tbody tr:has(td:text-is("utc")) td.next-fire')
    assert re.fullmatch(when + " UTC", utc.inner_text()) and "05:00 UTC" in utc.inner_text()
    assert "your local time" in (utc.get_attribute("title") or "")


def test_queue_shows_the_config_keys_that_differ(
    page: Any, fresh: Callable[..., Served], screenshot: Any
) -> None:
    served = fresh()
    model = {"width": 512, "depth": 12, "dropout": 0.1, "activation": "gelu", "norm": "layer"}
    base = {"optimizer": "adamw", "batch_size": 256, "weight_decay": 0.05, "model": model}
    ids = []
    for lr, warmup in ((0.003, 500), (0.001, 500), (0.003, 2000)):
        config = {**base, "lr": lr, "warmup_steps": warmup}
        spec = JobSpec(["python", "examples/train_gpt.py"], "lm", config=config)
        ids.append(queue.enqueue(served.store, spec).id)
    page.goto(f"{served.url}/jobs")
    rows = [page.locator(f"#job-{i}") for i in ids]
    rows[0].wait_for()
    shown = [r.locator("code.config").inner_text() for r in rows]
    assert shown == [
        "lr=0.003 warmup_steps=500",
        "lr=0.001 warmup_steps=500",
        "lr=0.003 warmup_steps=2000",
    ], shown
    whole = rows[0].locator("code.config").get_attribute("title") or ""
    assert "model.activation=gelu" in whole and "optimizer=adamw" in whole  # all on hover
    screenshot(page, "queue-config-diff")


def test_sign_in_page_is_styled_and_sign_out_lands_on_it(
    page: Any, fresh: Callable[..., Served], screenshot: Any
) -> None:
    served = fresh(TOKEN=TOKEN)
    page.goto(f"{served.url}/jobs")
    page.wait_for_url(re.compile(r"/login\?next=/jobs$"))
    topbar = page.locator(".topbar")
    assert topbar.evaluate("(el) => getComputedStyle(el).display") == "flex"  # app.css applied
    help_text = page.locator(".login-help").inner_text()
    assert "Each start of tracker ui / tracker up prints a new link" in help_text, help_text
    screenshot(page, "login")
    # the theme chosen in this browser applies before sign-in too (theme.js is public)
    page.evaluate("() => localStorage.setItem('tracker.theme', 'dark')")
    page.reload()
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    background = "(el) => getComputedStyle(el).backgroundColor"
    assert page.locator("html").evaluate(background) == "rgb(11, 17, 32)"  # dark --bg
    page.evaluate("() => localStorage.removeItem('tracker.theme')")
    page.fill('input[name="token"]', TOKEN)
    page.click('button[type="submit"]')
    page.wait_for_url(re.compile(r"/jobs$"))
    page.locator("#jobs-empty").wait_for()
    screenshot(page, "signed-in-queue")
    page.locator("#sign-out").click()
    page.wait_for_url(re.compile(r"/login\?signed_out=1$"))
    assert page.locator(".login-note").inner_text() == "Signed out."
    page.goto(f"{served.url}/")
    page.wait_for_url(re.compile(r"/login\?next=/$"))  # the session ended on the server
