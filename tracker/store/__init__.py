"""The SQL store shared by the client, the runner and the dashboard."""

from __future__ import annotations

from tracker.entities import CheckpointInfo, MetricPoint, RunEventInfo, RunInfo
from tracker.store.engine import SCHEMA_HEAD, ensure_schema, resolve_uri, upgrade, write_begin
from tracker.store.store import Store

__all__ = [
    "SCHEMA_HEAD",
    "CheckpointInfo",
    "MetricPoint",
    "RunEventInfo",
    "RunInfo",
    "Store",
    "ensure_schema",
    "resolve_uri",
    "upgrade",
    "write_begin",
]
