"""Refresh the README's dashboard tour (docs/screenshots/*.png) from the browser tests'
screenshots.

    pytest -m browser tests/browser          # writes test-artifacts/screenshots/*.png
    python scripts/refresh_tour.py           # copies the tour's images into docs/screenshots

The browser tests save a full-page PNG of every page state they look at, into
``test-artifacts/screenshots/`` or the folder named by ``TRACKER_SCREENSHOTS``; ``--from DIR``
reads another folder. TOUR maps each README image to the screenshot it is made from. With
Pillow installed the images are scaled to at most 1200 px wide and saved with a 256-colour
palette (about a third of the size); without it they are copied as they are.

Exits 1, naming them, when screenshots are missing (run the browser tests first).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "screenshots"
MAX_WIDTH = 1200

# README image -> the browser test's screenshot (tests/browser/*.py: screenshot(page, NAME))
TOUR = {
    "runs.png": "runs-wide",
    "run.png": "run-full-page",
    "run-short.png": "run-short",
    "run-diverged.png": "run-diverged",
    "compare.png": "compare",
    "queue.png": "queue-active",
    "clone-editor.png": "clone-form-float-sweep",
    "run-diagnosed.png": "run-diagnosed",
    "run-diverged-log-y.png": "run-diverged-log-y",
    "run-media.png": "run-media",
    "run-artifacts.png": "run-artifacts",
    "compare-histograms.png": "compare-histograms",
    "login.png": "login",
    "run-amp-collapse.png": "run-amp-collapse",
    "run-healthy.png": "run-healthy",
    "run-code-snapshot.png": "run-code-snapshot",
    "run-dark.png": "run-dark",
    "runs-800px.png": "runs-800px",
    "job-page.png": "job-page",
    "run-annotations.png": "run-annotations",
    "profile-panel.png": "profile-panel",
    "workspace.png": "workspace",
    "workspace-groups.png": "workspace-groups",
    "runs-grouped.png": "runs-grouped",
    "sweep.png": "sweep",
}


def default_source() -> Path:
    return Path(os.environ.get("TRACKER_SCREENSHOTS") or REPO / "test-artifacts" / "screenshots")


def shrink(source: Path, target: Path) -> None:
    """Scale down to MAX_WIDTH and palettize when Pillow is there; else copy."""
    try:
        from PIL import Image
    except ImportError:
        shutil.copyfile(source, target)
        return
    with Image.open(source) as image:
        image = image.convert("RGB")
        if image.width > MAX_WIDTH:
            height = round(image.height * MAX_WIDTH / image.width)
            image = image.resize((MAX_WIDTH, height), Image.Resampling.LANCZOS)
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=default_source(),
                        help="folder of the browser tests' screenshots")  # fmt: skip
    args = parser.parse_args(argv)
    missing = [name for name in TOUR.values() if not (args.source / f"{name}.png").is_file()]
    if missing:
        print(f"missing in {args.source}: {', '.join(missing)} (run the browser tests first: "
              "pytest -m browser tests/browser)", file=sys.stderr)  # fmt: skip
        return 1
    DOCS.mkdir(parents=True, exist_ok=True)
    for image, name in TOUR.items():
        shrink(args.source / f"{name}.png", DOCS / image)
        print(f"{DOCS.relative_to(REPO) / image} <- {name}.png "
              f"({(DOCS / image).stat().st_size // 1024} KiB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
