"""Which of the doctor's diagnoses fail a job that exited 0: the job's ``fail_on`` policy.
Pure: text and diagnoses in, values out.

A policy is text, as ``tracker submit --fail-on`` takes it and the store keeps it (always in
the canonical form ``parse_fail_on`` returns):

- ``errors`` (the default): every diagnosis of severity ``error`` about the training (a
  non-finite loss, a divergence, a collapsed AMP scale, exploding gradients, memory that
  grew by 1 GiB or more) -- not a corrupt checkpoint (``checkpoint_corrupt`` says nothing
  about the model trained: a resume skipped the damaged file and went on from a verified
  one; list the kind to fail on it too);
- a comma list of diagnosis kinds (``tracker.rules.health.CODES``): those, whatever their
  severity; ``errors`` may be one of the items (``errors,memory_growth``: every error and
  any memory growth). A list replaces the default: ``--fail-on divergence`` lets a NaN
  loss end ``succeeded`` unless ``nonfinite`` or ``errors`` is listed too;
- ``none``: no diagnosis fails the job (an exit 0 is a success, as before policies).

``failing`` picks the diagnosis that fails the job: a non-finite loss first (the loss
ended as NaN/Inf: the class ``nonfinite_loss`` jobs always had), else the matching
diagnosis with the earliest onset. ``failure_for`` turns it into the job's ``Failure``: the
class is the diagnosis kind (``divergence``, ``memory_growth``, ...; ``nonfinite_loss`` for
a non-finite loss), the hint its message and what to try.

Failure modes: ``FailOnError`` (an ``InvalidInput``, code ``invalid_fail_on``) for a
policy that is not text, is empty, names an unknown kind, or mixes ``none`` with kinds; its
message starts with the name the caller passes (``--fail-on`` for the CLI, ``fail_on`` for
the API) and names the unknown kind and the known ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from tracker.errors import InvalidInput
from tracker.rules.failure import NONFINITE_LOSS, Failure
from tracker.rules.health import CODES, NONFINITE, Diagnosis, is_loss_key

__all__ = [
    "DEFAULT",
    "ERRORS",
    "NONE",
    "FailOnError",
    "failing",
    "failure_class",
    "failure_for",
    "parse_fail_on",
]

ERRORS = "errors"
NONE = "none"
DEFAULT = ERRORS
_ORDER = (ERRORS, *CODES)  # the canonical order of a list's items


class FailOnError(InvalidInput):
    """A ``fail_on`` policy that breaks the rule (see the module docstring)."""

    code = "invalid_fail_on"


def _known() -> str:
    return f"{ERRORS}, {NONE}, or a comma list of: {', '.join(CODES)}"


def parse_fail_on(text: object, *, name: str = "fail_on") -> str:
    """The canonical form of a policy: ``none``, or its items without repeats, lower case,
    ``errors`` first and then the kinds in ``CODES`` order (``"Divergence, errors"`` ->
    ``"errors,divergence"``). ``name`` starts the error message (``--fail-on``).

    Raises:
        FailOnError: not text, empty, an unknown kind, or ``none`` with other items.
    """
    if not isinstance(text, str):
        raise FailOnError(f"{name} {text!r}: must be text ({_known()})", field="fail_on")
    items = {item.strip().lower() for item in text.split(",")}
    if items <= {""}:
        raise FailOnError(
            f"{name} is empty: give {_known()} (none: no diagnosis fails the job)",
            field="fail_on",
        )
    if "" in items:
        raise FailOnError(f"{name} {text!r}: an empty item in the comma list", field="fail_on")
    if NONE in items:
        if len(items) > 1:
            raise FailOnError(
                f"{name} {text!r}: {NONE} cannot be combined with other kinds", field="fail_on"
            )
        return NONE
    unknown = sorted(items.difference(_ORDER))
    if unknown:
        close = difflib.get_close_matches(unknown[0], _ORDER, n=1)
        guess = f" (did you mean {close[0]}?)" if close else ""
        raise FailOnError(
            f"{name} {text!r}: unknown diagnosis kind {unknown[0]!r}{guess}; use {_known()}",
            field="fail_on",
        )
    return ",".join(item for item in _ORDER if item in items)


# Errors that say nothing about the training itself: ``errors`` leaves them out.
NOT_TRAINING = frozenset({"checkpoint_corrupt"})


def _matches(d: Diagnosis, items: frozenset[str]) -> bool:
    if d.code in items:
        return True
    return ERRORS in items and d.severity == "error" and d.code not in NOT_TRAINING


def _nonfinite_loss(d: Diagnosis) -> bool:
    return d.code == NONFINITE and d.metric is not None and is_loss_key(d.metric)


def failing(diagnoses: Sequence[Diagnosis], policy: str) -> Diagnosis | None:
    """The diagnosis that fails a job under ``policy`` (canonical, see ``parse_fail_on``):
    a non-finite loss first, else the earliest onset among those the policy names; None
    when none matches (the job succeeded)."""
    items = frozenset(policy.split(",")) - {NONE}
    matching = [d for d in diagnoses if _matches(d, items)]
    first_loss = next((d for d in matching if _nonfinite_loss(d)), None)
    if first_loss is not None:
        return first_loss
    return min(matching, key=lambda d: (d.step or 0, d.code), default=None)


def failure_class(d: Diagnosis) -> str:
    """The failure class a diagnosis gives a job: its kind, but ``nonfinite_loss`` for a
    non-finite loss (the class such jobs always had)."""
    return NONFINITE_LOSS if _nonfinite_loss(d) else d.code


def failure_for(d: Diagnosis, policy: str) -> Failure:
    """The job's failure for a diagnosis that fails it under ``policy``: its class, and as
    hint what the doctor saw, what to try and the policy that made it a failure."""
    return Failure(failure_class(d), f"{d.message} {d.hint} (--fail-on {policy})")
