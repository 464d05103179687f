"""The metric key rule (tracker.rules.keys): a refused key's message names the part of the
rule it breaks, then the whole rule; the rule's text names every part. The oracle here is
written from the rule's words, independently of the code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tracker.errors import InvalidMetricKey
from tracker.rules.keys import KEY_RULE, MAX_KEY_LENGTH, check_key

ALLOWED_PUNCTUATION = "_-./: "

# Each part of the rule, as KEY_RULE states it, and as a message says a key breaks it.
RULE_WORDS = {
    "length": "1-250 characters",
    "characters": "letters (any script), digits, '_ - . / :' and spaces",
    "edges": "not starting or ending with '/'",
    "sequences": "no '//' or '..'",
}


def broken_parts(key: str) -> list[tuple[str, str]]:
    """Every part of the rule ``key`` breaks, in the order the rule states them, each with
    what a message must say about it."""
    parts = []
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        parts.append(("length", "is empty" if not key else f"has {len(key)} characters"))
    bad = [c for c in key if not (c.isalnum() or c in ALLOWED_PUNCTUATION)]
    if bad:
        parts.append(("characters", f"not allowed: {bad[0]!r}"))
    if key.startswith("/"):
        parts.append(("edges", "starts with '/'"))
    if key.endswith("/"):
        parts.append(("edges", "ends with '/'"))
    if "//" in key:
        parts.append(("sequences", "has '//'"))
    if ".." in key:
        parts.append(("sequences", "has '..'"))
    return parts


def test_the_rule_names_every_part() -> None:
    for words in RULE_WORDS.values():
        assert words in KEY_RULE


keys = st.one_of(
    st.text(alphabet=st.sampled_from([*"ab1Zé²_-./: ", "\t", "\n", "$", ",", "\\", "ü"]),
            max_size=12),
    st.text(max_size=8),
    st.text(alphabet="ab/.", min_size=MAX_KEY_LENGTH - 2, max_size=MAX_KEY_LENGTH + 2),
)  # fmt: skip


@given(keys)
@example("")
@example("/loss")
@example("loss/")
@example("a//b")
@example("a..b")
@example("val loss")
@example("val:acc")
@example("x" * 251)
def test_a_refused_key_is_told_which_part_it_breaks(key: str) -> None:
    broken = broken_parts(key)
    if not broken:
        assert check_key(key) == key
        return
    with pytest.raises(InvalidMetricKey) as info:
        check_key(key)
    message = info.value.message
    assert isinstance(info.value, ValueError)
    assert message.startswith(f"metric key {key[:60]!r} ")
    assert message.endswith(f": {KEY_RULE}")
    said = message[: -len(KEY_RULE)]
    # It names the first part broken, as the rule orders them.
    assert broken[0][1] in said, (broken, message)


@pytest.mark.parametrize("key", [5, None, b"loss", ("a",)])
def test_a_key_that_is_no_string_is_told_so(key: Any) -> None:
    with pytest.raises(InvalidMetricKey) as info:
        check_key(key)
    assert f"metric key {key!r} is not a string ({type(key).__name__}): {KEY_RULE}" == (
        info.value.message
    )


def test_the_readme_states_the_rule_the_message_states() -> None:
    """The README's "Keys." paragraph says the rule in KEY_RULE's words (the error message
    ends with them): the two must not drift apart again."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    stated = readme.split("**Keys.** ", 1)[1].split(". Anything else", 1)[0]
    words = stated.replace("`", "'").replace("\u2013", "-")
    assert "keys are " + " ".join(words.split()) == KEY_RULE
