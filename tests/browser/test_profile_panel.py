"""The run page's Profile panel in real Chromium, 800 px wide (web/static/profiles.js): on a
running run (a real one, training a tiny CPU loop starved by its DataLoader in a thread:
:func:`tests.support.profiler.training_run`) "Profile N steps" asks, the panel waits for
the run's heartbeat, and once the run's own client has profiled the steps and stored the
trace it shows the cause's hint, the time split and the top ops, links the trace for
download; a second profile, once the loop is healthy, diffs against the first; dark mode
reads."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Dashboard, wait_until
from tests.support.profiler import training_run
from tracker.store import profiles
from tracker.store.artifacts import open_artifact

pytestmark = pytest.mark.browser


def test_profile_a_running_run_from_its_page(page: Any, dashboard: Dashboard,
                                             screenshot: Any) -> None:  # fmt: skip
    store = dashboard.store
    page.set_viewport_size({"width": 800, "height": 1000})
    command = ["python", "train.py", "--data", "shards/", "--batch-size", "8"]
    with training_run(dashboard.store_url, kind="dataloader", name="slow-steps",
                      command=command) as run:  # fmt: skip
        page.goto(f"{dashboard.url}/runs/{run.id}", timeout=60_000)
        page.wait_for_selector("#run-profiles:not([hidden]) #profile-ask")
        page.fill("#profile-steps", "5")
        assert page.inner_text("#profile-ask") == "Profile 5 steps"
        run.hold()  # a long step: no log() comes, so the request stays unanswered
        page.click("#profile-ask")
        waiting = page.wait_for_selector("#profile-progress")
        assert "waiting for the run's next heartbeat (up to ~10 s)" in waiting.inner_text()
        assert page.is_disabled("#profile-ask")  # one at a time
        run.go()  # the next log() starts the profile; 5 steps later the trace is stored
        hint = page.wait_for_selector(".profile-hint")
        first = profiles.list_profiles(store, run.id)[0]
        assert first.first_step is not None and first.last_step is not None, first
        assert (first.steps, first.state, first.requested_by) == (5, "stored", "no-auth")
        assert first.last_step - first.first_step == 4, first
        assert "waiting for the DataLoader" in hint.inner_text()
        assert "num_workers" in hint.inner_text()
        assert page.is_hidden("#profile-progress")
        item = page.locator(f'details.profile-item[data-profile="{first.id}"]')
        steps = f"steps {first.first_step}..{first.last_step}"
        assert steps in item.locator(".profile-head").inner_text()
        legend = item.locator(".split-legend li").all_inner_texts()
        assert [t.rsplit(" ", 2)[0] for t in legend] == [
            "compute", "communication", "memory copies", "dataloader wait", "idle",
        ]  # fmt: skip
        assert item.locator(".split-bar .split-seg").count() >= 2
        assert item.locator(".profile-ops tbody tr").count() >= 5
        link = item.locator("a", has_text="trace rank 0")
        got = page.request.get(dashboard.url + link.get_attribute("href"))
        with open_artifact(store, run.id, first.traces[0]["path"]) as fh:
            assert got.status == 200 and got.body() == fh.read()
        assert (
            f"run{run.id}-profile{first.id}-rank0.pt.trace.json.gz"
            in got.headers["content-disposition"]
        )
        # at 800 px nothing is cut off: the page does not scroll sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= 800
        screenshot(page, "profile-panel")

        # a second profile, once the loop reads from memory: no cause; ticking both diffs
        run.kind = "healthy"
        page.click("#profile-ask")
        page.wait_for_selector(".profile-ok")
        second = profiles.list_profiles(store, run.id)[0]
        assert second.id != first.id and second.steps == 5
        assert second.first_step is not None and second.first_step > first.last_step
        for pid in (first.id, second.id):
            selector = f'details.profile-item[data-profile="{pid}"]'
            if page.locator(selector).get_attribute("open") is None:  # collapsed
                page.click(f"{selector} > summary")
            page.check(f"{selector} .profile-pick input")
        diff = page.wait_for_selector("#profile-diff")
        assert f"#{second.id} against #{first.id}" in diff.inner_text()
        assert "Host syncs per step: 0 → 0" in diff.inner_text()
        wait_row = page.locator("#profile-diff tr", has_text="dataloader wait")
        assert wait_row.locator("td").last.inner_text().startswith("-")  # the wait is gone

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
