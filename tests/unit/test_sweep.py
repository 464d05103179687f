from __future__ import annotations

import math
import random
from typing import Any

import pytest

from tracker.errors import InvalidInput
from tracker.rules.sweep import (
    Choices,
    Distribution,
    Override,
    SweepSpecError,
    expand_grid,
    parse_override,
    parse_overrides,
    parse_value,
    sample_random,
    set_path,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64", 64),
        ("-3", -3),
        ("0", 0),
        ("3e-4", 3e-4),
        ("1E3", 1000.0),
        ("0.5", 0.5),
        (".5", 0.5),
        ("1.", 1.0),
        ("-2.5e+2", -250.0),
        ("true", True),
        ("False", False),
        ("null", None),
        ("None", None),
        ("adam", "adam"),
        ("007", "007"),
        ("1e", "1e"),
        ("007e1", 70.0),
        ("1e3", 1000.0),
        ("-.5e-1", -0.05),
        ("'inf'", "inf"),  # quoted; bare inf is a float (test_override_traps)
        ("data/train.csv", "data/train.csv"),
        ('"64"', "64"),
        ("'a,b'", "a,b"),
        (r'"say \"hi\"\n"', 'say "hi"\n'),
        (r"'it\'s'", "it's"),
        ("", ""),
        ("  adam  ", "adam"),
        ("[1, 2]", [1, 2]),
        ("[]", []),
        ("[adam, 'sgd', 1e-3, [1, 2], null]", ["adam", "sgd", 1e-3, [1, 2], None]),
        ('{"a": 1, "b": [true]}', {"a": 1, "b": [True]}),
    ],
)
def test_parse_value(text: str, expected: Any) -> None:
    value = parse_value(text)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('"abc', "not closed"),
        ("'a' b", "unexpected text after the closing"),
        (r'"a\qb"', "unknown escape"),
        ("[1, 2", "must end with ']'"),
        ("{a: 1}", "not a JSON object"),
        ("[1, (2]", "missing ')'"),
        ("[1, 2)]", "unbalanced ')'"),
        ("1e999", "out of range"),
    ],
)
def test_parse_value_errors(text: str, fragment: str) -> None:
    with pytest.raises(SweepSpecError) as info:
        parse_value(text)
    assert fragment in str(info.value) and repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("text", "key", "spec"),
    [
        ("lr=3e-4", "lr", Choices((3e-4,))),
        ("model.width=64", "model.width", Choices((64,))),
        ("lr=1e-4,3e-4,1e-3", "lr", Choices((1e-4, 3e-4, 1e-3))),
        ("opt=adam, sgd", "opt", Choices(("adam", "sgd"))),
        ('name="a,b"', "name", Choices(("a,b",))),
        ("layers=[1,2],[3,4]", "layers", Choices(([1, 2], [3, 4]))),
        ("layers=[1,2]", "layers", Choices(([1, 2],))),
        ("tag=''", "tag", Choices(("",))),  # a bare "tag=" is refused (test_override_traps)
        ("expr=a=b", "expr", Choices(("a=b",))),
        ("lr=loguniform(1e-5, 1e-2)", "lr", Distribution("loguniform", 1e-5, 1e-2)),
        ("p=uniform(-1, 1)", "p", Distribution("uniform", -1, 1)),
        ("seed=randint(0, 9)", "seed", Distribution("randint", 0, 9)),
        ("seed=randint(3, 3)", "seed", Distribution("randint", 3, 3)),
        ("opt=choice(adam, 'sgd', 1)", "opt", Choices(("adam", "sgd", 1))),
        ("opt=choice(adam)", "opt", Choices(("adam",))),
        ("my-key_2.sub=x", "my-key_2.sub", Choices(("x",))),
    ],
)
def test_parse_override(text: str, key: str, spec: Any) -> None:
    override = parse_override(text)
    assert override == Override(key=key, spec=spec, text=text)
    assert override.path == tuple(key.split("."))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lr=loguniform(0,1)", "-c lr=loguniform(0,1): loguniform needs 0 < low < high"),
        ("lr=loguniform(1,1)", "-c lr=loguniform(1,1): loguniform needs 0 < low < high"),
        ("lr=loguniform(1)", "loguniform takes two numbers: loguniform(low, high)"),
        ("lr=loguniform(a, b)", "loguniform takes two numbers"),
        ("lr=uniform(2, 1)", "-c lr=uniform(2, 1): uniform needs low < high"),
        ("lr=uniform(true, 2)", "uniform takes two numbers"),
        ("n=randint(1.5, 3)", "randint needs integers low <= high"),
        ("n=randint(5, 1)", "randint needs integers low <= high"),
        ("o=choice()", "choice needs at least one value"),
        ("lr", "-c lr: expected key=value"),
        ("=3", "expected key=value"),
        ("model..width=3", "key 'model..width' must be dotted names"),
        ("bad key=3", "key 'bad key' must be dotted names"),
        ("lr=1e-4,,3e-4", "a comma list has an empty entry"),
        ('name="abc', "not closed"),
    ],
)
def test_parse_override_errors_name_the_override_and_rule(text: str, message: str) -> None:
    with pytest.raises(SweepSpecError) as info:
        parse_override(text)
    assert message in str(info.value)
    assert str(info.value).startswith(f"-c {text}: ")
    assert isinstance(info.value, InvalidInput) and info.value.code == "invalid_sweep_spec"


