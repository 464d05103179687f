"""The SQL store shared by the client, the runner and the dashboard: the only door to the data.

``Store(url)`` opens it; the modules beside it (``run_search``, ``series``, ``run_reads``,
``jobs``, ``queue``, ``workers``, ``schedules``, ``logs``, ``mlflow``) are functions over a
``Store``. ORM rows never leave this package; callers get the frozen dataclasses of
:mod:`tracker.entities`. ARCHITECTURE.md maps every concept to its module.
"""

from __future__ import annotations

from tracker.store.engine import resolve_uri, schema_head
from tracker.store.store import Store

__all__ = ["Store", "resolve_uri", "schema_head"]
