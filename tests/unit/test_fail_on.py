"""A job's ``fail_on`` policy (``tracker.rules.fail_on``): the parser's table and properties,
and which diagnosis fails a job that exited 0 under each policy."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.errors import InvalidInput
from tracker.rules.fail_on import FailOnError, failing, failure_class, failure_for, parse_fail_on
from tracker.rules.health import CODES, Diagnosis, Evidence


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("errors", "errors"),
        ("none", "none"),
        (" NONE ", "none"),
        ("divergence", "divergence"),
        ("Divergence, errors", "errors,divergence"),
        ("memory_growth,divergence,memory_growth", "divergence,memory_growth"),
        ("checkpoint_corrupt,nonfinite", "nonfinite,checkpoint_corrupt"),  # CODES order
    ],
)
def test_a_policy_is_kept_in_one_canonical_form(text: str, canonical: str) -> None:
    assert parse_fail_on(text) == canonical


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("divergense", "--fail-on 'divergense': unknown diagnosis kind 'divergense' "
                       "(did you mean divergence?); use errors, none, or a comma list of: "
                       "nonfinite, loss_spike, divergence, memory_growth"),
        ("errors,leak", "unknown diagnosis kind 'leak'"),
        ("", "--fail-on is empty: give errors, none"),
        (" , ", "--fail-on is empty"),
        ("divergence,,errors", "an empty item in the comma list"),
        ("none,divergence", "none cannot be combined with other kinds"),
        (None, "--fail-on None: must be text"),
        (["errors"], "must be text"),
    ],
)  # fmt: skip
def test_a_bad_policy_is_refused_naming_the_flag_and_the_kind(text: object, says: str) -> None:
    with pytest.raises(FailOnError) as info:
        parse_fail_on(text, name="--fail-on")
    assert says in info.value.message
    assert isinstance(info.value, InvalidInput)
    assert (info.value.code, info.value.field) == ("invalid_fail_on", "fail_on")


ITEMS = st.sampled_from(["errors", *CODES])


@given(st.lists(ITEMS, min_size=1, max_size=12), st.randoms())
def test_order_case_spaces_and_repeats_do_not_change_a_policy(
    items: list[str], rnd: random.Random
) -> None:
    canonical = parse_fail_on(",".join(items))
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert parse_fail_on(" , ".join(i.upper() for i in shuffled)) == canonical
    assert parse_fail_on(canonical) == canonical  # idempotent: what the store keeps reads back
    assert set(canonical.split(",")) == set(items)


@given(st.text(max_size=60))
def test_any_text_is_a_canonical_policy_or_a_clear_refusal(text: str) -> None:
    try:
        canonical = parse_fail_on(text)
    except FailOnError as exc:
        assert exc.message.startswith("fail_on") and exc.field == "fail_on"
        return
    assert canonical == "none" or set(canonical.split(",")) <= {"errors", *CODES}
    assert parse_fail_on(canonical) == canonical


def _d(code: str, severity: str, step: int, metric: str = "loss") -> Diagnosis:
    evidence = Evidence(metric, (0, 1))
    return Diagnosis(code, severity, step, f"{code} of {metric}", "try this", evidence)


SPIKE = _d("loss_spike", "warning", 10)
DIVERGED = _d("divergence", "error", 30)
NAN_LOSS = _d("nonfinite", "error", 80)
NAN_GRAD = _d("nonfinite", "warning", 5, "grad/global_norm")
LEAK = _d("memory_growth", "warning", 2, "sys/rss_bytes")
BIG_LEAK = _d("memory_growth", "error", 2, "sys/rss_bytes")
AMP = _d("amp_scale_collapse", "error", 50, "amp/loss_scale")
TORN = _d("checkpoint_corrupt", "error", 40, "checkpoints")
FOUND = [LEAK, NAN_GRAD, SPIKE, DIVERGED, AMP, NAN_LOSS]  # by onset, as diagnose returns


@pytest.mark.parametrize(
    ("diagnoses", "policy", "fails_for"),
    [
        ([], "errors", None),
        ([SPIKE, LEAK, NAN_GRAD], "errors", None),  # warnings only: the job succeeded
        ([SPIKE, DIVERGED], "errors", DIVERGED),
        ([LEAK, SPIKE, DIVERGED, AMP], "errors", DIVERGED),  # the earliest onset that matches
        (FOUND, "errors", NAN_LOSS),  # a non-finite loss first, whatever its onset
        ([BIG_LEAK, SPIKE], "errors", BIG_LEAK),  # memory growth of 1 GiB or more is an error
        (FOUND, "none", None),
        ([SPIKE, LEAK], "memory_growth", LEAK),  # a listed kind fails whatever its severity
        ([LEAK, DIVERGED], "divergence", DIVERGED),
        (FOUND, "amp_scale_collapse", AMP),  # a list replaces the default
        ([NAN_GRAD, SPIKE], "nonfinite", NAN_GRAD),
        ([SPIKE, LEAK, DIVERGED], "errors,memory_growth", LEAK),
        # a torn checkpoint a resume skipped says nothing about the model: only when listed
        ([TORN, SPIKE], "errors", None),
        ([TORN, DIVERGED], "errors", DIVERGED),
        ([TORN, SPIKE], "errors,checkpoint_corrupt", TORN),
    ],
)
def test_which_diagnosis_fails_the_job(
    diagnoses: list[Diagnosis], policy: str, fails_for: Diagnosis | None
) -> None:
    assert failing(diagnoses, policy) is fails_for


@pytest.mark.parametrize(
    ("diagnosis", "cls"),
    [
        (NAN_LOSS, "nonfinite_loss"),  # the class such jobs always had
        (NAN_GRAD, "nonfinite"),
        (DIVERGED, "divergence"),
        (LEAK, "memory_growth"),
        (AMP, "amp_scale_collapse"),
    ],
)
def test_the_failure_class_is_the_diagnosis_kind(diagnosis: Diagnosis, cls: str) -> None:
    assert failure_class(diagnosis) == cls
    failure = failure_for(diagnosis, "errors")
    assert failure.cls == cls
    assert failure.hint == f"{diagnosis.message} try this (--fail-on errors)"
