"""The artifact-path rule and the media paths (pure): table-driven, then Hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.errors import InvalidInput, InvalidMetricKey
from tracker.rules.artifact_paths import (
    MAX_PATH_LENGTH,
    check_artifact_path,
    check_prefix,
    media_path,
    parse_media_path,
)

GOOD = ["a", "a/b.txt", "model/MLmodel", "dir.with.dots/x", "é/ü ñ.png", "a" * MAX_PATH_LENGTH]
BAD = {
    "": "0 characters",
    "a" * (MAX_PATH_LENGTH + 1): "1025 characters",
    "€" * 700: "bytes in UTF-8",
    "/abs": "is absolute",
    "C:/x": "is absolute",
    "c:x": "is absolute",
    "a\\b": "backslash",
    "a\x00b": "NUL",
    "a\nb": "control character",
    "a\x7fb": "control character",
    "a//b": "empty segment",
    "a/": "empty segment",
    "./a": "'.' segment",
    "a/./b": "'.' segment",
    "..": "'..' segment",
    "a/../../etc/passwd": "'..' segment",
    "\ud800": "not valid UTF-8",
}


@pytest.mark.parametrize("path", GOOD)
def test_good_paths_pass_unchanged(path: str) -> None:
    assert check_artifact_path(path) == path


@pytest.mark.parametrize(("path", "problem"), BAD.items())
def test_bad_paths_name_the_problem_and_the_rule(path: str, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem) as err:
        check_artifact_path(path)
    assert err.value.field == "path" and "relative posix" in err.value.message


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidInput, match="is a bytes"):
        check_artifact_path(b"a")


def test_prefixes_may_end_with_a_slash() -> None:
    assert [check_prefix(p) for p in ["", "d/", "d/e", "d/e/"]] == ["", "d/", "d/e", "d/e/"]
    for bad in ["/", "../", "a//"]:
        with pytest.raises(InvalidInput):
            check_prefix(bad)


@pytest.mark.parametrize("key", ["val loss", "val:acc", "ü/x", "C:x", "a/b/c"])
def test_media_paths_of_any_metric_key_are_valid_artifact_paths(key: str) -> None:
    path = media_path("images", key, 3, ".png")
    assert check_artifact_path(path) == path and parse_media_path(path) == ("images", key, 3)


def test_media_paths_round_trip() -> None:
    path = media_path("images", "val/samples", 12, ".png")
    assert path == "media/images/val/samples/000000012.png"
    assert parse_media_path(path) == ("images", "val/samples", 12)
    assert parse_media_path(media_path("figures", "cm", 3, ".plotly.json")) == ("figures", "cm", 3)
    assert parse_media_path(media_path("histograms", "w", 10**10, ".json")) == (
        "histograms",
        "w",
        10**10,
    )


@pytest.mark.parametrize(
    "path",
    [
        "media/images/k/12.png",  # fewer than 9 digits
        "media/images/k/000000001.gif",
        "media/histograms/k/000000001.png",
        "media/images/000000001.png",  # no key
        "media/images/a..b/000000001.png",
        "media/sounds/k/000000001.png",
        "other/images/k/000000001.png",
    ],
)
def test_other_paths_are_not_media(path: str) -> None:
    assert parse_media_path(path) is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("sounds", "k", 1, ".png"), InvalidInput),
        (("images", "k", 1, ".gif"), InvalidInput),
        (("images", "k", -1, ".png"), InvalidInput),
        (("images", "k", True, ".png"), InvalidInput),
        (("images", "../k", 1, ".png"), InvalidMetricKey),
    ],
)
def test_bad_media_paths_are_refused(args: tuple, error: type) -> None:
    with pytest.raises(error):
        media_path(*args)


@given(st.text(max_size=1100))
def test_any_text_is_accepted_only_if_canonical_and_relative(text: str) -> None:
    try:
        check_artifact_path(text)
    except InvalidInput as err:
        assert err.field == "path" and "relative posix" in err.message
        return
    parts = text.split("/")
    assert 0 < len(text) <= MAX_PATH_LENGTH
    assert all(part not in ("", ".", "..") for part in parts)
    assert "\\" not in text and not any(ord(c) < 32 or ord(c) == 127 for c in text)
    assert not (len(text) > 1 and text[1] == ":" and text[0].isascii() and text[0].isalpha())


_segment = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
    min_size=1,
    max_size=20,
).filter(lambda s: s not in (".", ".."))


@given(st.lists(_segment, min_size=1, max_size=8))
def test_joined_safe_segments_pass_unless_drive_like(segments: list[str]) -> None:
    path = "/".join(segments)
    if len(path) > 1 and path[1] == ":" and path[0].isascii() and path[0].isalpha():
        return
    assert check_artifact_path(path) == path


@given(
    st.lists(_segment, max_size=4), st.sampled_from(["..", ".", ""]), st.lists(_segment, max_size=4)
)
def test_a_traversal_segment_anywhere_is_refused(
    before: list[str], bad: str, after: list[str]
) -> None:
    with pytest.raises(InvalidInput):
        check_artifact_path("/".join([*before, bad, *after]))
