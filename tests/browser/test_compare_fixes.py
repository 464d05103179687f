"""Compare and clone, in real Chromium: the metric pickers offer only keys a compared run
logged (not every key of the project); the histogram card never puts a run beside itself;
a scatter of one point gets an axis around it; and a field the clone form or the server
refuses is outlined, with its message under it, and brought into view on submit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.browser import Dashboard
from tracker.entities import JobSpec
from tracker.store import queue
from tracker.store.artifacts import put_artifact
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SLOW_LOAD_MS = 60_000  # the first page that parses plotly.js on a busy machine
HISTOGRAM = json.dumps({"edges": [-1.0, 0.0, 1.0, 2.0], "counts": [3, 5, 2]}).encode()


def compared_runs(dashboard: Dashboard) -> tuple[int, int, int]:
    """Three runs of one project, two compared: only ``a`` has a finite ``val/acc``, only
    ``b`` and ``c`` histograms; ``c`` alone logged ``other/only_c``."""
    store = dashboard.store
    a = create_run(store, "cmpfix", "a", {"lr": 0.004, "width": 64}, status="finished").id
    b = create_run(store, "cmpfix", "b", {"lr": 0.02, "width": 64}, status="finished").id
    c = create_run(store, "cmpfix", "c", {"lr": 0.1, "width": 32}, status="finished").id
    for step in range(5):
        log_metrics(store, a, step, {"train/loss": 1 / (step + 1), "val/acc": 0.5 + step / 20})
        log_metrics(store, b, step, {"train/loss": 2 / (step + 1)})
        log_metrics(store, c, step, {"train/loss": 3 / (step + 1), "other/only_c": step})
    for run in (b, c):
        for step in (0, 10):
            put_artifact(store, run, f"media/histograms/weights/{step:09d}.json", HISTOGRAM,
                         media_type="application/json", step=step)  # fmt: skip
    return a, b, c


def options(page: Any, selector: str) -> list[str]:
    return page.eval_on_selector_all(f"{selector} option", "os => os.map(o => o.value)")


def test_compare_offers_the_runs_own_metrics_and_never_a_run_beside_itself(
    page: Any, dashboard: Dashboard
) -> None:
    a, b, c = compared_runs(dashboard)
    page.goto(f"{dashboard.url}/compare?runs={a},{b}", timeout=SLOW_LOAD_MS)
    page.wait_for_function("() => document.getElementById('metric-select').options.length > 0")
    # c's metric is a key of the project, but neither compared run logged it
    assert options(page, "#metric-select") == ["train/loss", "val/acc"]
    assert options(page, "#scatter-y") == ["train/loss", "val/acc"]

    # histograms: only b has the key; the right picker never offers the left one's run
    page.wait_for_selector("#compare-histograms:not([hidden])")
    assert page.locator("#hist-run-a").input_value() == str(b)
    assert options(page, "#hist-run-b") == [str(a)]
    page.select_option("#hist-run-a", str(a))
    page.wait_for_function(f"() => document.getElementById('hist-run-b').value === '{b}'")
    assert options(page, "#hist-run-b") == [str(b)]
    assert page.locator("#hist-run-a").input_value() == str(a)

    # three runs, two with the key: the pair defaults to them, and still never one twice
    page.goto(f"{dashboard.url}/compare?runs={a},{b},{c}", timeout=SLOW_LOAD_MS)
    page.wait_for_selector("#compare-histograms:not([hidden])")
    page.wait_for_function("() => document.getElementById('hist-chart-b').dataset.run")
    assert [page.locator(f"#hist-run-{s}").input_value() for s in "ab"] == [str(b), str(c)]
    assert str(b) not in options(page, "#hist-run-b")
    page.select_option("#hist-run-a", str(c))
    page.wait_for_function(f"() => document.getElementById('hist-run-b').value === '{b}'")
    assert str(c) not in options(page, "#hist-run-b")


def test_a_scatter_of_one_point_has_an_axis_around_it(page: Any, dashboard: Dashboard) -> None:
    a, b, _ = compared_runs(dashboard)
    page.goto(f"{dashboard.url}/compare?runs={a},{b}", timeout=SLOW_LOAD_MS)
    page.wait_for_function("() => document.getElementById('scatter-y').options.length > 0")
    page.select_option("#scatter-x", "lr")
    page.select_option("#scatter-y", "val/acc")  # only a has it: one point
    page.wait_for_function(
        "() => { const p = document.getElementById('scatter-chart');"
        " return p.dataset.points === '1' && p.layout && p.layout.yaxis.title.text === 'val/acc'; }"
    )
    x, y = page.evaluate(
        "() => { const l = document.getElementById('scatter-chart')._fullLayout;"
        " return [l.xaxis.range, l.yaxis.range]; }"
    )
    assert x == pytest.approx([0.002, 0.006])  # lr 0.004, half its size each side
    assert y == pytest.approx([0.35, 1.05])  # val/acc 0.7
    assert page.locator("#scatter-chart .point").count() == 1


def in_view(page: Any, selector: str) -> bool:
    """Whether the element is inside its scrolling box and the window."""
    return bool(
        page.eval_on_selector(
            selector,
            "e => { const r = e.getBoundingClientRect();"
            " const box = e.closest('.config-form').getBoundingClientRect();"
            " return r.top >= box.top && r.bottom <= box.bottom"
            " && r.top >= 0 && r.bottom <= window.innerHeight; }",
        )
    )


def test_a_refused_clone_field_is_marked_and_brought_into_view(
    page: Any, dashboard: Dashboard
) -> None:
    config = {f"k{i:02d}": i for i in range(40)}
    job = queue.enqueue(
        dashboard.store, JobSpec(argv=["python", "train.py"], config=config, gpus=8)
    )
    page.goto(f"{dashboard.url}/jobs?clone_job={job.id}")
    page.locator("#clone-dialog").wait_for(state="visible")
    first = '#clone-rows input[name="k00"]'
    page.fill(first, "ten")  # refused as the reader types: marked, not yet scrolled to
    field = page.locator(first)
    assert field.get_attribute("aria-invalid") == "true"
    assert "k00: expected an integer" in page.locator("#clone-field-error").inner_text()
    page.eval_on_selector(".config-form", "e => { e.scrollTop = e.scrollHeight; }")
    assert not in_view(page, first)
    page.click("#clone-submit")
    page.wait_for_function(f"() => document.activeElement === document.querySelector('{first}')")
    assert in_view(page, first)
    assert field.get_attribute("aria-describedby") == "clone-field-error"
    assert page.locator("#clone-field-error").count() == 1

    # fixed: the mark goes; a priority the server refuses is marked at the priority box
    page.fill(first, "10")
    assert field.get_attribute("aria-invalid") is None
    assert page.locator("#clone-field-error").count() == 0
    page.fill("#clone-priority", "1000000000")
    page.click("#clone-submit")
    priority = page.locator("#clone-priority")
    page.wait_for_function(
        "() => document.getElementById('clone-priority').getAttribute('aria-invalid') === 'true'"
    )
    message = page.locator("#clone-field-error").inner_text()
    assert message.startswith("priority:") and "1000000" in message
    assert priority.evaluate("e => document.activeElement === e")
    assert page.locator("#clone-dialog").is_visible()  # nothing queued, the dialog stays
