"""How a job ended, the same for every executor (the local worker and a cluster dispatcher).

An executor knows what only it can see (the exit code, the signal, its own flags: timed out,
cancelled, host memory pressure) and hands that here; this module adds what the store knows:

- the peak GPU memory the job's run reported (``classify`` reads a CUDA OOM by it);
- the doctor's final pass: a job that exited 0 has failed when a diagnosis its ``fail_on``
  policy names holds (``tracker.rules.fail_on``; by default every error-severity one: a
  loss that went NaN/Inf for good, ``nonfinite_loss``, a divergence, a collapsed AMP
  scale...), with the diagnosis kind as failure class. Before this module the Slurm
  dispatcher had no such pass and recorded a NaN-loss job as succeeded while the local
  worker failed it; before job policies, only a non-finite loss failed a job that exited 0;
- the record of the end, which reports a store outage instead of raising, so that the
  executor keeps the outcome and writes it on a later tick (its lease keeps being renewed,
  so the job stays its own meanwhile).

Failure modes: a store outage while reading (peak memory, the doctor) leaves that evidence
out, logged, and the verdict is made on what the executor saw.
"""

from __future__ import annotations

import logging

from tracker.entities import ClaimedJob, Failure, job_status_for
from tracker.errors import StoreUnavailable
from tracker.rules.fail_on import failing, failure_for
from tracker.rules.failure import classify
from tracker.store import Store, diagnoses, queue
from tracker.store.metrics import last_metrics

log = logging.getLogger(__name__)


def peak_gpu_bytes(store: Store, run_id: int) -> int | None:
    """The largest ``*peak_allocated_bytes`` the run last reported; None when it reported
    none or the store is unavailable."""
    try:
        last = last_metrics(store, [run_id]).get(run_id, {})
    except StoreUnavailable:
        return None
    peaks = [v for k, v in last.items() if k.endswith("peak_allocated_bytes") and v == v]
    return int(max(peaks)) if peaks else None


def doctor_failure(store: Store, claim: ClaimedJob) -> Failure | None:
    """The doctor's final pass over the job's run (its diagnoses are recorded whatever the
    policy): the failure of the diagnosis the job's ``fail_on`` policy fails it for (a
    non-finite loss first, else the earliest onset; ``tracker.rules.fail_on.failing``), else
    None (also when the store is unavailable, logged)."""
    try:
        found = diagnoses.diagnose_run(store, claim.run_id, final=True)
    except StoreUnavailable as exc:
        log.warning("job %s: doctor could not read the run: %s", claim.job.id, exc.message)
        return None
    failed = failing(found, claim.job.fail_on)
    return None if failed is None else failure_for(failed, claim.job.fail_on)


def judge(
    store: Store,
    claim: ClaimedJob,
    exit_code: int | None,
    signal: int | None,
    tail: str,
    *,
    host_oom_suspected: bool = False,
    timed_out: bool = False,
    cancelled: bool = False,
) -> Failure | None:
    """The failure class of an ended attempt from what the executor saw (``tail``: stdout
    then stderr, so a traceback wins) and what the store knows; None when it succeeded."""
    failed = exit_code not in (0, None) or signal is not None or timed_out or cancelled
    peak = peak_gpu_bytes(store, claim.run_id) if failed else None
    found = classify(
        exit_code,
        signal,
        tail,
        peak_gpu_bytes=peak,
        host_oom_suspected=host_oom_suspected,
        timed_out=timed_out,
        cancelled=cancelled,
    )
    return final(store, claim, found)


def final(store: Store, claim: ClaimedJob, found: Failure | None) -> Failure | None:
    """``found`` (the executor's own reading) or, when it found nothing, the doctor's."""
    return found or doctor_failure(store, claim)


def record(
    store: Store,
    claim: ClaimedJob,
    exit_code: int | None,
    failure: Failure | None,
    retry: queue.RetryRule | None,
    *,
    took_s: float | None = None,
) -> bool:
    """Write how the attempt ended (and queue a retry when the policy says so). False when
    the store is unavailable: nothing was written, call again later. True once written, or
    when the lease was lost (another holder owns the job; nothing is written, logged)."""
    job = claim.job
    try:
        result = queue.finish(store, claim, exit_code=exit_code, failure=failure, retry=retry)
    except StoreUnavailable as exc:
        log.warning("job %s: end not recorded yet, store unavailable: %s", job.id, exc.message)
        return False
    if result is None:
        log.error("job %s: lease lost before the end was recorded; nothing written", job.id)
        return True
    how = f" ({failure.cls}: {failure.hint})" if failure else ""
    again = ", retry queued" if result.retry_at else ""
    status = job_status_for(failure.cls if failure else None)
    took = f", {took_s:.1f} s" if took_s is not None else ""
    log.info(f"job {job.id} attempt {claim.attempt} {status}{again}: exit {exit_code}{took}{how}")
    return True
