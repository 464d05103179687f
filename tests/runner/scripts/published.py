"""``publish``: the scripts' files that tests poll are written whole (never half read)."""

from __future__ import annotations

import os
from pathlib import Path


def publish(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` under a temporary name, then rename it into place."""
    part = path.with_name(f".{path.name}.part")
    part.write_text(text)
    os.replace(part, path)