@pytest.mark.parametrize(
    ("texts", "fragment"),
    [
        (["lr=1", "lr=2"], "-c lr=2: conflicts with -c lr=1: key 'lr' is given twice"),
        (["model=small", "model.width=64"], "'model' is set and a key inside it is set too"),
        (["model.width=64", "model=small"], "'model' is set and a key inside it is set too"),
    ],
)
def test_parse_overrides_conflicts(texts: list[str], fragment: str) -> None:
    with pytest.raises(SweepSpecError, match="conflicts") as info:
        parse_overrides(texts)
    assert fragment in str(info.value)


def test_parse_overrides_allows_siblings_and_common_prefixes() -> None:
    overrides = parse_overrides(["model.width=64", "model.depth=2", "model_x=1", "lr=1"])
    assert [o.key for o in overrides] == ["model.width", "model.depth", "model_x", "lr"]


def test_set_path_returns_new_dict_and_leaves_input_alone() -> None:
    base = {"model": {"width": 64, "act": "relu"}, "lr": 0.1}
    new = set_path(base, "model.width", 128)
    assert new == {"model": {"width": 128, "act": "relu"}, "lr": 0.1}
    assert base == {"model": {"width": 64, "act": "relu"}, "lr": 0.1}
    assert new is not base and new["model"] is not base["model"]


@pytest.mark.parametrize(
    ("base", "key", "value", "expected"),
    [
        ({}, "a", 1, {"a": 1}),
        ({}, "a.b.c", 1, {"a": {"b": {"c": 1}}}),
        ({"a": None}, "a.b", 1, {"a": {"b": 1}}),
        ({"a": {"x": 1}}, "a", 5, {"a": 5}),
        ({"a": 1}, "b.c", [1], {"a": 1, "b": {"c": [1]}}),
    ],
)
def test_set_path(base: dict, key: str, value: Any, expected: dict) -> None:
    assert set_path(base, key, value) == expected


@pytest.mark.parametrize(
    ("base", "key", "fragment"),
    [
        ({"model": "resnet"}, "model.width", "'model' is 'resnet', not a mapping"),
        ({"a": {"b": [1]}}, "a.b.c", "'a.b' is [1], not a mapping"),
        ({}, "a..b", "empty part"),
        ({}, "", "empty part"),
    ],
)
def test_set_path_errors(base: dict, key: str, fragment: str) -> None:
    with pytest.raises(SweepSpecError) as info:
        set_path(base, key, 1)
    assert fragment in str(info.value)


