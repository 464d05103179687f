"""What the views share, built once per app by ``create_app``: no module-global state."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from flask import current_app

from tracker.store import Store
from tracker.web.core.ingest import MetricIngest
from tracker.web.core.log_ingest import LogIngest

__all__ = ["AppState", "state"]


@dataclass
class AppState:
    store: Store
    ingest: MetricIngest
    checkpoint_roots: list[Path] = field(default_factory=list)
    file_roots: dict[str, list[Path]] = field(default_factory=dict)
    log_ingest: LogIngest = field(init=False)

    def __post_init__(self) -> None:
        self.log_ingest = LogIngest(self.store)


def state() -> AppState:
    """The current app's state (``create_app`` puts it in ``app.extensions["tracker"]``)."""
    return current_app.extensions["tracker"]
