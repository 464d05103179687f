"""JSON API ``/api/v1/sweeps``: sweeps that learn (Optuna through the queue). Documented in
``web/API.md`` (Sweeps).

* ``GET /sweeps?project=&status=&limit=``: sweeps newest first, each with its trial counts
  by state and its best trial.
* ``GET /sweeps/<id>``: the sweep, its trials, each param's importance and every trial's
  learning curve of the sweep's metric (:func:`tracker.store.sweep_views.detail`).
* ``POST /sweeps`` (admin): a sweep whose trials copy a submitted job or run, as a clone
  does, or run the job spec it gives under ``job`` (as ``POST /jobs`` takes one, with its
  ``snapshot_id``: ``tracker sweep --method ... --uri http://...``)
  (:mod:`tracker.web.core.sweep_body`); 201 and the sweep.
* ``POST /sweeps/<id>/stop`` ``{"kill": false}`` and ``POST /sweeps/<id>/resume``
  ``{"trials": n}`` (optional: a larger budget) (admin).

A sweep shows its spec with ``env_keys`` (names only), never env values. Errors: 400 naming
the field, 403 for a ``log`` token asking for a change, 404 (no such sweep, job or run), 409
(resuming a running sweep; a run no job ran), 503 when the store cannot be reached.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import Blueprint, request

from tracker.entities import SweepInfo, TrialInfo
from tracker.rules.secrets import env_keys_only
from tracker.store import sweep_views
from tracker.store import sweeps as store_sweeps
from tracker.web.core.fields import body_field
from tracker.web.core.sweep_body import sweep_request
from tracker.web.plumbing.context import state
from tracker.web.plumbing.params import int_arg, json_body
from tracker.web.views.runs import series_json

bp = Blueprint("sweeps", __name__, url_prefix="/api/v1")


def trial_json(trial: TrialInfo) -> dict[str, Any]:
    return dataclasses.asdict(trial)


def sweep_json(sweep: SweepInfo) -> dict[str, Any]:
    """A sweep for the API: its spec with ``env_keys`` in place of ``env``; ``done``: the
    trials that ended (complete, pruned or failed)."""
    out = dataclasses.asdict(sweep)
    out["spec"] = env_keys_only(sweep.spec)
    out["done"] = sum(n for state_, n in sweep.counts.items() if state_ != "running")
    return out


@bp.get("/sweeps")
def list_sweeps() -> Any:
    found = store_sweeps.list_sweeps(
        state().store,
        project=request.args.get("project") or None,
        status=request.args.get("status") or None,
        limit=int_arg("limit", 100, 1, 1000),
    )
    return {"sweeps": [sweep_json(s) for s in found]}


@bp.get("/sweeps/<int:sweep_id>")
def sweep(sweep_id: int) -> Any:
    found = sweep_views.detail(state().store, sweep_id)
    return {
        "sweep": sweep_json(found.sweep),
        "trials": [trial_json(t) for t in found.trials],
        "importance": found.importance,
        "importance_note": found.importance_note,
        "curves": [
            {"number": number, **series_json(read)} for number, read in found.curves.items()
        ],
        "curves_left_out": found.curves_left_out,
    }


@bp.post("/sweeps")
def create_sweep() -> Any:
    asked = sweep_request(json_body())
    made = sweep_views.create_from(
        state().store, asked.source, asked.overrides, asked.settings, **asked.edits,
        name=asked.name,
    )  # fmt: skip
    return sweep_json(made), 201


@bp.post("/sweeps/<int:sweep_id>/stop")
def stop_sweep(sweep_id: int) -> Any:
    kill = body_field(json_body(), "kill", bool, default=False)
    return sweep_json(store_sweeps.stop_sweep(state().store, sweep_id, kill=kill))


@bp.post("/sweeps/<int:sweep_id>/resume")
def resume_sweep(sweep_id: int) -> Any:
    trials = body_field(json_body(), "trials", int)  # a new total budget, optional
    return sweep_json(store_sweeps.resume_sweep(state().store, sweep_id, trials=trials))
