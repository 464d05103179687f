"""Run tags: the one rule for what a tag is, and the ``key=value`` form (pure, no I/O).

A tag is a non-empty ``str`` of at most :data:`MAX_TAG_LENGTH` characters, matched exactly
(``tracker runs ls --tag``, ``/api/v1/runs?tag=``, ``tags contains`` in the query language).
``tracker.init(tags=...)``, ``POST /api/v1/runs`` and job specs check tags with
:func:`check_tags`.

A tag may carry a value as ``key=value`` (split at the first ``=``): the MLflow-compatible API
stores an MLflow tag ``{key, value}`` that way (:func:`join_tag`), reads it back with
:func:`split_tag`, and replaces a tag by its key (:func:`tag_key`). MLflow's own limits apply
to those (key 250, value 8000 characters), so an MLflow ``key=value`` tag may be longer than
a tag given to ``tracker.init``.

Failure mode: :class:`~tracker.errors.InvalidInput` (HTTP 400) naming the tag and the rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracker.errors import InvalidInput

__all__ = ["MAX_TAG_LENGTH", "check_tags", "join_tag", "split_tag", "tag_key"]

MAX_TAG_LENGTH = 100


def check_tags(tags: Iterable[Any] | str, *, field: str = "tags") -> list[str]:
    """The tags as a list, after checking each one; a single ``str`` is one tag.

    Raises:
        InvalidInput: a tag that is not a non-empty str of at most 100 characters.
    """
    if isinstance(tags, str):
        tags = [tags]
    out = []
    for tag in tags:
        if not isinstance(tag, str) or not tag or len(tag) > MAX_TAG_LENGTH:
            raise InvalidInput(
                f"tag {tag!r:.120}: tags are non-empty strings of at most "
                f"{MAX_TAG_LENGTH} characters",
                field=field,
            )
        out.append(tag)
    return out


def join_tag(key: str, value: str) -> str:
    """``key=value``: a tag carrying a value (the key must not contain ``=``)."""
    return f"{key}={value}"


def split_tag(tag: str) -> tuple[str, str]:
    """``(key, value)`` of a tag, split at the first ``=``; a plain tag has the value ``""``."""
    key, _, value = tag.partition("=")
    return key, value


def tag_key(tag: str) -> str:
    """The key of a ``key=value`` tag (the whole tag when it has no ``=``)."""
    return tag.split("=", 1)[0]
