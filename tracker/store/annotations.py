"""A person's annotations on a run: rename, tag and untag, notes, star.

Each change is one transaction that locks the run's row, applies the pure rule of
:mod:`tracker.rules.annotations`, writes the new value and, when something changed, records
a run event of kind ``annotation`` (the audit trail: what changed, and ``by`` whom: the
token or the command line that asked). A change that changes nothing writes nothing.
Soft-deleted runs can be annotated too (a note on why a run was deleted is useful).

The MLflow-compatible API writes the same notes through its tag ``mlflow.note.content``
(:mod:`tracker.store.mlflow`, which reads and writes ``runs.notes``).

Raises: InvalidInput (the rule broken; nothing written), NotFound (no such run),
StoreUnavailable (the database cannot be reached).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa

from tracker.entities import RunInfo
from tracker.errors import NotFound
from tracker.rules.annotations import add_tags, check_name, check_notes, check_tag_keys, remove_tags
from tracker.store import models as m
from tracker.store.engine import write_begin
from tracker.store.runs import get_run
from tracker.store.store import Store

__all__ = ["EVENT_KIND", "rename_run", "set_notes", "set_starred", "tag_run"]

EVENT_KIND = "annotation"
_COLUMNS = (m.RunRow.name, m.RunRow.tags, m.RunRow.notes, m.RunRow.starred)

# (new column values, event message, event data) from the row; None: nothing changes
Change = Callable[[Any], "tuple[dict[str, Any], str, dict[str, Any]] | None"]


def _annotate(store: Store, run_id: int, change: Change, by: str | None) -> RunInfo:
    now = store.now()
    with write_begin(store.engine) as conn:
        row = conn.execute(
            sa.select(*_COLUMNS).where(m.RunRow.id == run_id).with_for_update()
        ).first()
        if row is None:
            raise NotFound(f"run {run_id} does not exist", field="run")
        found = change(row)
        if found is not None:
            values, message, data = found
            conn.execute(sa.update(m.RunRow).where(m.RunRow.id == run_id).values(**values))
            conn.execute(
                sa.insert(m.RunEventRow).values(
                    run_id=run_id, at=now, kind=EVENT_KIND, message=message, data={**data, "by": by}
                )
            )
    return get_run(store, run_id)


def rename_run(store: Store, run_id: int, name: str, *, by: str | None = None) -> RunInfo:
    """Give the run a new name (:func:`tracker.rules.annotations.check_name`)."""
    new = check_name(name)

    def change(row: Any) -> Any:
        if row.name == new:
            return None
        return {"name": new}, f"renamed to {new!r}", {"field": "name", "from": row.name, "to": new}

    return _annotate(store, run_id, change, by)


def tag_run(
    store: Store,
    run_id: int,
    add: Iterable[Any] = (),
    remove: Iterable[Any] = (),
    *,
    by: str | None = None,
) -> RunInfo:
    """Remove the tags named in ``remove`` (by key or whole tag), then add ``add``
    (``key=value`` replaces the tag with that key).

    Raises:
        InvalidInput: a tag or key breaking the tag rule (nothing changes then).
    """
    removing = check_tag_keys(list(remove))
    adding = list(add)
    add_tags([], adding)  # check before the row is locked

    def change(row: Any) -> Any:
        before = list(row.tags or [])
        after = add_tags(remove_tags(before, removing), adding)
        if after == before:
            return None
        added = [t for t in after if t not in before]
        gone = [t for t in before if t not in after]
        parts = [f"+{t}" for t in added] + [f"-{t}" for t in gone]
        data = {"field": "tags", "added": added, "removed": gone}
        return {"tags": after}, "tags " + " ".join(parts), data

    return _annotate(store, run_id, change, by)


def set_notes(store: Store, run_id: int, notes: str | None, *, by: str | None = None) -> RunInfo:
    """Replace the run's notes; None or blank text clears them
    (:func:`tracker.rules.annotations.check_notes`)."""
    new = check_notes(notes)

    def change(row: Any) -> Any:
        if row.notes == new:
            return None
        message = "notes cleared" if new is None else f"notes edited ({len(new):,} characters)"
        return {"notes": new}, message, {"field": "notes", "chars": len(new or "")}

    return _annotate(store, run_id, change, by)


def set_starred(store: Store, run_id: int, starred: bool, *, by: str | None = None) -> RunInfo:
    """Star (``True``) or unstar the run."""
    new = bool(starred)

    def change(row: Any) -> Any:
        if bool(row.starred) == new:
            return None
        return {"starred": new}, "starred" if new else "unstarred", {"field": "starred", "to": new}

    return _annotate(store, run_id, change, by)
