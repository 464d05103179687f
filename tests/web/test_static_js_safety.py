"""The dashboard's own scripts never turn a string into markup or code: run names, metric
keys, artifact names, captions and file contents are inserted as text (``T.h``, text nodes,
``textContent``), so a hostile name cannot run script in the dashboard (SECURITY.md). The
browser tests show it for the hostile names they seed; this covers every script."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "web" / "static"
SCRIPTS = sorted(STATIC.glob("*.js"))  # vendor/ (plotly.js) is not ours
SINKS = re.compile(
    r"\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|\beval\s*\(|new Function\b"
    r"|createContextualFragment|\.srcdoc\b"
)


def test_there_are_scripts_to_check() -> None:
    assert {"common.js", "run.js", "artifacts.js", "media.js"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_html_or_code_from_strings(script: Path) -> None:
    found = [
        f"{script.name}:{n}: {line.strip()}"
        for n, line in enumerate(script.read_text().splitlines(), 1)
        if SINKS.search(line)
    ]
    assert not found, "\n".join(found)
