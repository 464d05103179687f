"""The compare page in a real browser: the config diff shows only the keys that differ (all
on request), one metric overlaid with a colour per run, parallel coordinates, scatter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import Dashboard
from tracker.store.metrics import log_metrics
from tracker.store.runs import create_run, get_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

COMPARED = ("adam-lr3e-4", "adam-lr1e-3", "sgd-lr1e-2")


def flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def diff_keys(dashboard: Dashboard, run_ids: list[int]) -> tuple[set[str], set[str]]:
    """(keys whose values differ or are missing somewhere, all keys), from the store."""
    configs = [flat(get_run(dashboard.store, r).config) for r in run_ids]
    every = set().union(*configs)
    missing = object()
    differing = {k for k in every if len({repr(c.get(k, missing)) for c in configs}) > 1}
    return differing, every


def shown_keys(page: Any) -> set[str]:
    return set(
        page.eval_on_selector_all("#diff-table tbody tr", "rs => rs.map(r => r.dataset.key)")
    )


def test_compare_three_runs_shows_only_differing_config_keys(
    page: Any, dashboard: Dashboard, screenshot: Any
) -> None:
    run_ids = [dashboard.seeded.runs[name] for name in COMPARED]
    differing, every = diff_keys(dashboard, run_ids)
    assert {"lr", "optimizer", "model.width", "momentum"} == differing  # the seed's intent
    page.goto(f"{dashboard.url}/compare?runs={','.join(map(str, run_ids))}")
    page.wait_for_selector("#diff-table tbody tr")
    assert shown_keys(page) == differing
    headers = page.locator("#diff-table thead th.run-col").all_inner_texts()
    assert [h.split("\n")[0] for h in headers] == [
        f"{name} #{rid}" for name, rid in zip(COMPARED, run_ids, strict=True)
    ]
    momentum = page.locator('#diff-table tr[data-key="momentum"] td')
    assert momentum.all_inner_texts() == ["missing", "missing", "0.9"]
    page.check("#show-all-keys")
    page.wait_for_function(
        f"() => document.querySelectorAll('#diff-table tbody tr').length === {len(every)}"
    )
    assert shown_keys(page) == every
    page.uncheck("#show-all-keys")
    assert shown_keys(page) == differing

    # Overlay: band + line per run (3 traces each), one colour per run.
    overlay = page.locator("#overlay-chart")
    overlay.locator(".scatterlayer .trace").first.wait_for()
    assert page.locator("#metric-select").input_value() == "val/acc"
    assert overlay.locator(".scatterlayer .trace").count() == 3 * len(run_ids)
    colours = page.evaluate(
        "() => [...new Set(document.querySelector('#overlay-chart').data"
        ".filter(t => t.meta.role === 'last').map(t => t.line.color))]"
    )
    assert len(colours) == len(run_ids)
    assert page.locator("#parcoords-chart svg polyline").count() == len(run_ids)
    labels = page.eval_on_selector_all(
        "#parcoords-chart .pc-label", "ls => ls.map(l => l.dataset.key)"
    )
    assert labels[-1] == "val/acc" and "lr" in labels
    page.wait_for_function("() => document.querySelector('#scatter-chart').dataset.points === '3'")
    page.select_option("#metric-select", "train/loss")
    page.wait_for_function(
        "() => document.querySelector('#overlay-chart').layout.yaxis.title.text === 'train/loss'"
    )
    page.select_option("#metric-select", "val/acc")
    page.wait_for_function(
        "() => document.querySelector('#overlay-chart').layout.yaxis.title.text === 'val/acc'"
    )
    screenshot(page, "compare")


def test_compare_needs_two_runs(page: Any, dashboard: Dashboard) -> None:
    page.goto(f"{dashboard.url}/compare?runs={dashboard.seeded.runs['adam-lr3e-4']}")
    error = page.locator("#compare-error")
    error.wait_for(state="visible")
    assert "2 to 200 runs" in error.inner_text()


def test_compare_two_hundred_runs(page: Any, dashboard: Dashboard) -> None:
    store = dashboard.store
    run_ids = []
    for i in range(200):
        run = create_run(store, "many", f"m{i}", {"lr": 10 ** -(1 + i % 4), "seed": i})
        log_metrics(store, run.id, 0, {"val/acc": (i % 10) / 10, "train/loss": 1.0 / (i + 1)})
        log_metrics(store, run.id, 1, {"val/acc": (i % 10) / 9, "train/loss": 0.5 / (i + 1)})
        run_ids.append(run.id)
    page.goto(f"{dashboard.url}/compare?runs={','.join(map(str, run_ids))}")
    page.wait_for_selector("#diff-table tbody tr")
    assert page.locator("#diff-table thead th.run-col").count() == 200
    assert shown_keys(page) == {"lr", "seed"}
    page.locator("#parcoords-chart svg polyline").first.wait_for()
    assert page.locator("#parcoords-chart svg polyline").count() == 200
