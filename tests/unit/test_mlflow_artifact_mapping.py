"""The pure MLflow artifact and logged-model mapping (``web/core/mlflow_artifacts.py``,
``web/core/mlflow_models.py``): proxy paths to runs and models, listings, filters, inputs."""

from __future__ import annotations

import pytest

from tracker.entities import ArtifactInfo
from tracker.errors import InvalidInput
from tracker.web.core import mlflow_artifacts as art
from tracker.web.core import mlflow_models as models
from tracker.web.core.mlflow_compat import MlflowError

MODEL = "m-" + "ab" * 16


def info(path: str, size: int = 1) -> ArtifactInfo:
    return ArtifactInfo(1, path, size, "0" * 64, "text/plain", None, 0.0)


def test_locations_name_a_run_or_a_model() -> None:
    assert art.parse_location("3/42/artifacts/a/b.txt") == art.Location("run", "3", 42, "a/b.txt")
    assert art.parse_location("0/42/artifacts") == art.Location("run", "0", 42, "")
    where = art.parse_location(f"3/models/{MODEL}/artifacts/MLmodel")
    assert where == art.Location("model", "3", MODEL, "MLmodel")
    assert art.run_prefix(where) == f"mlflow-models/{MODEL}"
    for bad in ("", "3", "3/42", "x/42/artifacts/a", "3/abc/artifacts/a", "3/models/m-1/artifacts"):
        with pytest.raises(MlflowError) as caught:
            art.parse_location(bad)
        assert caught.value.mlflow_code == "RESOURCE_DOES_NOT_EXIST"
    for bad in ("3/42/artifacts/a/../b", "3/42/artifacts/a\\b", "3/42/artifacts/a//b"):
        with pytest.raises(InvalidInput):
            art.parse_location(bad)


def test_listing_shows_direct_children_and_hides_models_at_the_root() -> None:
    infos = [
        info("a.txt", 3),
        info("sub/b.txt", 5),
        info("sub/deeper/c.txt"),
        info("subway.txt", 7),
        info(f"mlflow-models/{MODEL}/MLmodel"),
    ]
    assert art.listing(infos, "", hide_models=True) == [
        {"path": "sub", "is_dir": True},
        {"path": "a.txt", "is_dir": False, "file_size": 3},
        {"path": "subway.txt", "is_dir": False, "file_size": 7},
    ]
    assert art.listing(infos, "sub", hide_models=True) == [
        {"path": "deeper", "is_dir": True},
        {"path": "b.txt", "is_dir": False, "file_size": 5},
    ]
    assert art.listing(infos, "a.txt", hide_models=True) == [
        {"path": "a.txt", "is_dir": False, "file_size": 3}
    ]
    assert {"path": "mlflow-models", "is_dir": True} in art.listing(infos, "", hide_models=False)


def test_multipart_parts_must_be_complete() -> None:
    assert art.part_numbers([{"part_number": 2}, {"part_number": 1}], 2) == [1, 2]
    for parts in ([{"part_number": 1}], [{"part_number": 1}] * 2, "x", [1, 2]):
        with pytest.raises(MlflowError):
            art.part_numbers(parts, 2)
    assert art.num_parts_of(None) == 1
    for bad in (0, 10_001, "x", -1):
        with pytest.raises(MlflowError):
            art.num_parts_of(bad)
    with pytest.raises(MlflowError):
        art.check_upload_id("../../etc")


def test_model_filters_statuses_and_inputs() -> None:
    assert models.model_filter("name = 'net'") == {"name": "net"}
    assert models.model_filter("name = 'n' AND source_run_id = '4'") == {
        "name": "n",
        "source_run_id": "4",
    }
    assert models.model_filter("status = 'LOGGED_MODEL_READY'") == {"status": "READY"}
    with pytest.raises(MlflowError):
        models.model_filter("metrics.acc > 0.5")
    assert models.model_status("LOGGED_MODEL_READY") == "READY"
    assert models.model_status(3) == "UPLOAD_FAILED"
    with pytest.raises(MlflowError):
        models.model_status("DONE")
    record = {"dataset": {"name": "d", "digest": "x1"}, "tags": [{"key": "k", "value": "v"}]}
    first = models.datasets_of([record])
    assert first[0]["context"] == {"k": "v"}
    assert models.merge_inputs(first, models.datasets_of([record])) == first
    with pytest.raises(MlflowError):
        models.datasets_of([{"dataset": {"name": "no digest"}}])
