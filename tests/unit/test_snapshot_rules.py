"""The snapshot rules (tracker.rules.snapshot) and the collector's directory walk: the walk
outside git must leave out exactly what git itself would, checked against a real git on
the same tree; an untrusted file list never gets past the checks with a path that escapes."""

from __future__ import annotations

import os
import posixpath
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.cli.snapshot import collect
from tracker.errors import InvalidInput
from tracker.rules.snapshot import (
    FileEntry,
    IgnoreRules,
    SnapshotTooLarge,
    check_entries,
    check_path,
    check_size,
    snapshot_digest,
)

TREE = {
    ".gitignore": "*.log\n/build/\ndata/**/*.bin\n!keep.log\ndocs/*.tmp\n# comment\n\nout\n"
    "sub/deep/\n*.py[co]\n\\#hash\nlogs/\n!logs/important.txt\n",
    "a.py": "",
    "run.log": "",
    "keep.log": "",
    "build/x.o": "",
    "src/build/y.py": "",  # /build/ is anchored: this one stays
    "data/a/b/c.bin": "",
    "data/c.bin": "",  # **/ matches zero directories too
    "data/readme.md": "",
    "docs/a.tmp": "",
    "docs/sub/b.tmp": "",  # docs/*.tmp does not reach below docs/
    "out": "",  # a file named out
    "pkg/out/z.txt": "",  # and a directory named out, at any depth
    "sub/deep/f.txt": "",
    "sub/deepest/f.txt": "",
    "x.pyc": "",
    "#hash": "",
    "logs/important.txt": "",  # a negation cannot re-include below an ignored directory
    "nested/.gitignore": "*.csv\n!good.csv\n/only-here.txt\n",
    "nested/a.csv": "",
    "nested/good.csv": "",
    "nested/only-here.txt": "",
    "nested/deeper/only-here.txt": "",
    "nested/deeper/b.csv": "",
    "__pycache__/m.cpython-311.pyc": "",
    ".venv/lib/site.py": "",
}


def _make(root: Path) -> None:
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_walk_leaves_out_what_git_leaves_out(tmp_path: Path) -> None:
    plain, repo = tmp_path / "plain", tmp_path / "repo"
    _make(plain)
    _make(repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    by_git = sorted(p for p in listed.split("\0") if p and not p.startswith((".venv/", "__pyc")))
    walked = [e.path for e in collect(str(plain)).entries]
    assert walked == by_git
    # and a git work tree is listed by git itself, the same way
    assert [e.path for e in collect(str(repo)).entries] == by_git


def test_a_collected_entry_has_its_hash_size_and_executable_bit(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(tmp_path / "run.sh", 0o755)
    (tmp_path / "a.txt").write_text("abc")
    got = {e.path: e for e in collect(str(tmp_path)).entries}
    assert got["run.sh"].executable and not got["a.txt"].executable
    assert got["a.txt"].size == 3
    assert got["a.txt"].sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_excluded_paths_such_as_the_store_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "tracker.db").write_text("sqlite")
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "blob").write_text("")
    excluded = [str(tmp_path / "tracker.db"), str(tmp_path / "artifacts")]
    assert [e.path for e in collect(str(tmp_path), exclude=excluded).entries] == ["train.py"]


def test_over_the_caps_names_the_biggest_files_and_the_ways_out() -> None:
    entries = [FileEntry(f"f{i}", "", i * 1024 * 1024) for i in range(10)]
    with pytest.raises(SnapshotTooLarge) as err:
        check_size(entries, "/p", max_bytes=20 * 1024 * 1024)
    text = err.value.message
    assert "45.0 MiB, over the 20.0 MiB cap" in text
    assert text.index("f9 (9.0 MiB)") < text.index("f8 (8.0 MiB)")
    assert "--no-snapshot" in text and ".gitignore" in text
    many = [FileEntry(f"data/{i}", "", 1) for i in range(30)] + [FileEntry("a.py", "", 1)]
    with pytest.raises(SnapshotTooLarge, match=r"31 files, over the 10 cap.*data/ \(30 files\)"):
        check_size(many, "/p", max_files=10)


def test_the_digest_is_the_tree_not_the_order() -> None:
    a = [FileEntry("a", "0" * 64, 1), FileEntry("b", "1" * 64, 2, True)]
    assert snapshot_digest(a, None, None) == snapshot_digest(a[::-1], None, None)
    assert snapshot_digest(a, None, None) != snapshot_digest(a[:1], None, None)
    assert snapshot_digest(a, "abc1234", None) != snapshot_digest(a, None, None)
    assert snapshot_digest(a, "abc1234", "d") != snapshot_digest(a, "abc1234", "e")
    flipped = [a[0], FileEntry("b", "1" * 64, 2, False)]
    assert snapshot_digest(a, None, None) != snapshot_digest(flipped, None, None)


@pytest.mark.parametrize(
    "bad",
    ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "a\\b", "a\0b", "x" * 1025],
)
def test_a_path_that_could_escape_is_refused(bad: str) -> None:
    with pytest.raises(InvalidInput, match="snapshot file path"):
        check_path(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_an_accepted_path_stays_inside_the_root(path: str) -> None:
    try:
        check_path(path)
    except InvalidInput:
        return
    normal = posixpath.normpath(path)
    assert not normal.startswith(("/", "..")) and normal == path


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=70),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=8,
)
_entry = st.fixed_dictionaries(
    {"path": st.sampled_from(["a", "b/c", "b", "../x", "", "a"]) | st.text(max_size=8),
     "sha256": st.sampled_from(["0" * 64, "A" * 64, "1" * 63]) | _json,
     "size": st.integers(-2, 2**63) | _json},
    optional={"executable": st.booleans() | _json},
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_entry | _json, max_size=5))
def test_an_untrusted_file_list_is_accepted_whole_or_refused_clearly(files: list[object]) -> None:
    try:
        entries = check_entries(files)
    except InvalidInput as exc:
        assert exc.field in ("files", "path") and exc.message
        return
    paths = [e.path for e in entries]
    assert paths == sorted(set(paths))
    for e in entries:
        check_path(e.path)
        assert len(e.sha256) == 64 and e.size >= 0


def test_gitignore_rules_apply_the_last_match() -> None:
    rules = IgnoreRules()
    rules.add(["*.txt", "!keep.txt", "keep.txt"], "")
    assert rules.ignored("keep.txt", False)
    rules.add(["!keep.txt"], "")
    assert not rules.ignored("keep.txt", False)
    assert rules.ignored("a/b.txt", False)
    assert rules.ignored("x/__pycache__", True) and rules.ignored("m.pyc", False)
