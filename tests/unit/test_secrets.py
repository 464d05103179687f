"""Env values are write-only: the one redaction (tracker/rules/secrets.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.rules.secrets import env_keys_only


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"argv": ["x"], "env": {"B": "2", "A": "1"}}, {"argv": ["x"], "env_keys": ["A", "B"]}),
        ({"argv": ["x"], "env": {}}, {"argv": ["x"], "env_keys": []}),
        ({"argv": ["x"], "env": None}, {"argv": ["x"], "env_keys": []}),
        ({"argv": ["x"]}, {"argv": ["x"], "env_keys": []}),
    ],
)
def test_env_keys_only(data: dict[str, Any], expected: dict[str, Any]) -> None:
    assert env_keys_only(data) == expected
    assert "env" in data or data == {"argv": ["x"]}  # the input is not changed
