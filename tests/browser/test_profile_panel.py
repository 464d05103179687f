"""The run page's Profile panel in real Chromium, 800 px wide (web/static/profiles.js): on a
running run "Profile N steps" asks, the panel waits for the run's heartbeat, and once the
run's client (a thread here, storing a real ``torch.profiler`` trace) has stored the trace
it shows the cause's hint, the time split, host syncs with their Python line and the top ops,
links the trace for download; a second profile diffs against the first; dark mode reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.profiler import FakeProfilingClient, loop_trace
from tracker.store import profiles, runs

pytestmark = pytest.mark.browser


@pytest.fixture
def running(dashboard: Dashboard) -> Iterator[int]:
    run = runs.create_run(dashboard.store, "profiled", "slow-steps")
    runs.start_run(dashboard.store, run.id)
    yield run.id
    runs.finish_run(dashboard.store, run.id, "finished")


def test_profile_a_running_run_from_its_page(
    page: Any, dashboard: Dashboard, running: int, screenshot: Any
) -> None:
    store, run_id = dashboard.store, running
    slow, healthy = loop_trace(item=True), loop_trace(item=False)
    page.set_viewport_size({"width": 800, "height": 1000})
    page.goto(f"{dashboard.url}/runs/{run_id}", timeout=60_000)
    page.wait_for_selector("#run-profiles:not([hidden]) #profile-ask")
    client = FakeProfilingClient(store, run_id, slow, hold=True)
    client.start()
    try:
        page.fill("#profile-steps", "8")
        assert page.inner_text("#profile-ask") == "Profile 8 steps"
        page.click("#profile-ask")
        waiting = page.wait_for_selector("#profile-progress")
        assert "waiting for the run's next heartbeat (up to ~10 s)" in waiting.inner_text()
        assert page.is_disabled("#profile-ask")  # one at a time
        client.go.set()  # the heartbeat answered: the client profiles and stores the trace
        wait_until(client.stored.is_set, "the client stored the trace")
        hint = page.wait_for_selector(".profile-hint")
    finally:
        client.stop()
    first = profiles.list_profiles(store, run_id)[0]
    assert (first.steps, first.state, first.requested_by) == (8, "stored", "no-auth")
    assert "aten::item" in hint.inner_text() and "profiler.py" in hint.inner_text()
    assert page.is_hidden("#profile-progress")
    item = page.locator(f'details.profile-item[data-profile="{first.id}"]')
    assert "steps 120..127" in item.locator(".profile-head").inner_text()
    legend = item.locator(".split-legend li").all_inner_texts()
    assert [t.rsplit(" ", 2)[0] for t in legend] == [
        "compute", "communication", "memory copies", "dataloader wait", "idle",
    ]  # fmt: skip
    assert item.locator(".split-bar .split-seg").count() >= 2
    assert "1.00 per step" in item.locator(".profile-syncs").inner_text()
    assert "profiler.py" in item.locator(".sync-frames").inner_text()
    assert item.locator(".profile-ops tbody tr").count() >= 5
    link = item.locator("a", has_text="trace rank 0")
    got = page.request.get(dashboard.url + link.get_attribute("href"))
    assert got.status == 200 and got.body() == slow
    assert (
        f"run{run_id}-profile{first.id}-rank0.pt.trace.json.gz"
        in got.headers["content-disposition"]
    )
    # at 800 px nothing is cut off: the page does not scroll sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    screenshot(page, "profile-panel")

    # a second profile, of a healthy stretch: no cause; ticking both shows the diff
    client = FakeProfilingClient(store, run_id, healthy, first_step=300)
    client.start()
    try:
        page.click("#profile-ask")
        page.wait_for_selector(".profile-ok")
    finally:
        client.stop()
    second = profiles.list_profiles(store, run_id)[0]
    assert second.id != first.id and second.steps == 8
    for pid in (first.id, second.id):
        selector = f'details.profile-item[data-profile="{pid}"]'
        if page.locator(selector).get_attribute("open") is None:  # collapsed
            page.click(f"{selector} > summary")
        page.check(f"{selector} .profile-pick input")
    diff = page.wait_for_selector("#profile-diff")
    assert f"#{second.id} against #{first.id}" in diff.inner_text()
    assert "Host syncs per step: 1 → 0" in diff.inner_text()

    # dark mode: the hint keeps its own (dark) background and readable text
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    colours = page.evaluate(
        "(() => { const s = getComputedStyle(document.querySelector('.profile-hint'));"
        " return [s.backgroundColor, s.color]; })()"
    )
    assert colours == ["rgb(42, 33, 16)", "rgb(229, 231, 235)"], colours
    wait_until(lambda: page.evaluate("document.documentElement.scrollWidth") <= 800,
               "no sideways scroll at 800 px")  # fmt: skip
    screenshot(page, "profile-panel-dark")
