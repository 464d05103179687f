"""``missing_module``: a job whose environment lacks a module is told which one and how to get
it (the distribution's name, and the tracker extra that brings it), table-driven; arbitrary
output never crashes the classifier and classifies the same way twice."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rules.failure import (
    FAILURE_CLASSES,
    MISSING_MODULE,
    classify,
    install_hint,
    missing_module_name,
)
from tracker.runner.retry import is_retryable

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _traceback(last: str) -> str:
    return (
        "step 0 loss 2.30\nTraceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 3, in <module>\n    import thing\n'
        f"{last}\n"
    )


UPLOAD_WRAPPED = _traceback(
    "tracker.errors.UploadError: 4 upload(s) of run 1 failed; the first: "
    "ModuleNotFoundError: No module named 'numpy'"
)
PYTHON_M = "/venv/bin/python: No module named pytest\n"
RANKED = '[rank0]: Traceback (most recent call last):\n[rank0]:   File "t.py", line 1\n' + (
    "[rank0]: ModuleNotFoundError: No module named 'transformers'\n"
)

# name, output tail, module the hint names, fragments of the hint
CASES: list[tuple[str, str, str, list[str]]] = [
    ("numpy", _traceback("ModuleNotFoundError: No module named 'numpy'"), "numpy",
     ["pip install numpy"]),
    ("PIL -> pillow, media extra", _traceback("ModuleNotFoundError: No module named 'PIL'"),
     "PIL", ["pip install pillow", "tracker[media]"]),
    ("dotted -> top level", _traceback("ModuleNotFoundError: No module named 'sklearn.utils'"),
     "sklearn.utils", ["pip install scikit-learn", "package 'sklearn'"]),
    ("yaml", _traceback("ModuleNotFoundError: No module named 'yaml'"), "yaml",
     ["pip install pyyaml"]),
    ("cv2", _traceback("ModuleNotFoundError: No module named 'cv2'"), "cv2",
     ["pip install opencv-python"]),
    ("flask: server extra", _traceback("ModuleNotFoundError: No module named 'flask'"), "flask",
     ["pip install flask", "tracker[server]"]),
    ("gunicorn", _traceback("ModuleNotFoundError: No module named 'gunicorn.app'"),
     "gunicorn.app", ["tracker[server]"]),
    ("apscheduler: runner extra",
     _traceback("ModuleNotFoundError: No module named 'apscheduler.triggers'"),
     "apscheduler.triggers", ["tracker[runner]"]),
    ("tzlocal", _traceback("ModuleNotFoundError: No module named 'tzlocal'"), "tzlocal",
     ["tracker[runner]"]),
    ("lightning", _traceback("ModuleNotFoundError: No module named 'lightning'"), "lightning",
     ["pip install lightning", "tracker[integrations]"]),
    ("accelerate", _traceback("ModuleNotFoundError: No module named 'accelerate'"),
     "accelerate", ["tracker[integrations]"]),
    ("boto3: s3 extra", _traceback("ModuleNotFoundError: No module named 'boto3'"), "boto3",
     ["pip install boto3", "tracker[s3]"]),
    ("psycopg quoted", _traceback("ModuleNotFoundError: No module named 'psycopg'"), "psycopg",
     ["pip install 'psycopg[binary]'", "tracker[postgres]"]),
    ("pynvml: gpu extra", _traceback("ModuleNotFoundError: No module named 'pynvml'"), "pynvml",
     ["pip install nvidia-ml-py", "tracker[gpu]"]),
    ("python 2 style", _traceback("ImportError: No module named yaml.constructor"),
     "yaml.constructor", ["pip install pyyaml"]),
    ("wrapped by another exception", UPLOAD_WRAPPED, "numpy", ["pip install numpy"]),
    ("python -m, no traceback", PYTHON_M, "pytest", ["pip install pytest"]),
    ("tail cut before the header", "ModuleNotFoundError: No module named 'einops'\n", "einops",
     ["pip install einops"]),
    ("torchrun rank prefix", RANKED, "transformers", ["tracker[integrations]"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tail", "module", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_missing_module_names_it_and_how_to_get_it(
    tail: str, module: str, fragments: list[str]
) -> None:
    failure = classify(1, None, tail)
    assert failure is not None
    assert failure.cls == MISSING_MODULE in FAILURE_CLASSES
    assert f"'{module}'" in failure.hint, failure.hint
    for fragment in fragments:
        assert fragment in failure.hint, (fragment, failure.hint)
    # the job's own environment: running it again the same way fails the same way
    assert not is_retryable(failure.cls, retry_on_failure=False)


@pytest.mark.parametrize(
    ("tail", "cls"),
    [
        # an installed module that lacks a name is a version problem, not a missing module
        (_traceback("ImportError: cannot import name 'X' from 'torch'"), "import_error"),
        # the escaping exception decides; an earlier ImportError that was handled does not
        (_traceback("ValueError: bad shape") + "No module named 'ujson'\n", "python_exception"),
        # signals and the runner's verdicts come first
        (_traceback("ModuleNotFoundError: No module named 'numpy'"), "killed_by_signal"),
    ],
)
def test_what_is_not_a_missing_module(tail: str, cls: str) -> None:
    signal = 9 if cls == "killed_by_signal" else None
    failure = classify(1, signal, tail)
    assert failure is not None and failure.cls == cls, failure


def _pyproject_extras() -> dict[str, list[str]]:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return {k: v for k, v in extras.items() if k != "dev"}


# distribution -> import name, where they differ
_IMPORT_NAMES = {"pillow": "PIL", "nvidia-ml-py": "pynvml", "apscheduler": "apscheduler",
                 "flask": "flask"}  # fmt: skip


def test_every_extras_module_points_at_an_extra_that_brings_it() -> None:
    """The hint's extras agree with pyproject.toml: every import name of a runtime extra's
    requirement names an extra that lists that requirement."""
    for extra, requirements in _pyproject_extras().items():
        for requirement in requirements:
            dist = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
            module = _IMPORT_NAMES.get(dist, dist.replace("-", "_"))
            hint = install_hint(module)
            named = re.search(r"tracker\[(\w+)\]", hint)
            assert named, f"{module} (extra {extra}) gets no extra in its hint: {hint}"
            brings = [r.lower() for r in _pyproject_extras()[named.group(1)]]
            assert any(r.startswith(dist) for r in brings), (module, named.group(1), brings)


def test_a_module_outside_every_extra_names_no_extra() -> None:
    assert install_hint("numpy") == "pip install numpy"
    assert install_hint("google.protobuf.message") == "pip install protobuf"


_TEXT = st.text(st.characters(codec="utf-8"), max_size=400)
_LINES = st.lists(
    st.one_of(
        _TEXT,
        st.sampled_from([
            "Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
            "ModuleNotFoundError: No module named '", "ImportError: No module named ",
            "No module named ''", "[rank0]: ", "Killed", "loss is nan", "'", "..",
        ]),
        st.from_regex(r"No module named '?[A-Za-z_.\[\] ]{0,20}'?", fullmatch=True),
    ),
    max_size=12,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    lines=_LINES,
    exit_code=st.one_of(st.none(), st.integers(-64, 300)),
    signal=st.one_of(st.none(), st.integers(0, 80)),
)
def test_arbitrary_output_never_crashes_and_classifies_stably(
    lines: list[str], exit_code: int | None, signal: int | None
) -> None:
    tail = "\n".join(lines)
    first = classify(exit_code, signal, tail)
    assert first == classify(exit_code, signal, tail)
    if first is not None:
        assert first.cls in FAILURE_CLASSES and first.hint
    name = missing_module_name(tail)
    if name is not None:
        assert name and "'" not in name and not name[0].isspace()
        assert install_hint(name).startswith("pip install ")
