"""``tracker doctor RUN``: diagnose a stored run now and print what went wrong, where."""

from __future__ import annotations

import click

from tracker.cli.common import echo_json, json_option, open_store, uri_option
from tracker.store.runs import get_run


@click.command()
@uri_option
@click.argument("run_id", type=int)
@click.option(
    "--verify-checkpoints/--no-verify-checkpoints",
    default=True,
    show_default=True,
    help="Re-hash each checkpoint file against the sha256 recorded at save.",
)
@json_option
def doctor(uri: str | None, run_id: int, verify_checkpoints: bool, as_json: bool) -> None:
    """Diagnose run RUN_ID: non-finite values, loss spikes and divergence, memory growth,
    throughput drops, exploding or vanishing gradients, AMP loss-scale collapse, recompiles
    and corrupt checkpoints -- each with the step it began at and what to try.

    The result is stored with the run (the dashboard's Health panel, `tracker runs show`,
    the search `diagnosis == "CODE"`); running it again updates, never duplicates. A run
    still running is judged on the points so far. A run that failed or crashed is reported
    with how it ended first (its failure class and hint: `nonfinite_loss`, `cuda_oom`,
    `gloo`, ...). Exit status 0 when healthy, 1 when something was diagnosed or the run
    failed or crashed, 2 for an unknown run.
    """
    from tracker.store.diagnoses import diagnose_run

    store = open_store(uri)
    run = get_run(store, run_id)
    found = diagnose_run(store, run_id, verify_checkpoints=verify_checkpoints)
    ended_badly = run.status in ("failed", "crashed")
    if as_json:
        echo_json({
            "run_id": run_id,
            "status": run.status,
            "failure_class": run.failure_class if ended_badly else None,
            "failure_hint": run.failure_hint if ended_badly else None,
            "diagnoses": [d.as_dict() for d in found],
        })  # fmt: skip
    else:
        if ended_badly:
            how = f" ({run.failure_class})" if run.failure_class else ""
            click.echo(f"run {run_id} {run.status}{how}")
            if run.failure_hint:
                click.echo(f"  {run.failure_hint}")
        if not found:
            tail = " in its series" if ended_badly else ""
            click.echo(f"run {run_id}: no problems found{tail}")
        else:
            click.echo(f"run {run_id}: {len(found)} problem(s)")
        for d in found:
            where = f"step {d.step}" if d.step is not None else "-"
            click.echo(
                f"\n[{d.severity}] {d.code} at {where}" + (f" ({d.metric})" if d.metric else "")
            )
            click.echo(f"  {d.message}")
            click.echo(f"  try: {d.hint}")
    if found or ended_badly:
        raise SystemExit(1)
