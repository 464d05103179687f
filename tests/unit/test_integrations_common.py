"""The integrations' shared rules (tracker.integrations.common, no framework imported) and
the checkpoint digest of files and directories (tracker.filedigest)."""

from __future__ import annotations

import argparse
import enum
import math
from pathlib import Path

import pytest

from tracker.errors import CheckpointError
from tracker.filedigest import path_digest, verify
from tracker.integrations.common import KeyMapper, map_key, numeric_metrics, to_config
from tracker.rules.keys import check_key


@pytest.mark.parametrize(
    ("key", "stored"),
    [
        ("train/loss", "train/loss"),  # accepted by the key rule: unchanged
        ("eval_loss", "eval_loss"),
        ("val loss", "val_loss"),
        ("val:acc", "val_acc"),
        ("loss (smoothed)", "loss__smoothed_"),
        ("a//b", "a/b"),
        ("/lead/and/trail/", "lead/and/trail"),
        ("a..b", "a.b"),
        ("ü", "_"),
        ("///", "_"),
        ("x" * 300, "x" * 250),
    ],
)
def test_keys_are_mapped_deterministically(key: str, stored: str) -> None:
    assert map_key(key) == stored
    assert check_key(map_key(key)) == stored  # always a key the rule accepts
    assert map_key(stored) == stored  # mapping is idempotent


def test_two_keys_mapping_to_one_warn_once() -> None:
    keys = KeyMapper()
    assert keys("val loss") == "val_loss"
    with pytest.warns(UserWarning, match="'val loss' and 'val:loss' are both stored as"):
        assert keys("val:loss") == "val_loss"
    assert keys("val:loss") == "val_loss"  # cached: no second warning


def test_only_numbers_are_metrics() -> None:
    torch = pytest.importorskip("torch")
    values = numeric_metrics(
        {"loss": 0.5, "n": 3, "t": torch.tensor(2.0), "vec": torch.ones(3), "name": "x",
         "none": None, "val acc": 1.0},
        KeyMapper(),
    )  # fmt: skip
    assert set(values) == {"loss", "n", "t", "val_acc"}


class Color(enum.Enum):
    RED = "red"


def test_config_keeps_json_values_and_stringifies_the_rest() -> None:
    ns = argparse.Namespace(lr=0.1, layers=(64, 32), act=Color.RED, bad=math.nan, obj=object)
    config = to_config(ns)
    assert config["lr"] == 0.1 and config["layers"] == [64, 32] and config["act"] == "red"
    assert config["bad"] == "nan" and config["obj"] == "<class 'object'>"
    assert to_config({1: {"nested": Path("/x")}}) == {"1": {"nested": "/x"}}
    assert to_config(None) == {} and to_config(5) == {"hparams": 5}


def test_directory_digest_changes_with_any_file(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint-4"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"weights")
    (folder / "sub" / "state.json").write_text("{}")
    size, digest = path_digest(folder)
    assert size == 9 and verify(folder, size, digest) == "ok"
    assert path_digest(folder) == (size, digest)  # deterministic
    (folder / "sub" / "state.json").write_text("[]")  # same size, other content
    assert verify(folder, size, digest) == "corrupt"
    (folder / "sub" / "state.json").write_text("{}")
    (folder / "sub" / "state.json").rename(folder / "sub" / "other.json")  # a rename
    assert verify(folder, size, digest) == "corrupt"
    assert verify(tmp_path / "gone", size, digest) == "missing"


def test_record_checkpoint_of_a_folder_is_verified_on_resume(tmp_path: Path) -> None:
    import tracker

    run = tracker.init("p", uri=f"sqlite:///{tmp_path / 't.db'}", system_interval=None,
                       capture_console=False)  # fmt: skip
    try:
        folder = tmp_path / "checkpoint-8"
        folder.mkdir()
        (folder / "model.bin").write_bytes(b"w" * 10)
        info = run.record_checkpoint(folder, 8, {"loss": 0.5})
        assert (info.step, info.bytes, info.metrics) == (8, 10, {"loss": 0.5})
        assert run.latest_checkpoint() == info
        (folder / "model.bin").write_bytes(b"x" * 10)
        assert run.latest_checkpoint() is None
        with pytest.raises(CheckpointError, match="cannot be read"):
            run.record_checkpoint(tmp_path / "nothing", 9)
    finally:
        run.finish()
