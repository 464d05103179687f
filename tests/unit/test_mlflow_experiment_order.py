"""The pure parts of MLflow's experiment order and MLflow 3's keyed images: what each
``search_experiments(order_by=...)`` means (``tracker.rules.mlflow_filter``), where the not
yet stored Default experiment goes in a page (``tracker.web.core.mlflow_experiments``), and
which ``images/`` paths are keyed images (``tracker.rules.artifact_paths``); no input makes
either parser fail with anything but its own error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.entities import ProjectInfo
from tracker.rules.artifact_paths import parse_mlflow_image_path
from tracker.rules.mlflow_filter import MlflowFilterError, parse_experiment_order_by
from tracker.web.core.mlflow_experiments import insert_default, store_order

ORDERS = [
    (None, (("creation_time", False), ("experiment_id", True))),
    ([], (("creation_time", False), ("experiment_id", True))),
    (["name"], (("name", True), ("experiment_id", False))),
    (["name ASC"], (("name", True), ("experiment_id", False))),
    (["name desc"], (("name", False), ("experiment_id", False))),
    (["attribute.last_update_time DESC"], (("last_update_time", False), ("experiment_id", False))),
    (["`creation_time`"], (("creation_time", True), ("experiment_id", False))),
    (["experiment_id ASC"], (("experiment_id", True),)),
    (["name", "experiment_id DESC"], (("name", True), ("experiment_id", False))),
    ("name DESC", (("name", False), ("experiment_id", False))),  # one string, as a GET sends
]
REFUSED = [
    (["tags.team"], "not 'tags'"),
    (["attributes.name"], "not 'attributes'"),  # MLflow's experiments take attribute. only
    (["start_time"], "ordered by name, experiment_id, creation_time, last_update_time only"),
    (["name UP"], "use <attribute> [ASC|DESC]"),
    (["name ASC DESC"], "use <attribute> [ASC|DESC]"),
    (["name", "name DESC"], "duplicate fields"),
    ([3], "list of strings"),
    ({"name": "ASC"}, "list of strings"),
    (["name\x00"], "NUL"),
]


@pytest.mark.parametrize(("given_", "meant"), ORDERS)
def test_what_an_experiment_order_means(
    given_: object, meant: tuple[tuple[str, bool], ...]
) -> None:
    assert parse_experiment_order_by(given_) == meant


@pytest.mark.parametrize(("given_", "says"), REFUSED)
def test_what_is_refused_and_why(given_: object, says: str) -> None:
    with pytest.raises(MlflowFilterError, match="order_by") as caught:
        parse_experiment_order_by(given_)
    assert says in caught.value.message
    assert caught.value.field == "order_by"


@given(st.lists(st.text(max_size=40), max_size=4) | st.text(max_size=40))
def test_no_order_fails_but_as_refused(items: object) -> None:
    try:
        order = parse_experiment_order_by(items)
    except MlflowFilterError:
        return
    assert order and all(ascending in (True, False) for _, ascending in order)
    assert {a for a, _ in store_order(order)} <= {"name", "id", "created_at", "updated_at"}


def project(pid: int, name: str, created: float, deleted: float | None = None) -> ProjectInfo:
    return ProjectInfo(pid, name, created, deleted)


PAGE = [
    project(3, "golf", 30.0),
    project(2, "foxtrot", 20.0, deleted=50.0),
    project(1, "hotel", 10.0),
]
DEFAULT = project(0, "default", 99.0)  # shown with the time it is read: still the oldest


@pytest.mark.parametrize(
    ("order", "names"),
    [
        (["creation_time DESC"], ["golf", "foxtrot", "hotel", "default"]),
        (["creation_time ASC"], ["default", "hotel", "foxtrot", "golf"]),
        (["name ASC"], ["default", "foxtrot", "golf", "hotel"]),  # as "Default": 'D' < 'f'
        (["name DESC"], ["hotel", "golf", "foxtrot", "default"]),
        (["experiment_id ASC"], ["default", "hotel", "foxtrot", "golf"]),  # its id is 0
        (["last_update_time DESC"], ["foxtrot", "golf", "hotel", "default"]),
    ],
)
def test_the_unstored_default_goes_where_mlflow_lists_it(
    order: list[str], names: list[str]
) -> None:
    parsed = parse_experiment_order_by(order)
    key = {"name": lambda p: p.name, "id": lambda p: p.id, "created_at": lambda p: p.created_at,
           "updated_at": lambda p: p.deleted_at or p.created_at}  # fmt: skip
    column, ascending = store_order(parsed)[0]
    page = sorted(PAGE, key=key[column], reverse=not ascending)  # as the store orders it
    placed = insert_default(page, DEFAULT, parsed, shown_name="Default")
    assert [p.name for p in placed] == names


KEYED = [
    ("images/x+step+3+timestamp+1733371200000+0b0c3f4e-1a2b-4c3d-9e8f-0123456789ab.png", ("x", 3)),
    (
        "images/val~pred+step+0+timestamp+1+0b0c3f4e-1a2b-4c3d-9e8f-0123456789ab.png",
        ("val/pred", 0),
    ),
    ("images/val loss%step%12%timestamp%5%abcdef12-3456.png", ("val loss", 12)),  # older clients
    ("images/a#b+step+1+timestamp+2+abcdef1234.jpg", ("a/b", 1)),
]
NOT_KEYED = [
    "images/x+step+3+timestamp+1733371200000+0b0c3f4e-1a2b-4c3d-9e8f-0123456789ab+compressed.webp",
    "images/plain.png",  # log_image(image, "images/plain.png"): a file
    "images/x+step+3+timestamp+1+zzzzzzzz.png",  # not a uuid
    "images/x+step+-1+timestamp+1+abcdef1234.png",
    "images/x%step+1+timestamp+1+abcdef1234.png",  # mixed separators
    "images/sub/x+step+1+timestamp+1+abcdef1234.png",
    "media/images/x/000000003.png",  # the tracker's own layout: parse_media_path
    "images/a..b+step+1+timestamp+1+abcdef1234.png",  # breaks the key rule
]


@pytest.mark.parametrize(("path", "meant"), KEYED)
def test_keyed_images_of_mlflow(path: str, meant: tuple[str, int]) -> None:
    assert parse_mlflow_image_path(path) == meant


@pytest.mark.parametrize("path", NOT_KEYED)
def test_other_files_are_not_keyed_images(path: str) -> None:
    assert parse_mlflow_image_path(path) is None


@given(st.text(max_size=120))
def test_any_path_is_a_keyed_image_or_none(path: str) -> None:
    found = parse_mlflow_image_path("images/" + path)
    assert found is None or (isinstance(found[0], str) and found[1] >= 0)
