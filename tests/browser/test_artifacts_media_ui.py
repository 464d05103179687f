"""Artifacts and media in a real browser: the run page's Artifacts tab (tree, sizes, hashes,
previews of every kind, downloads), its Media tab (an image key's step slider, figures,
histograms over steps as a heatmap) and Compare's histograms side by side.

The files are written through the store's ``put_artifact`` (tests/support/browser_media.py),
served by the real dashboard from a real blob store; every test runs on SQLite and on
PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.conftest import PG_ENV, create_pg_database, drop_pg_database
from tests.support.browser import Dashboard
from tests.support.browser_media import CSV_ROWS, HIST_STEPS, HOSTILE, MANY_STEPS, SeededMedia
from tests.support.browser_media import sample as sample_png
from tests.support.browser_media import seed_media as seed
from tests.support.browser_seed import seed as seed_runs
from tests.support.chromium import NO_CHROMIUM_REASON, chromium_path
from tests.support.servers import ServerThread
from tracker.store import Store
from tracker.web.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]

BEST = "adam-lr3e-4"
OTHER = "adam-lr1e-3"
SLOW_LOAD_MS = 60_000  # the first page that parses plotly.js on a busy machine


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def dashboard(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dashboard]:
    """The seeded dashboard (as tests/browser/conftest.py makes it) on a SQLite file, then
    on a PostgreSQL database of its own, each with its artifact root in a temporary folder."""
    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM_REASON)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    folder = tmp_path_factory.mktemp(f"dashboard-{request.param}")
    server_url = os.environ.get(PG_ENV)
    if request.param == "sqlite":
        store_url = f"sqlite:///{folder / 'tracker.db'}"
    elif not server_url:
        pytest.skip(f"PostgreSQL tests need {PG_ENV} (./scripts/test.sh starts a server)")
    else:
        store_url = create_pg_database(server_url)
    root = str(folder / "artifacts")
    store = Store(store_url, artifact_root=root)
    seeded = seed_runs(store)
    app = create_app({"STORE_URI": store_url, "NO_AUTH": True, "ARTIFACT_ROOT": root})
    server = ServerThread(app)
    yield Dashboard(server.url, store_url, store, seeded)
    server.stop()
    app.extensions["tracker"].store.close()
    store.close()
    if request.param == "postgresql" and server_url:
        drop_pg_database(server_url, store_url)


@pytest.fixture(scope="module")
def media(dashboard: Dashboard) -> SeededMedia:
    from tracker.store.artifacts import put_artifact

    runs = dashboard.seeded.runs
    return seed(partial(put_artifact, dashboard.store), runs[BEST], other_run=runs[OTHER])


def open_tab(page: Any, dashboard: Dashboard, tab: str) -> int:
    run_id = dashboard.seeded.runs[BEST]
    page.goto(f"{dashboard.url}/runs/{run_id}#{tab}", timeout=SLOW_LOAD_MS)
    return run_id


def row(page: Any, path: str) -> Any:
    return page.locator(f".artifact-row[data-path={json.dumps(path)}]")  # a CSS string


def select(page: Any, path: str, kind: str) -> Any:
    row(page, path).locator(".artifact-file").click()
    page.wait_for_selector(
        f'#artifact-preview[data-path={json.dumps(path)}][data-kind="{kind}"][data-state="ready"]'
    )
    return page.locator("#artifact-preview .preview-body")


def test_artifacts_tab_tree_sizes_hashes_and_previews(
    page: Any, dashboard: Dashboard, media: SeededMedia, screenshot: Any
) -> None:
    from tracker.store.artifacts import get_artifact, list_artifacts, open_artifact, put_artifact

    run_id = open_tab(page, dashboard, "artifacts")
    stored = list_artifacts(dashboard.store, run_id)
    page.wait_for_selector(".artifact-row")
    assert page.locator("#artifact-count").inner_text() == str(len(stored))
    # Folders: the small ones open, media/ (thousands of files) closed and not yet built.
    folders = page.eval_on_selector_all(
        "#artifacts-tree > ul > li > details", "ds => ds.map(d => [d.dataset.dir, d.open])"
    )
    assert folders == [["eval", True], ["media", False], ["model", True], ["notes", True]]
    assert page.locator('details[data-dir="media"] .artifact-row').count() == 0
    csv = get_artifact(dashboard.store, run_id, "eval/predictions.csv")
    cells = row(page, "eval/predictions.csv").inner_text()
    assert "predictions.csv" in cells and csv.sha256[:12] in cells and "KiB" in cells
    sha_title = row(page, "eval/predictions.csv").locator("code.sha").get_attribute("title")
    assert sha_title == csv.sha256

    # CSV: a table of the first 100 rows, quotes removed, with a note that there are more.
    body = select(page, "eval/predictions.csv", "csv")
    assert body.locator("thead th").all_inner_texts() == ["id", "label", "predicted", "confidence"]
    assert body.locator("tbody tr").count() == 100 < CSV_ROWS
    assert body.locator("tbody tr").first.locator("td").all_inner_texts() == ["0", "0", "0", "0.50"]
    assert "first 100 rows shown" in body.inner_text()
    facts = page.locator("#artifact-preview .preview-facts").inner_text()
    assert f"{csv.size} bytes" in facts and "text/csv" in facts and csv.sha256[:12] in facts

    # JSON: pretty-printed; a hostile string in it is text.
    body = select(page, "eval/metrics.json", "json")
    text = body.locator("pre").inner_text()
    assert json.loads(text)["note"] == HOSTILE
    assert '\n  "per_class": [\n    0.97,' in text

    body = select(page, "notes/README.txt", "text")
    assert HOSTILE in body.locator("pre").inner_text()
    body = select(page, "config.yaml", "text")
    assert "width: 64" in body.inner_text()

    # An image inline: its real pixels arrived (the seeded PNG is 40 px wide).
    body = select(page, "eval/confusion.png", "image")
    page.wait_for_function(
        "() => { const i = document.querySelector('#artifact-preview .preview-image');"
        " return i && i.complete && i.naturalWidth === 40; }"
    )
    # A PDF as a link; anything else download only.
    body = select(page, "eval/report.pdf", "pdf")
    pdf = body.locator("a.pdf-link")
    assert pdf.get_attribute("target") == "_blank" and "noopener" in pdf.get_attribute("rel")
    body = select(page, "model/weights.bin", "none")
    assert "No preview" in body.inner_text()

    # A hostile file name is shown as its text; no script ran anywhere.
    hostile = f"notes/{HOSTILE}.txt"
    assert row(page, hostile).locator(".artifact-file").inner_text() == f"{HOSTILE}.txt"
    assert page.evaluate("document.body.dataset.xss") is None
    assert page.locator("#artifacts-tree img").count() == 0

    # Downloads: the link's bytes are the stored bytes.
    for path in ("model/weights.bin", "eval/predictions.csv", hostile):
        href = row(page, path).locator("a.artifact-download").get_attribute("href")
        answer = page.request.get(f"{dashboard.url}{href}")
        assert answer.ok, (path, answer.status)
        with open_artifact(dashboard.store, run_id, path) as stored_file:
            assert answer.body() == stored_file.read()
        assert (
            hashlib.sha256(answer.body()).hexdigest()
            == get_artifact(dashboard.store, run_id, path).sha256
        )

    # Copy the full hash (no clipboard permission in a plain http page: the fallback copies).
    row(page, "config.yaml").locator(".copy-sha").click()
    page.wait_for_selector("#toast:not([hidden])")
    sha = get_artifact(dashboard.store, run_id, "config.yaml").sha256
    assert sha in page.locator("#toast").inner_text()

    # The closed media/ folder is built when opened; 2000 steps of one key stay closed.
    page.locator('details[data-dir="media"] > summary').click()
    images = page.locator('details[data-dir="images"]')
    assert not images.evaluate("d => d.open")  # 2042 files
    images.locator(":scope > summary").click()
    assert not page.locator('details[data-dir="many"]').evaluate("d => d.open")
    page.locator('details[data-dir="many"] > summary').click()
    page.wait_for_function(
        f"() => document.querySelectorAll('details[data-dir=\"many\"] .artifact-row').length"
        f" === {MANY_STEPS}"
    )
    page.locator('details[data-dir="many"] > summary').click()
    images.locator(":scope > summary").click()
    page.locator('details[data-dir="media"] > summary').click()
    select(page, "eval/predictions.csv", "csv")
    page.evaluate("() => { document.getElementById('toast').hidden = true; scrollTo(0, 0); }")
    screenshot(page, "run-artifacts")

    # A file logged later appears on Reload, and the selected file stays selected.
    put_artifact(dashboard.store, run_id, "notes/later.txt", b"logged after the page opened\n")
    page.click("#artifacts-reload")
    row(page, "notes/later.txt").wait_for()
    assert page.locator("#artifact-count").inner_text() == str(len(stored) + 1)
    assert page.locator("#artifact-preview").get_attribute("data-path") == "eval/predictions.csv"


def image_card(page: Any, key: str) -> Any:
    return page.locator(f'.media-card[data-kind="images"][data-key="{key}"]')


def wait_shown(page: Any, key: str, step: int, width: int) -> None:
    page.wait_for_function(
        "([key, step, width]) => {"
        ' const card = document.querySelector(`.media-card[data-key="${key}"]`);'
        " const img = card && card.querySelector('img.media-image');"
        " return img && card.dataset.loaded === String(step) && img.complete"
        " && img.naturalWidth === width; }",
        arg=[key, step, width],
    )


def image_requests(requested: list[str], key: str) -> list[str]:
    """The files of image key ``key`` (not of its sub-keys) the page asked for."""
    folder = f"/artifacts/media/images/{key}/"
    return [u for u in requested if folder in u and "/" not in u.split(folder, 1)[1]]


def test_image_slider_changes_the_image(
    page: Any, dashboard: Dashboard, media: SeededMedia, screenshot: Any
) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    open_tab(page, dashboard, "media")
    card = image_card(page, "samples")
    card.wait_for()
    steps = media.image_steps
    # The latest step first; step s (the i-th) is 16 + i pixels wide.
    wait_shown(page, "samples", steps[-1], 16 + len(steps) - 1)
    assert (
        card.locator(".media-step").inner_text() == f"step {steps[-1]} · {len(steps)}/{len(steps)}"
    )
    assert (
        card.locator(".media-caption").inner_text()
        == f"step {steps[-1]}: predicted {steps[-1] % 10}"
    )
    slider = card.locator("input.media-slider")
    slider.focus()
    page.keyboard.press("Home")
    wait_shown(page, "samples", steps[0], 16)
    assert card.locator(".media-caption").inner_text() == "step 0: predicted 0"
    page.keyboard.press("ArrowRight")
    wait_shown(page, "samples", steps[1], 17)
    assert card.locator(".media-step").inner_text() == f"step {steps[1]} · 2/{len(steps)}"
    card.locator('button[aria-label="next step"]').click()
    wait_shown(page, "samples", steps[2], 18)
    # Only the images shown were fetched, not the 40 steps.
    assert len(image_requests(requested, "samples")) == 4

    # 2000 steps: one listing and one image (the last), whatever the slider's length.
    many = image_card(page, "many")
    many.scroll_into_view_if_needed()
    wait_shown(page, "many", MANY_STEPS - 1, 17)
    assert many.get_attribute("data-steps") == str(MANY_STEPS)
    assert len(image_requests(requested, "many")) == 1
    many.locator("input.media-slider").evaluate(
        "s => { s.value = '1000'; s.dispatchEvent(new Event('input'));"
        " s.dispatchEvent(new Event('change')); }"
    )
    wait_shown(page, "many", 1000, 17)
    assert len(image_requests(requested, "many")) == 2

    # A caption with markup is text; a sub-key has its own card.
    val = image_card(page, "samples/val")
    val.scroll_into_view_if_needed()
    wait_shown(page, "samples/val", 0, 19)
    assert val.locator(".media-caption").inner_text() == HOSTILE
    assert page.evaluate("document.body.dataset.xss") is None

    # Figures: plotly JSON drawn interactively (the last step first), PNG as an image.
    fig = page.locator('.media-card[data-kind="figures"][data-key="confusion"]')
    fig.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-key=\"confusion\"] .media-plot');"
        " return p && p.data && p.data[0].type === 'heatmap' && p.dataset.step === '200'; }"
    )
    assert fig.locator(".main-svg").count() >= 1
    fig.locator('button[aria-label="previous step"]').click()
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-key=\"confusion\"] .media-plot');"
        " return p.dataset.step === '100' && p.data[0].z[0][0] === 120; }"
    )
    png = page.locator('.media-card[data-kind="figures"][data-key="loss_curve"]')
    png.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const c = document.querySelector('.media-card[data-key=\"loss_curve\"]');"
        " const i = c.querySelector('img'); return i && i.complete && i.naturalWidth === 26; }"
    )
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "run-media")

    # A step logged later appears on Reload.
    from tracker.store.artifacts import put_artifact

    run_id = dashboard.seeded.runs[BEST]
    later = steps[-1] + 5
    put_artifact(dashboard.store, run_id, f"media/images/samples/{later:09d}.png",
                 sample_png(len(steps)), step=later)  # fmt: skip
    page.click("#media-reload")
    wait_shown(page, "samples", later, 16 + len(steps))
    assert image_card(page, "samples").get_attribute("data-steps") == str(len(steps) + 1)


def test_histogram_panel_draws_a_heatmap_over_steps(
    page: Any, dashboard: Dashboard, media: SeededMedia, screenshot: Any
) -> None:
    open_tab(page, dashboard, "media")
    selector = '.histogram-card[data-key="weights/fc1"] .histogram-chart'
    page.locator(selector).scroll_into_view_if_needed()
    page.wait_for_function(
        f"() => {{ const p = document.querySelector('{selector}');"
        " return p && p.data && p.data[0].type === 'heatmap'; }"
    )
    plot = page.locator(selector)
    assert plot.get_attribute("data-steps") == str(HIST_STEPS)
    trace = plot.evaluate(
        "p => ({y: p.data[0].y, rows: p.data[0].z.map(r => r.length),"
        " sums: p.data[0].z.map(r => r.reduce((a, b) => a + b, 0))})"
    )
    assert trace["y"] == media.hist_steps
    assert set(trace["rows"]) == {64}
    # Re-binning onto the common grid keeps every count (2000 values per step).
    assert all(abs(s - 2000) < 1e-6 for s in trace["sums"])
    assert plot.locator(".main-svg").count() >= 1
    card = page.locator('.histogram-card[data-key="weights/fc1"]')
    card.locator('input[type="checkbox"]').check()
    page.wait_for_function(
        f"() => document.querySelector('{selector}').data[0].colorbar.title.text"
        " === 'log10(1+count)'"
    )
    card.locator('input[type="checkbox"]').uncheck()
    page.wait_for_function(
        f"() => document.querySelector('{selector}').data[0].colorbar.title.text === 'count'"
    )
    assert card.locator(".histogram-note").is_hidden()  # every step drawn


def test_a_histogram_of_few_steps_has_a_tick_at_each_step(
    page: Any, dashboard: Dashboard, media: SeededMedia
) -> None:
    """One step drew a step axis of 22.6 .. 23.4: a few rows get a tick at each step."""
    from tracker.store.artifacts import put_artifact

    run_id = dashboard.seeded.runs["adam-stopped"]
    doc = json.dumps({"edges": [-1.0, 0.0, 1.0, 2.0], "counts": [3, 5, 2]}).encode()
    cases = {"weights/once": [23], "weights/thrice": [23, 46, 69], "weights/many": list(range(30))}
    for key, steps in cases.items():
        for step in steps:
            put_artifact(dashboard.store, run_id, f"media/histograms/{key}/{step:09d}.json", doc,
                         media_type="application/json", step=step)  # fmt: skip
    page.goto(f"{dashboard.url}/runs/{run_id}#media", timeout=SLOW_LOAD_MS)
    for key, steps in cases.items():
        selector = f'.histogram-card[data-key="{key}"] .histogram-chart'
        page.locator(selector).scroll_into_view_if_needed()
        page.wait_for_function(
            f"() => {{ const p = document.querySelector('{selector}');"
            " return p && p.data && p.data[0].type === 'heatmap' && p.querySelector('.ytick'); }"
        )
        labels = page.locator(f"{selector} .ytick text").all_text_contents()
        if len(steps) <= 8:
            assert labels == [str(s) for s in steps], key
        else:  # plotly's own ticks: whole steps inside the range
            assert len(labels) >= 3 and all(0 <= int(t) <= 29 for t in labels), labels


def test_compare_shows_two_runs_histograms_side_by_side(
    page: Any, dashboard: Dashboard, media: SeededMedia, screenshot: Any
) -> None:
    best, other = dashboard.seeded.runs[BEST], dashboard.seeded.runs[OTHER]
    third = dashboard.seeded.runs["sgd-lr1e-2"]  # logged no histogram
    page.goto(f"{dashboard.url}/compare?runs={best},{other},{third}", timeout=SLOW_LOAD_MS)
    page.wait_for_selector("#compare-histograms:not([hidden])")
    page.wait_for_function(
        "() => ['a', 'b'].every(s => { const p = document.getElementById(`hist-chart-${s}`);"
        " return p.data && p.data[0].type === 'heatmap'; })"
    )
    assert page.locator("#hist-key").input_value() == "weights/fc1"
    assert page.eval_on_selector_all("#hist-key option", "os => os.map(o => o.value)") == [
        "grads/fc1",
        "weights/fc1",
    ]
    assert page.locator("#hist-run-a").input_value() == str(best)
    assert page.locator("#hist-run-b").input_value() == str(other)
    shapes = page.evaluate(
        "() => ['a', 'b'].map(s => { const p = document.getElementById(`hist-chart-${s}`);"
        " return {x: p.data[0].x, zmax: p.data[0].zmax, title: p.layout.title.text,"
        " run: p.dataset.run}; })"
    )
    assert shapes[0]["x"] == shapes[1]["x"] and shapes[0]["zmax"] == shapes[1]["zmax"]
    assert BEST in shapes[0]["title"] and OTHER in shapes[1]["title"]
    assert [s["run"] for s in shapes] == [str(best), str(other)]
    # A run without the key: an empty side, said so.
    page.select_option("#hist-run-b", str(third))
    page.wait_for_selector("#hist-chart-b p.empty")
    assert "No histogram data" in page.locator("#hist-chart-b").inner_text()
    page.select_option("#hist-run-b", str(other))
    page.wait_for_function("() => document.getElementById('hist-chart-b').dataset.steps !== '0'")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "compare-histograms")


def test_a_run_without_files_says_so(page: Any, dashboard: Dashboard, media: SeededMedia) -> None:
    run_id = dashboard.seeded.runs["sgd-lr1e-2"]
    page.goto(f"{dashboard.url}/runs/{run_id}#artifacts", timeout=SLOW_LOAD_MS)
    page.wait_for_selector("#artifacts-tree p.empty")
    assert page.locator("#artifacts-tree").inner_text() == "This run has no artifacts."
    assert page.locator("#artifact-preview").is_hidden()
    assert page.locator("#artifact-count").inner_text() == ""
    page.click('.tab[data-tab="media"]')
    page.wait_for_selector("#media-root p.empty")
    assert "no images, figures or histograms" in page.locator("#media-root").inner_text()
    assert page.locator("#media-count").inner_text() == ""


def test_images_logged_by_mlflow_log_image_with_a_key_are_media(
    page: Any, dashboard: Dashboard, media: SeededMedia
) -> None:
    """``mlflow.log_image(image, key="val/pred", step=s)`` stores
    ``images/val~pred+step+<s>+timestamp+<ms>+<uuid>.png`` and a ``+compressed.webp``
    thumbnail (tests/web/test_mlflow_images_and_order.py logs them with the real client):
    the Media tab shows the key with a step slider over those steps."""
    from tracker.store.artifacts import put_artifact

    run_id = dashboard.seeded.runs["sgd-lr1e-2"]  # no media of its own
    steps = [0, 3, 7]
    for i, step in enumerate(steps):
        uuid = f"0b0c3f4e-1a2b-4c3d-9e8f-00000000000{i}"
        stem = f"images/val~pred+step+{step}+timestamp+{1733371200000 + i}+{uuid}"
        put_artifact(dashboard.store, run_id, f"{stem}.png", sample_png(i), media_type="image/png")
        put_artifact(dashboard.store, run_id, f"{stem}+compressed.webp", b"RIFF....WEBP",
                     media_type="image/webp")  # fmt: skip
    page.goto(f"{dashboard.url}/runs/{run_id}#media", timeout=SLOW_LOAD_MS)
    card = image_card(page, "val/pred")
    card.wait_for()
    wait_shown(page, "val/pred", steps[-1], 16 + len(steps) - 1)  # the PNG, not the thumbnail
    assert card.get_attribute("data-steps") == str(len(steps))
    assert card.locator(".media-step").inner_text() == f"step {steps[-1]} · 3/3"
    slider = card.locator("input.media-slider")
    slider.focus()
    page.keyboard.press("Home")
    wait_shown(page, "val/pred", steps[0], 16)
