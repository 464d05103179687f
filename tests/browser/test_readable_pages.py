"""Issue 14, the pages a newcomer meets in the first hour, in a real browser: clone & edit keeps
a float a float and shows one spec in both tabs; the queue says what each job runs; run charts
are readable with few points, bytes and constants; compare and the runs table never leave the
user guessing. Every state a test looks at is saved as a screenshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.browser_seed import Seeded
from tests.support.servers import ServerThread
from tracker.entities import Failure, GpuDevice, JobSpec
from tracker.store import Store, queue
from tracker.store import jobs as store_jobs
from tracker.store import schedules as store_schedules
from tracker.store import workers as store_workers
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, finish_run
from tracker.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]

VENV_PYTHON = "/home/ada/proj/.venv/bin/python"


def all_job_ids(dashboard: Dashboard) -> set[int]:
    return {j.id for j in store_jobs.list_jobs(dashboard.store, limit=1000)}


# ------------------------------------------------------------------ clone & edit (item 3)


@pytest.fixture(scope="module")
def float_job(dashboard: Dashboard) -> int:
    """A job whose config holds floats that JSON writes like integers (0.0, 1.0)."""
    config = {"lr": 0.001, "weight_decay": 0.0, "label_smoothing": 0.0, "momentum": 1.0,
              "epochs": 3, "opt": {"beta1": 0.9, "eps_scale": 2.0}}  # fmt: skip
    spec = JobSpec([VENV_PYTHON, "examples/train_floats.py"], "floats", config=config, priority=-5)
    return queue.enqueue(dashboard.store, spec).id


def test_clone_keeps_floats_and_both_tabs_show_the_same_spec(
    page: Any, dashboard: Dashboard, float_job: int, screenshot: Any
) -> None:
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/jobs?clone_job={float_job}")
    page.locator("#clone-dialog").wait_for(state="visible")
    row = page.locator('#clone-rows tr[data-key="weight_decay"]')
    assert row.locator(".type").inner_text().lower() == "float"
    assert row.locator("input").first.input_value() == "0.0"
    assert page.locator('#clone-rows tr[data-key="epochs"] .type').inner_text().lower() == "int"
    page.fill('#clone-rows input[name="weight_decay"]', "1e-4")
    assert page.locator("#clone-error").is_hidden()  # not "expected an integer"
    page.fill('#clone-rows input[name="sweep:lr"]', "0.1, 1")
    assert page.locator("#clone-summary").inner_text() == "2 jobs (lr × 2)"
    screenshot(page, "clone-form-float-sweep")

    page.click('#clone-form .seg[data-mode="json"]')
    page.locator("#clone-json").wait_for(state="visible")
    assert page.locator("#clone-summary").inner_text() == "2 jobs (lr × 2)"
    text = page.locator("#clone-json").input_value()
    assert '"label_smoothing": 0.0' in text and '"eps_scale": 2.0' in text, text
    assert '"epochs": 3,' in text
    sweep = page.evaluate("() => JSON.parse(document.querySelector('#clone-sweep-json').value)")
    assert sweep == {"lr": [0.1, 1]}
    assert '"lr": [0.1, 1.0]' in page.locator("#clone-sweep-json").input_value()  # float values
    screenshot(page, "clone-json-float-sweep")

    page.click('#clone-form .seg[data-mode="form"]')  # and back: the same spec again
    assert page.locator('#clone-rows input[name="sweep:lr"]').input_value() == "0.1, 1.0"
    assert page.locator('#clone-rows input[name="weight_decay"]').input_value() == "0.0001"
    assert page.locator('#clone-rows tr[data-key="momentum"] .type').inner_text().lower() == "float"
    page.click("#clone-submit")
    page.locator("#clone-dialog").wait_for(state="hidden")
    new = wait_until(lambda: all_job_ids(dashboard) - before, "the sweep's two jobs")
    jobs = [store_jobs.get_job(dashboard.store, i) for i in sorted(new)]
    assert sorted(j.config["lr"] for j in jobs) == [0.1, 1.0]
    for job in jobs:
        config = job.config
        for key in ("lr", "weight_decay", "label_smoothing", "momentum"):
            assert isinstance(config[key], float), (key, config[key])
        assert isinstance(config["opt"]["eps_scale"], float)
        assert isinstance(config["epochs"], int) and config["weight_decay"] == 1e-4


def test_json_tab_edits_reach_the_form_with_their_types(
    page: Any, dashboard: Dashboard, float_job: int
) -> None:
    before = all_job_ids(dashboard)
    page.goto(f"{dashboard.url}/jobs?clone_job={float_job}")
    page.locator("#clone-dialog").wait_for(state="visible")
    page.click('#clone-form .seg[data-mode="json"]')
    page.fill("#clone-json", '{"lr": 0.0, "steps": 10, "tag": "x"}')
    page.fill("#clone-sweep-json", '{"steps": [10, 20, 30]}')
    assert page.locator("#clone-summary").inner_text() == "3 jobs (steps × 3)"
    page.click('#clone-form .seg[data-mode="form"]')
    assert page.locator('#clone-rows tr[data-key="lr"] .type').inner_text().lower() == "float"
    assert page.locator('#clone-rows input[name="lr"]').input_value() == "0.0"
    assert page.locator('#clone-rows input[name="sweep:steps"]').input_value() == "10, 20, 30"
    page.click('#clone-form .seg[data-mode="json"]')
    page.click("#clone-submit")
    page.locator("#clone-dialog").wait_for(state="hidden")
    new = wait_until(lambda: all_job_ids(dashboard) - before, "three jobs")
    jobs = [store_jobs.get_job(dashboard.store, i) for i in sorted(new)]
    assert sorted(j.config["steps"] for j in jobs) == [10, 20, 30]
    assert all(isinstance(j.config["lr"], float) for j in jobs)


# ---------------------------------------------------------------------------- queue (item 6)

WORKER = "gpu-node-02:7"


@pytest.fixture(scope="module")
def busy_worker(dashboard: Dashboard) -> dict[str, int]:
    """A worker running two jobs: one requeued by hand past its retries (attempt 2 of 1),
    one on its first attempt; a third job cancelled while queued."""
    store = dashboard.store
    gpus = [GpuDevice(0, "NVIDIA L4", 24 * 1024**3)]
    store_workers.register_worker(store, WORKER, host="gpu-node-02", pid=7, gpus=gpus, max_jobs=2)

    def claim() -> Any:
        claimed = queue.claim(store, WORKER, lease_s=3600, max_gpus=0)
        assert claimed is not None
        return claimed[0]

    mnist = JobSpec([VENV_PYTHON, "examples/train_mnist.py", "--epochs", "3"], "digits",
                    config={"lr": 0.01, "model": {"width": 32}}, priority=100)  # fmt: skip
    requeued = queue.enqueue(store, mnist).id
    first = claim()
    assert first.job.id == requeued
    queue.finish(store, first, exit_code=1, failure=Failure("exit_nonzero", "exit code 1"))
    store_jobs.requeue(store, requeued, reason="requeued by hand")
    assert claim().job.id == requeued
    cifar = JobSpec([VENV_PYTHON, "-u", "/home/ada/proj/examples/train_cifar.py"], "digits",
                    config={"lr": 0.1}, priority=100)  # fmt: skip
    second = queue.enqueue(store, cifar).id
    assert claim().job.id == second
    cancelled = queue.enqueue(store, JobSpec([VENV_PYTHON, "examples/train_mnist.py"], "digits"))
    store_jobs.cancel(store, cancelled.id)
    return {"requeued": requeued, "second": second, "cancelled": cancelled.id}


def test_queue_shows_the_script_config_attempts_and_worker_jobs(
    page: Any, dashboard: Dashboard, busy_worker: dict[str, int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/jobs")
    requeued = page.locator(f"#job-{busy_worker['requeued']}")
    requeued.wait_for()
    command = requeued.locator("code.command")
    assert command.inner_text() == "examples/train_mnist.py --epochs 3"
    assert ".venv" in (command.get_attribute("title") or "")  # the full argv on hover
    assert requeued.locator("code.config").inner_text() == "lr=0.01 model.width=32"
    other = page.locator(f"#job-{busy_worker['second']}")
    assert other.locator("code.command").inner_text() == "…/examples/train_cifar.py"
    status = requeued.locator("td").nth(2).inner_text()
    assert "attempt 2/2 (requeued by hand)" in status and "2/1" not in status, status
    assert requeued.locator(".badge").inner_text() == "running"  # not the last attempt's failure
    worker = page.locator("#workers-table tbody tr", has_text="gpu-node-02")
    jobs = worker.locator("td.worker-jobs").inner_text()
    assert "2/2 busy" in jobs and f"#{busy_worker['requeued']}, #{busy_worker['second']}" in (
        jobs.replace("\n", " ")
    ), jobs
    screenshot(page, "queue-active")

    page.click('.seg[data-status^="succeeded"]')
    cancelled = page.locator(f"#job-{busy_worker['cancelled']}")
    cancelled.wait_for()
    assert cancelled.locator(".badge").inner_text() == "cancelled"
    screenshot(page, "queue-finished")


def test_a_schedule_shows_its_script_and_config(
    page: Any, dashboard: Dashboard, busy_worker: dict[str, int]
) -> None:
    spec = JobSpec([VENV_PYTHON, "examples/train_mnist.py", "--epochs", "3"], "digits",
                   config={"lr": 0.01, "model": {"width": 32}})  # fmt: skip
    store_schedules.add_schedule(dashboard.store, "0 3 * * *", spec, name="nightly-mnist")
    page.goto(f"{dashboard.url}/jobs")
    row = page.locator("#schedules-table tbody tr", has_text="nightly-mnist")
    row.wait_for()
    assert row.locator("code.command").inner_text() == "examples/train_mnist.py --epochs 3"
    assert row.locator("code.config").inner_text() == "lr=0.01 model.width=32"


@pytest.fixture
def finished_only(tmp_path: Path, browser: Any) -> Iterator[Dashboard]:
    """A dashboard whose queue holds only finished jobs."""
    url = f"sqlite:///{tmp_path / 'finished.db'}"
    store = Store(url)
    for i in range(2):
        queue.enqueue(store, JobSpec(["python", f"job{i}.py"], "p"))
    store_jobs.cancel(store, 1)
    store_jobs.cancel(store, 2)
    app = create_app({"STORE_URI": url, "NO_AUTH": True})
    server = ServerThread(app)
    yield Dashboard(server.url, url, store, Seeded())
    server.stop()
    app.extensions["tracker"].store.close()
    store.close()


def test_an_empty_active_tab_says_what_the_other_tabs_hold(
    page: Any, finished_only: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{finished_only.url}/jobs")
    empty = page.locator("#jobs-empty")
    empty.wait_for(state="visible")
    page.wait_for_function(
        "() => document.querySelector('#jobs-empty').textContent.includes('Finished')"
    )
    text = empty.inner_text()
    assert text != "No jobs." and "2 cancelled" in text and "Finished tab" in text, text
    screenshot(page, "queue-empty-active")


# ------------------------------------------------------------------------ run page (item 7)

MIB = 1024**2
CONTRAST_JS = """sel => {
    const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
    const lum = (c) => { const [r, g, b] = rgb(c).map((v) => { v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
    const el = document.querySelector(sel);
    let bg = 'rgb(255, 255, 255)';
    for (let n = el; n; n = n.parentElement) {
        const c = getComputedStyle(n).backgroundColor;
        if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') { bg = c; break; }
    }
    const [a, b] = [lum(getComputedStyle(el).color), lum(bg)].sort((x, y) => y - x);
    return {ratio: (a + 0.05) / (b + 0.05), opacity: Number(getComputedStyle(el).opacity)};
}"""


@pytest.fixture(scope="module")
def short_runs(dashboard: Dashboard) -> dict[str, int]:
    """A five-step run (constant lr, byte counts, RSS), a run that failed with neither hint
    nor error, a cancelled run and a finished run that logged nothing."""
    store = dashboard.store
    five = create_run(store, "short", "five-steps", {"lr": 1e-3})
    for step in range(5):
        log_metrics(store, five.id, step, {
            "train/loss": 1.0 / (step + 1), "train/lr": 1e-3, "data/read_bytes": 4.2e8 + step * MIB,
            "sys/rss_bytes": 300 * MIB + step * 1000, "sys/cpu_percent": 50.0 + step,
        })  # fmt: skip
    finish_run(store, five.id, "finished", exit_code=0)
    bare = create_run(store, "short", "failed-bare", {})
    finish_run(store, bare.id, "failed", failure_class="cuda_oom")
    stopped = create_run(store, "short", "cancelled", {})
    log_metrics(store, stopped.id, 0, {"train/loss": 1.0})
    finish_run(store, stopped.id, "killed", failure_class="cancelled",
                     failure_hint="The job was cancelled.")  # fmt: skip
    empty = create_run(store, "short", "no-metrics", {})
    finish_run(store, empty.id, "finished", exit_code=0)
    return {"five": five.id, "bare": bare.id, "cancelled": stopped.id, "empty": empty.id}


def chart_js(page: Any, key: str, expr: str) -> Any:
    """Evaluate ``expr`` with ``el`` bound to the plot of the chart card of ``key``."""
    return page.evaluate(
        f"key => {{ const el = document.querySelector(`.chart-card[data-key='${{key}}'] .chart`);"
        f" return {expr}; }}",
        key,
    )


def wait_all_charts(page: Any) -> None:
    """Every chart card drawn, without scrolling: nothing below the fold stays blank."""
    page.wait_for_function(
        "() => { const c = [...document.querySelectorAll('.chart-card .chart')];"
        " return c.length > 0 && c.every(x => x.querySelector('.main-svg')); }"
    )


def test_a_short_run_is_readable(
    page: Any, dashboard: Dashboard, short_runs: dict[str, int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/runs/{short_runs['five']}")
    wait_all_charts(page)
    # Five points: markers, whole-number step ticks.
    mode = chart_js(page, "train/loss", "el.data.find(t => t.meta && t.meta.role === 'last').mode")
    assert "markers" in mode
    ticks = chart_js(
        page, "train/loss", "[...el.querySelectorAll('.xtick text')].map(t => t.textContent)"
    )
    assert ticks and all(t.isdigit() for t in ticks), ticks
    # A constant lr is drawn at its value, on an axis around it.
    lo, hi = chart_js(page, "train/lr", "el._fullLayout.yaxis.range")
    assert 0 <= lo < 1e-3 < hi <= 2e-3, (lo, hi)
    # Bytes: a unit on the axis, in the hover text; never 4.2e+8.
    assert chart_js(page, "data/read_bytes", "el._fullLayout.yaxis.title.text") == "MiB"
    yticks = chart_js(
        page, "data/read_bytes", "[...el.querySelectorAll('.ytick text')].map(t => t.textContent)"
    )
    assert yticks and not any("e+" in t for t in yticks), yticks
    hover = chart_js(
        page,
        "data/read_bytes",
        "el.data.find(t => t.meta && t.meta.role === 'last').customdata[0][5]",
    )
    assert hover.endswith("MiB"), hover
    # CPU and RSS: RSS in MiB (300 MiB) on an axis that never goes below zero.
    cpu = '.chart-card[data-kind="cpu"] .chart'
    title = page.evaluate(f"() => document.querySelector('{cpu}')._fullLayout.yaxis2.title.text")
    assert title == "RSS (MiB)"
    rss_range = page.evaluate(f"() => document.querySelector('{cpu}')._fullLayout.yaxis2.range")
    cpu_range = page.evaluate(f"() => document.querySelector('{cpu}')._fullLayout.yaxis.range")
    assert rss_range[0] >= 0 and cpu_range[0] >= 0, (rss_range, cpu_range)
    # The summary of final metrics: last, min, max per key, bytes with units.
    summary = page.locator("#metric-summary")
    assert summary.is_visible()
    loss = summary.locator('tr[data-key="train/loss"] td').all_inner_texts()
    assert loss == ["0.2", "0.2", "1", "4"], loss
    read = summary.locator('tr[data-key="data/read_bytes"] td').all_inner_texts()
    assert all("MiB" in v for v in read[:3]), read
    assert "GiB" not in read[0] and "e+" not in "".join(read)
    keys = summary.locator("tbody tr").evaluate_all("rs => rs.map(r => r.dataset.key)")
    assert keys[-2:] == ["sys/cpu_percent", "sys/rss_bytes"]  # sys/ last
    screenshot(page, "run-short")


def test_charts_below_the_fold_are_drawn_without_scrolling(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/runs/{dashboard.seeded.runs['adam-lr3e-4']}")
    wait_all_charts(page)
    assert page.evaluate("() => window.scrollY") == 0
    below = page.evaluate(
        "() => [...document.querySelectorAll('.chart-card')]"
        ".filter(c => c.getBoundingClientRect().top > window.innerHeight).length"
    )
    assert below > 0  # the page is long enough for this to mean something
    screenshot(page, "run-full-page")


def test_the_live_indicator_is_readable(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/runs/{dashboard.seeded.runs['adam-live']}")
    page.wait_for_selector("#live-indicator:not([hidden])")
    found = page.evaluate(CONTRAST_JS, "#live-indicator")
    assert found["ratio"] >= 4.5 and found["opacity"] == 1, found


def test_failure_boxes_never_say_null_and_cancelled_is_not_a_failure(
    page: Any, dashboard: Dashboard, short_runs: dict[str, int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/runs/{short_runs['bare']}")
    box = page.locator("#run-failure")
    box.wait_for(state="visible")
    assert box.inner_text().strip() == "cuda_oom" and "null" not in box.inner_text()
    red = page.evaluate(
        "() => getComputedStyle(document.querySelector('#run-failure')).borderLeftColor"
    )
    page.goto(f"{dashboard.url}/runs/{short_runs['cancelled']}")
    box.wait_for(state="visible")
    assert "cancelled" in box.inner_text() and "null" not in box.inner_text()
    assert "neutral" in (box.get_attribute("class") or "")
    grey = page.evaluate(
        "() => getComputedStyle(document.querySelector('#run-failure')).borderLeftColor"
    )
    assert grey != red
    badge = page.locator("#run-status .badge")
    assert badge.inner_text() == "killed · cancelled"
    assert "cancelled" in (badge.get_attribute("class") or "")
    screenshot(page, "run-cancelled")
    page.goto(f"{dashboard.url}/runs/{short_runs['empty']}")
    empty = page.locator("#no-metrics")
    empty.wait_for(state="visible")
    assert "no metrics" in empty.inner_text().lower() and "yet" not in empty.inner_text()


# ---------------------------------------------------------------------- runs table (item 9)

WIDE = "?config=optimizer,lr,model.width,data.name&metrics=val/acc,train/loss,sys/rss_bytes"


def test_runs_table_fits_1440px_and_labels_config_and_metric_columns(
    page: Any, dashboard: Dashboard, short_runs: dict[str, int], screenshot: Any
) -> None:
    assert page.viewport_size["width"] == 1440
    page.goto(f"{dashboard.url}/{WIDE}")
    page.wait_for_selector("#runs-body tr")
    overflow = page.evaluate(
        "() => { const w = document.querySelector('#runs-table').parentElement;"
        " const right = w.getBoundingClientRect().right;"
        " const cells = [...document.querySelectorAll('#runs-table th, #runs-table td')];"
        " return {scroll: w.scrollWidth - w.clientWidth,"
        "  clipped: cells.filter(c => c.getBoundingClientRect().right > right + 1).length}; }"
    )
    assert overflow == {"scroll": 0, "clipped": 0}, overflow
    groups = page.locator("#runs-groups th")
    assert groups.all_inner_texts()[1:] == ["CONFIG", "METRICS (LAST VALUE)"]
    spans = groups.evaluate_all("ths => ths.map(t => t.colSpan)")
    assert spans[1:] == [4, 3]
    rss = page.locator(
        f'tr[data-run-id="{dashboard.seeded.runs["adam-lr3e-4"]}"] td.col-metric'
    ).last
    assert rss.inner_text().endswith("GiB"), rss.inner_text()
    screenshot(page, "runs-wide")


def test_select_all_follows_the_rows(
    page: Any, dashboard: Dashboard, short_runs: dict[str, int]
) -> None:
    page.goto(f"{dashboard.url}/?project=short&config=&metrics=")
    page.wait_for_selector("#runs-body tr")
    boxes = page.locator("#runs-body input[type=checkbox]")
    select_all = page.locator("#runs-head input[type=checkbox]")
    for i in range(boxes.count()):
        assert not select_all.is_checked()
        boxes.nth(i).check()
    assert select_all.is_checked()
    boxes.first.uncheck()
    assert not select_all.is_checked()
    assert page.evaluate("() => document.querySelector('#runs-head input').indeterminate")


def test_cancelled_runs_do_not_look_like_failures(
    page: Any, dashboard: Dashboard, short_runs: dict[str, int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/?project=short&config=&metrics=train/loss")
    page.wait_for_selector("#runs-body tr")

    def background(run_id: int) -> str:
        badge = page.locator(f'tr[data-run-id="{run_id}"] .badge')
        return str(badge.evaluate("b => getComputedStyle(b).backgroundColor"))

    cancelled = page.locator(f'tr[data-run-id="{short_runs["cancelled"]}"] .badge')
    assert "cancelled" in (cancelled.get_attribute("class") or "")
    failed = background(short_runs["bare"])
    neutral = background(short_runs["cancelled"])
    assert neutral != failed
    red, green, blue = (int(v) for v in neutral[neutral.index("(") + 1 : -1].split(",")[:3])
    assert max(red, green, blue) - min(red, green, blue) < 16, neutral  # grey, not red
    screenshot(page, "runs-cancelled")


# ------------------------------------------------------------------------- compare (item 8)

LONG_KEYS = [f"optimizer.scheduler.param_group_{i}.warmup_steps" for i in range(8)]


@pytest.fixture(scope="module")
def wide_compare(dashboard: Dashboard) -> list[int]:
    """Three runs with eight long config keys that differ and one that does not; a key only
    the first run has (sorted first) and a metric only the second run has (sorted first)."""
    store = dashboard.store
    ids = []
    for i in range(3):
        config: dict[str, Any] = {key: (i + 1) * (j + 1) for j, key in enumerate(LONG_KEYS)}
        config["data"] = {"name": "digits"}  # the same for all: no axis
        if i == 0:
            config["a_rare"] = 0.5
        run = create_run(store, "wide", f"wide-{i}", config)
        metrics = {"val/acc": 0.5 + 0.1 * i, "train/loss": 1.0 - 0.2 * i}
        if i == 1:
            metrics["val/aaa"] = 3.0
        log_metrics(store, run.id, 0, metrics)
        finish_run(store, run.id, "finished", exit_code=0)
        ids.append(run.id)
    return ids


def test_parcoords_labels_do_not_overlap_and_constant_axes_are_hidden(
    page: Any, dashboard: Dashboard, wide_compare: list[int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/compare?runs={','.join(map(str, wide_compare))}")
    page.locator("#parcoords-chart svg polyline").first.wait_for(state="attached")
    labels = page.eval_on_selector_all(
        "#parcoords-chart .pc-label", "ls => ls.map(l => l.dataset.key)"
    )
    assert "data.name" not in labels  # constant: hidden
    assert set(LONG_KEYS) <= set(labels) and labels[-1] == "val/acc"
    boxes = page.eval_on_selector_all(
        "#parcoords-chart .pc-label",
        "ls => ls.map(l => { const r = l.getBoundingClientRect();"
        " return [r.left, r.right, r.top, r.bottom]; })",
    )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2]
            assert apart, (a, b)
    shown = page.eval_on_selector_all(
        "#parcoords-chart .pc-label-text", "ts => ts.map(t => t.textContent)"
    )
    assert len(set(shown)) == len(shown), shown  # cut, but still told apart
    assert all(f"group_{i}" in text for i, text in enumerate(shown[1:9])), shown
    chart = page.evaluate(
        "() => document.querySelector('#parcoords-chart').getBoundingClientRect().right"
    )
    assert max(b[1] for b in boxes) <= chart
    screenshot(page, "compare-wide")


def test_scatter_defaults_to_keys_most_runs_have_and_says_when_none_has_them(
    page: Any, dashboard: Dashboard, wide_compare: list[int], screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/compare?runs={','.join(map(str, wide_compare))}")
    page.wait_for_function("() => document.querySelector('#scatter-chart').dataset.points === '3'")
    assert page.locator("#scatter-y").input_value() == "val/acc"
    assert page.locator("#metric-select").input_value() == "val/acc"
    assert page.locator("#scatter-x").input_value() in LONG_KEYS
    page.select_option("#scatter-x", "a_rare")
    page.select_option("#scatter-y", "val/aaa")
    message = page.locator("#scatter-chart .scatter-empty")
    message.wait_for()
    assert "None of these 3 runs has both a_rare and a finite val/aaa" in message.inner_text()
    screenshot(page, "compare-scatter-empty")


def test_compare_without_runs_says_what_to_do(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    page.goto(f"{dashboard.url}/compare")
    error = page.locator("#compare-error")
    error.wait_for(state="visible")
    assert "No runs are selected" in error.inner_text()
    assert error.locator("a").get_attribute("href") == "/"
    assert page.locator("#compare-body").is_hidden()
    assert not page.locator("main select").first.is_visible()
    screenshot(page, "compare-no-runs")


# ------------------------------------------------------------- the pages' pure helpers (JS)

COMMANDS = [
    (["/home/ada/proj/.venv/bin/python", "examples/train.py", "--epochs", "3"],
     "examples/train.py --epochs 3"),
    (["python3.11", "-u", "train.py"], "train.py"),
    (["/usr/bin/python", "-m", "pkg.train", "--fast"], "-m pkg.train --fast"),
    (["python", "/srv/jobs/proj/examples/train.py"], "…/examples/train.py"),
    (["./run.sh", "a"], "./run.sh a"),
    (["torchrun", "--nproc-per-node", "2", "train.py"], "torchrun --nproc-per-node 2 train.py"),
]  # fmt: skip
METRICS = [
    ("sys/rss_bytes", 4.2e8, "400.5 MiB"),
    ("sys/gpu0/allocated_bytes", 2 * 1024**3, "2.00 GiB"),
    ("train/loss", 4.2e8, "420000000"),  # not a byte count: no unit
    ("bytes", 512, "512 B"),
    ("train/lr", 1e-3, "0.001"),
]
JSON_TYPES = [
    ('{"a": 0.0, "b": 1, "c": 1e-4, "d": [1, 2.0]}',
     {"a": "float", "b": "int", "c": "float", "d": "list"}),
    ('{"m": {"x": -2.5E3, "s": "0.0", "t": true, "n": null, "e": {}}}',
     {"m": {"x": "float", "s": "string", "t": "boolean", "n": "null", "e": "object"}}),
    ('{"a.b": 3, "q": "\\"}"}', {"a.b": "int", "q": "string"}),
]  # fmt: skip


def test_the_pages_formatting_helpers(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/jobs")
    page.wait_for_function("() => typeof CloneEditor === 'object'")
    for argv, shown in COMMANDS:
        assert page.evaluate("a => T.commandSummary(a)", argv) == shown, argv
    for key, value, shown in METRICS:
        assert page.evaluate("([k, v]) => T.fmtMetric(k, v)", [key, value]) == shown, key
    assert page.evaluate("() => T.configPairs({lr: 0.1, m: {w: 2, d: {}}, t: [1]})") == [
        "lr=0.1", "m.w=2", "m.d={}", "t=[1]",
    ]  # fmt: skip
    assert page.evaluate(
        "() => T.configPairs({wd: 0, m: {s: 2, n: 2}}, {wd: 'float', m: {s: 'float', n: 'int'}})"
    ) == ["wd=0.0", "m.s=2.0", "m.n=2"]
    for text, types in JSON_TYPES:
        assert page.evaluate("t => CloneEditor.jsonTypes(t)", text) == types, text
    typed = page.evaluate(
        "() => CloneEditor.typedJson({a: 0, b: 3, c: [1, 2], d: {e: 1e21}},"
        " {a: 'float', b: 'int', c: 'float', d: {e: 'float'}})"
    )
    assert typed == '{"a":0.0,"b":3,"c":[1.0,2.0],"d":{"e":1e+21}}'
    badge = page.evaluate("() => T.statusBadge('cancelled', 'cancelled').textContent")
    assert badge == "cancelled"
