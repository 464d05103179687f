"""torch's recompile reasons in the doctor: the pure part (``tracker.rules.recompile_reasons``
and the ``recompiles`` detector given the frames ``tracker.watch`` saw reach the limit).
The reason texts are torch 2.x's own wording of guard failures."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.rules.health import diagnose, recompiles
from tracker.rules.recompile_reasons import (
    MAX_REASON_CHARS,
    RecompileFact,
    advice,
    clean_reason,
    fact_from_event,
)

SIZE = "0/7: tensor 'x' size mismatch at index 0. expected 8, actual 9"


def _fact(step: int = 70, compiles: int = 8, limit: int = 8, reason: str = SIZE,
          function: str = "forward", file: str = "train.py",
          line: int = 12) -> RecompileFact:  # fmt: skip
    return RecompileFact(step, function, file, line, compiles, limit, clean_reason(reason))


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (SIZE, "tensor 'x' size mismatch at index 0. expected 8, actual 9"),
        ("tensor 'x' dtype mismatch. expected Float, actual Half", None),  # no prefix: as is
        (
            "1/0: k == 0                                # return x * k  # f.py:18 in g\n"
            'User stack trace:\n  File "f.py", line 18, in g\n    return x * k',
            "k == 0",
        ),
        ("2/3: len(x) == 3; x[0] == 1", "len(x) == 3"),
        ("", ""),
    ],
)
def test_clean_reason_keeps_the_first_guard_failure(raw: str, clean: str | None) -> None:
    assert clean_reason(raw) == (raw if clean is None else clean)


def test_clean_reason_cuts_a_long_reason() -> None:
    cleaned = clean_reason("0/1: " + "x" * 1000)
    assert len(cleaned) == MAX_REASON_CHARS and cleaned.endswith("…")


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("tensor 'x' size mismatch at index 0. expected 8, actual 9", "mark_dynamic"),
        ("tensor 'x' stride mismatch at index 0. expected 4, actual 1", "mark_dynamic"),
        ("tensor 'x' dtype mismatch. expected Float, actual Half", "dtype"),
        ("___check_obj_id(self, 140234)", "build it once"),
        ("k == 0", "as a tensor"),
        ("something torch says one day", "mark it dynamic"),
    ],
)
def test_advice_follows_the_guard(reason: str, words: str) -> None:
    assert words in advice(reason)


@pytest.mark.parametrize(
    "data",
    [
        None,
        "text",
        {},
        {"step": 3, "function": "f", "compiles": 8},  # no limit
        {"step": "x", "function": "f", "compiles": 8, "limit": 8},
        {"step": -1, "function": "f", "compiles": 8, "limit": 8},
        {"step": 3, "function": "f", "compiles": 8, "limit": 0},
    ],
)
def test_a_malformed_event_is_no_fact(data: Any) -> None:
    assert fact_from_event(data) is None


def test_an_event_round_trips() -> None:
    fact = _fact()
    assert fact_from_event(fact.as_event_data()) == fact
    assert fact_from_event({**fact.as_event_data(), "file": None, "line": None}) == RecompileFact(
        70, "forward", "?", 0, 8, 8, fact.reason
    )


def test_the_frame_at_the_limit_gives_the_onset_and_the_hint() -> None:
    # the count logged every 50 steps would say step 100; torch's account says step 70
    points = [(s, float(min(s // 10, 11))) for s in range(0, 200, 50)]
    d = recompiles(points, frames=[_fact()])
    assert d is not None and d.step == 70 and d.metric == "compile/recompiles"
    assert "forward (train.py:12) 8 times by step 70" in d.message
    assert "recompile limit (8)" in d.message
    assert "size mismatch at index 0. expected 8, actual 9" in d.hint
    assert "forward (train.py:12)" in d.hint and "mark_dynamic" in d.hint
    assert d.evidence is not None and d.evidence.numbers["compiles"] == 8.0


def test_the_first_frame_at_the_limit_is_named_and_the_others_counted() -> None:
    later = _fact(step=90, function="loss_fn", line=40)
    d = recompiles((), frames=[later, _fact(step=70), _fact(step=80, compiles=5)])
    assert d is not None and d.step == 70 and "forward" in d.message
    assert "(1 other frame(s) too)" in d.message


def test_a_frame_below_its_limit_decides_nothing() -> None:
    # compiled 8 times under a raised limit of 16: the count alone speaks (7 recompiles)
    below = _fact(limit=16)
    assert recompiles((), frames=[below]) is None
    d = recompiles([(s, float(s)) for s in range(10)], frames=[below])
    assert d is not None and d.step == 7 and "TORCH_LOGS=recompiles" in d.hint


def test_torchs_wrapper_frame_is_said_to_be_one() -> None:
    wrapper = _fact(function="inner", file="/venv/site-packages/torch/_dynamo/external_utils.py")
    assert wrapper.frame == (
        "inner (/venv/site-packages/torch/_dynamo/external_utils.py:12; torch's wrapper around "
        "the compiled module's forward)"
    )
    assert _fact(file="C:\\venv\\torch\\_dynamo\\external_utils.py").frame.endswith("forward)")
    assert _fact(line=0).frame == "forward"


def test_a_frame_without_a_reason_still_names_the_frame() -> None:
    d = recompiles((), frames=[_fact(reason="")])
    assert d is not None and "forward (train.py:12)" in d.hint and "guard failure" not in d.hint


def test_diagnose_uses_the_frames_with_or_without_the_series() -> None:
    series = {"loss": [(s, 1.0 / (s + 1)) for s in range(100)]}
    [d] = diagnose(series, final=True, recompiled=[_fact()])
    assert (d.code, d.step, d.metric) == ("recompiles", 70, "compile/recompiles")
    with_count = {**series, "compile/recompiles": [(s, float(min(s // 10, 8))) for s in range(100)]}
    [d] = diagnose(with_count, final=True, recompiled=[_fact()])
    assert (d.code, d.step) == ("recompiles", 70)
    assert diagnose(series, final=True, recompiled=[]) == []


def test_many_frames_recompiling_a_little_are_not_one_at_the_limit() -> None:
    """watch() logs the most recompiles of any one frame beside the total: 4 frames that
    recompile twice each (8 in all) are healthy; one frame at 7 is at the limit."""
    steps = range(100)
    total = [(s, float(min(s // 10, 8))) for s in steps]
    spread = {
        "compile/recompiles": total,
        "compile/frame_recompiles_max": [(s, float(min(s // 40, 2))) for s in steps],
    }
    assert diagnose(spread, final=True) == []
    one = {
        "compile/recompiles": total,
        "compile/frame_recompiles_max": [(s, float(min(s // 10, 8))) for s in steps],
    }
    [d] = diagnose(one, final=True)
    assert (d.code, d.step, d.metric) == ("recompiles", 70, "compile/frame_recompiles_max")
    # a run logged without the per-frame series: the total decides, as before
    [d] = diagnose({"compile/recompiles": total}, final=True)
    assert (d.code, d.step) == ("recompiles", 70)