def test_grid_is_cartesian_product_in_fixed_order() -> None:
    overrides = parse_overrides(["lr=1e-4,3e-4,1e-3", "model.width=64,128"])
    configs = expand_grid({"model": {"width": 32, "depth": 2}, "seed": 0}, overrides)
    assert len(configs) == 6
    assert [(c["lr"], c["model"]["width"]) for c in configs] == [
        (1e-4, 64),
        (1e-4, 128),
        (3e-4, 64),
        (3e-4, 128),
        (1e-3, 64),
        (1e-3, 128),
    ]
    assert all(c["model"]["depth"] == 2 and c["seed"] == 0 for c in configs)


def test_grid_configs_do_not_share_mutable_values() -> None:
    base = {"aug": {"ops": ["flip"]}}
    configs = expand_grid(base, parse_overrides(["layers=[1,2]", "lr=1,2"]))
    configs[0]["layers"].append(3)
    configs[0]["aug"]["ops"].append("crop")
    assert configs[1]["layers"] == [1, 2]
    assert configs[1]["aug"]["ops"] == ["flip"]
    assert base == {"aug": {"ops": ["flip"]}}


def test_grid_without_overrides_is_the_base_config() -> None:
    assert expand_grid({"a": 1}, []) == [{"a": 1}]


def test_grid_rejects_distributions_and_too_many_configs() -> None:
    with pytest.raises(SweepSpecError, match=r"-c lr=loguniform\(1e-5,1e-2\): .*--random N"):
        expand_grid({}, parse_overrides(["lr=loguniform(1e-5,1e-2)"]))
    big = parse_overrides(["a=" + ",".join(map(str, range(40))), "b=" + ",".join("x" * 30)])
    with pytest.raises(SweepSpecError, match="the grid has 1200 configs, more than the limit"):
        expand_grid({}, big)
    assert len(expand_grid({}, big, max_configs=1200)) == 1200


def test_random_search_is_reproducible_and_within_bounds() -> None:
    overrides = parse_overrides(
        [
            "lr=loguniform(1e-5, 1e-2)",
            "dropout=uniform(0, 0.5)",
            "seed=randint(0, 3)",
            "opt=choice(adam, sgd)",
            "width=64,128,256",
            "epochs=10",
        ]
    )
    a = sample_random({"epochs": 1}, overrides, 200, random.Random(0))
    b = sample_random({"epochs": 1}, overrides, 200, random.Random(0))
    assert a == b
    assert len(a) == 200
    for c in a:
        assert 1e-5 <= c["lr"] <= 1e-2
        assert 0 <= c["dropout"] <= 0.5
        assert c["seed"] in {0, 1, 2, 3} and isinstance(c["seed"], int)
        assert c["opt"] in {"adam", "sgd"}
        assert c["width"] in {64, 128, 256}
        assert c["epochs"] == 10
    assert {c["seed"] for c in a} == {0, 1, 2, 3}  # both ends of randint are reachable
    assert {c["width"] for c in a} == {64, 128, 256}
    # log-uniform: about as many samples below the geometric midpoint as above it
    below = sum(c["lr"] < math.sqrt(1e-5 * 1e-2) for c in a)
    assert 70 < below < 130
    assert sample_random({}, overrides, 5, random.Random(1)) != a[:5]


def test_fixed_values_do_not_consume_randomness() -> None:
    with_fixed = parse_overrides(["lr=uniform(0, 1)", "epochs=3"])
    without = parse_overrides(["lr=uniform(0, 1)"])
    a = sample_random({}, with_fixed, 5, random.Random(3))
    b = sample_random({}, without, 5, random.Random(3))
    assert [c["lr"] for c in a] == [c["lr"] for c in b]


@pytest.mark.parametrize("n", [0, -1, 1001, True, 2.0])
def test_random_search_rejects_bad_n(n: Any) -> None:
    with pytest.raises(SweepSpecError, match="--random"):
        sample_random({}, [], n, random.Random(0))
