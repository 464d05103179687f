"""The README's dashboard tour shows what the browser tests saw: every image it links is in
docs/screenshots, is made (scripts/refresh_tour.py) from a screenshot a browser test takes,
and stays small."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from refresh_tour import TOUR  # noqa: E402

MAX_BYTES = 300 * 1024


def test_every_tour_image_comes_from_a_browser_test_screenshot() -> None:
    readme = (REPO / "README.md").read_text()
    linked = set(re.findall(r"\(docs/screenshots/([\w.-]+\.png)\)", readme))
    assert linked == set(TOUR), linked ^ set(TOUR)
    taken = set()
    for source in (REPO / "tests" / "browser").glob("test_*.py"):
        taken.update(re.findall(r'screenshot\(page, "([\w-]+)"\)', source.read_text()))
    assert set(TOUR.values()) <= taken, set(TOUR.values()) - taken
    for image in linked:
        path = REPO / "docs" / "screenshots" / image
        assert path.is_file(), image
        assert path.stat().st_size <= MAX_BYTES, (image, path.stat().st_size)
