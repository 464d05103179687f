"""What a person writes on a run: its name, tags, notes and star (pure, no I/O).

The rules every door checks (the dashboard, ``/api/v1/runs/<id>/...``, ``tracker runs tag``
and friends, the MLflow-compatible API for notes); :mod:`tracker.store.annotations` applies
them to a stored run.

* name: 1 to :data:`MAX_NAME_LENGTH` characters after stripping surrounding spaces, on one
  line (no control characters).
* tags: what :func:`tracker.rules.tags.check_tags` allows (non-empty, at most 100
  characters). A tag ``key=value`` replaces the run's tag with the same key
  (:func:`add_tags`), as MLflow's ``set_tag`` does; removing a key removes that tag whatever
  its value (:func:`remove_tags`). A key is not empty and does not start with ``mlflow.``:
  those are MLflow's own tags (its note is the run's notes, ``mlflow.runName`` its name).
* notes: any text up to :data:`MAX_NOTES_LENGTH` characters; empty (or only spaces) clears
  them. MLflow's tag ``mlflow.note.content`` is the same text (:data:`NOTE_TAG`).

Failure mode: :class:`~tracker.errors.InvalidInput` (HTTP 400) naming the field and the rule;
nothing is changed then.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from tracker.errors import InvalidInput
from tracker.rules.tags import check_tags, tag_key

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_NOTES_LENGTH",
    "NOTE_TAG",
    "add_tags",
    "check_name",
    "check_notes",
    "check_tag_keys",
    "remove_tags",
]

MAX_NAME_LENGTH = 250  # runs.name
MAX_NOTES_LENGTH = 65_536
NOTE_TAG = "mlflow.note.content"  # MLflow's tag for a run's description
_RESERVED_PREFIX = "mlflow."


def check_name(name: Any) -> str:
    """The run name to store: stripped of surrounding spaces.

    Raises:
        InvalidInput: not a str, empty, longer than 250 characters, or holding a line break
            or another control character.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"name must be a string, not {type(name).__name__}", field="name")
    name = name.strip()
    if not name:
        raise InvalidInput("name is empty: a run name has 1-250 characters", field="name")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(
            f"name has {len(name)} characters; a run name has at most {MAX_NAME_LENGTH}",
            field="name",
        )
    bad = next((c for c in name if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise InvalidInput(
            f"name holds the control character {bad!r}: a run name is one line of text",
            field="name",
        )
    return name


def check_notes(notes: Any) -> str | None:
    """The notes to store: None (cleared) for None or blank text, else the text as given.

    Raises:
        InvalidInput: not a str (or null), or longer than 65,536 characters.
    """
    if notes is None:
        return None
    if not isinstance(notes, str):
        raise InvalidInput(
            f"notes must be a string (or null to clear them), not {type(notes).__name__}",
            field="notes",
        )
    if len(notes) > MAX_NOTES_LENGTH:
        raise InvalidInput(
            f"notes have {len(notes):,} characters; at most {MAX_NOTES_LENGTH:,} are kept "
            "(attach longer text as an artifact)",
            field="notes",
        )
    return notes if notes.strip() else None


def _check_key(key: str, field: str) -> None:
    if not key:
        raise InvalidInput(f"tag {key!r}: the key before '=' is empty", field=field)
    if key.startswith(_RESERVED_PREFIX):
        raise InvalidInput(
            f"tag key {key!r:.120}: keys starting with 'mlflow.' are MLflow's own tags "
            "(its note is the run's notes, mlflow.runName its name)",
            field=field,
        )


def check_tag_keys(keys: Iterable[Any], *, field: str = "remove") -> list[str]:
    """Tag keys (or whole tags) to remove, checked like tags.

    Raises:
        InvalidInput: a key that is not a non-empty str of at most 100 characters.
    """
    return check_tags(keys, field=field)


def add_tags(current: Sequence[str], new: Iterable[Any], *, field: str = "add") -> list[str]:
    """``current`` with ``new`` tags added, in order; a ``key=value`` tag replaces the tag
    with the same key where it stood, a tag already there stays once.

    Raises:
        InvalidInput: a tag breaking the tag rule or with a reserved or empty key.
    """
    out = list(current)
    for tag in check_tags(new, field=field):
        key = tag_key(tag)
        _check_key(key, field)
        at = next((i for i, t in enumerate(out) if tag_key(t) == key), None)
        if at is None:
            out.append(tag)
        else:
            out[at] = tag
    return out


def remove_tags(current: Sequence[str], keys: Iterable[str]) -> list[str]:
    """``current`` without the tags named: by key (``lr`` removes ``lr=0.1``) or whole tag
    (``lr=0.1`` removes only that tag). Naming a tag the run does not have changes nothing."""
    wanted = set(keys)
    return [t for t in current if t not in wanted and tag_key(t) not in wanted]
