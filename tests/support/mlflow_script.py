"""A representative real-world MLflow script, recorded call by call.

``python -m tests.support.mlflow_script OUT.json`` runs the fluent API and the client end to
end against whatever ``MLFLOW_TRACKING_URI`` names (a real MLflow server, or ours) and writes
one record per call: a label and what the user can observe of its result, with every id and
time replaced by a stable alias so that two servers' records compare equal when they behave
alike. An exception is recorded as its MLflow error code, so refusals compare too.

The parity test (``tests/web/test_mlflow_parity.py``) runs it against both and compares.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag, ViewType
from mlflow.exceptions import MlflowException

# Tags the client or the server fill with values of this machine and moment.
VOLATILE_TAGS = frozenset({"mlflow.log-model.history", "mlflow.source.git.commit"})


class Recorder:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.aliases: dict[str, str] = {}

    def alias(self, real: str, name: str) -> str:
        self.aliases[str(real)] = name
        return real

    def scrub(self, value: Any) -> Any:
        """Run ids → aliases (only where a run id is the whole value of a tag: MLflow's ids
        are 32 hex digits, ours are short numbers that would match unrelated values), floats
        → repr (NaN/±Inf compare), containers recursively."""
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in sorted(value.items())}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value

    def tags(self, tags: dict[str, str]) -> dict[str, str]:
        return {
            k: f"<{self.aliases[v]}>" if k == "mlflow.parentRunId" and v in self.aliases else v
            for k, v in tags.items()
            if k not in VOLATILE_TAGS
        }

    def call(self, label: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except MlflowException as exc:
            # the message is kept for reading a mismatch, never compared
            self.records.append(
                {"label": label, "error": exc.error_code, "message": str(exc)[:500]}
            )
            return None
        except Exception as exc:  # a client-side failure (e.g. an unexpected answer)
            self.records.append(
                {"label": label, "error": type(exc).__name__, "message": str(exc)[:500]}
            )
            return None
        self.records.append({"label": label, "result": self.scrub(view(result, self))})
        return result


def view(result: Any, rec: Recorder) -> Any:
    """What a user observes of a result, without times and generated ids."""
    if result is None or isinstance(result, str | int | float | bool):
        return result
    if isinstance(result, mlflow.entities.Experiment):
        return {
            "name": result.name,
            "lifecycle_stage": result.lifecycle_stage,
            "tags": {k: v for k, v in result.tags.items() if not k.startswith("mlflow.")},
        }
    if isinstance(result, mlflow.entities.Run):
        return {
            "run_name": result.info.run_name,
            "status": result.info.status,
            "lifecycle_stage": result.info.lifecycle_stage,
            "params": dict(result.data.params),
            "metrics": dict(result.data.metrics),
            "tags": rec.tags(result.data.tags),
            "inputs": sorted(
                d.dataset.name for d in (result.inputs.dataset_inputs if result.inputs else [])
            ),
        }
    if isinstance(result, Metric):
        return [result.key, result.value, result.step]
    if isinstance(result, mlflow.entities.FileInfo):
        return [result.path, result.is_dir, result.file_size]
    if isinstance(result, list | tuple):
        return [view(item, rec) for item in result]
    if isinstance(result, dict):
        return {str(k): view(v, rec) for k, v in result.items()}
    return repr(type(result).__name__)


def names(runs: list[Any]) -> list[str]:
    return [r.info.run_name for r in runs]


def main(out: Path) -> None:
    rec = Recorder()
    client = MlflowClient()
    work = Path(tempfile.mkdtemp(prefix="mlflow-script-"))

    # --- experiments -------------------------------------------------------------------
    rec.call(
        "search_experiments default",
        lambda: sorted(e.name for e in mlflow.search_experiments()),
    )
    # experiment ids are short numbers on either server: kept out of the records
    exp_a = client.create_experiment("parity-a", tags={"team": "vision"})
    rec.call("create_experiment a again", lambda: client.create_experiment("parity-a"))
    rec.call("get_experiment_by_name a", lambda: mlflow.get_experiment_by_name("parity-a"))
    rec.call("get_experiment_by_name missing", lambda: mlflow.get_experiment_by_name("nope"))
    rec.call("get_experiment a", lambda: client.get_experiment(exp_a))
    rec.call("set_experiment a", lambda: mlflow.set_experiment("parity-a").name)
    rec.call("set_experiment_tag", lambda: mlflow.set_experiment_tag("owner", "me"))
    rec.call("get_experiment a tagged", lambda: client.get_experiment(exp_a))
    rec.call("rename_experiment", lambda: client.rename_experiment(exp_a, "parity-a2"))
    rec.call("get_experiment renamed", lambda: client.get_experiment(exp_a))
    rec.call("get old name", lambda: mlflow.get_experiment_by_name("parity-a"))
    exp_b = client.create_experiment("parity-b")
    rec.call("delete_experiment b", lambda: client.delete_experiment(exp_b))
    rec.call("get_experiment b deleted", lambda: client.get_experiment(exp_b))
    rec.call(
        "search_experiments active",
        lambda: sorted(e.name for e in mlflow.search_experiments()),
    )
    rec.call(
        "search_experiments deleted",
        lambda: sorted(e.name for e in mlflow.search_experiments(view_type=ViewType.DELETED_ONLY)),
    )
    rec.call("restore_experiment b", lambda: client.restore_experiment(exp_b))
    rec.call("get_experiment b restored", lambda: client.get_experiment(exp_b))
    rec.call(
        "search_experiments by name",
        lambda: sorted(
            e.name for e in mlflow.search_experiments(filter_string="name LIKE 'parity%'")
        ),
    )

    # --- a parent run with everything a training script logs ---------------------------
    mlflow.set_experiment(experiment_id=exp_a)
    parent = mlflow.start_run(run_name="parent")
    parent_id = rec.alias(parent.info.run_id, "parent")
    rec.call("log_param lr", lambda: mlflow.log_param("lr", 0.01))
    rec.call("log_params", lambda: mlflow.log_params({"batch": 32, "optimizer.lr": "0.001"}))
    rec.call("log_param changed", lambda: mlflow.log_param("lr", 0.02))
    rec.call("set_tag", lambda: mlflow.set_tag("stage", "dev"))
    rec.call("set_tags", lambda: mlflow.set_tags({"owner": "me", "kind": "baseline"}))
    for step in range(10):
        rec.call(
            f"log_metric loss {step}",
            lambda s=step: mlflow.log_metric("loss", 1.0 / (s + 1), step=s),
        )
    for i in range(5):
        rec.call(f"log_metric acc no step {i}", lambda i=i: mlflow.log_metric("acc", 0.5 + i / 10))
    rec.call("log_metrics", lambda: mlflow.log_metrics({"lr_now": 0.01, "grad_norm": 3.5}, step=9))
    rec.call("log_metric val loss", lambda: mlflow.log_metric("val loss", 0.25, step=9))
    rec.call("log_metric val:acc", lambda: mlflow.log_metric("val:acc", 0.75, step=9))
    rec.call("log_metric nan", lambda: mlflow.log_metric("weird", math.nan, step=0))
    rec.call("log_metric inf", lambda: mlflow.log_metric("weird", math.inf, step=1))
    rec.call("log_metric -inf", lambda: mlflow.log_metric("weird", -math.inf, step=2))
    rec.call("log_metric bad key", lambda: mlflow.log_metric("bad/../key", 1.0))
    rec.call("log_text", lambda: mlflow.log_text("hello\n", "notes/hello.txt"))
    rec.call("log_dict", lambda: mlflow.log_dict({"a": 1, "b": [1, 2]}, "config.json"))
    data_file = work / "data.csv"
    data_file.write_text("x,y\n1,2\n3,4\n")
    rec.call("log_artifact", lambda: mlflow.log_artifact(str(data_file), "data"))
    rec.call(
        "log_input",
        lambda: mlflow.log_input(
            mlflow.data.from_numpy(__import__("numpy").arange(6.0).reshape(3, 2), name="toy"),
            context="training",
        ),
    )
    children: list[str] = []
    for i in range(3):
        with mlflow.start_run(run_name=f"child-{i}", nested=True) as child:
            children.append(rec.alias(child.info.run_id, f"child{i}"))
            rec.call(f"child {i} params", lambda i=i: mlflow.log_params({"lr": 10.0**-i, "i": i}))
            rec.call(f"child {i} metric", lambda i=i: mlflow.log_metric("loss", 1.0 - i / 4))
    mlflow.end_run()

    rec.call("get_run parent", lambda: client.get_run(parent_id))
    rec.call("history loss", lambda: client.get_metric_history(parent_id, "loss"))
    rec.call("history acc (no steps)", lambda: client.get_metric_history(parent_id, "acc"))
    rec.call("history weird", lambda: client.get_metric_history(parent_id, "weird"))
    rec.call("history val loss", lambda: client.get_metric_history(parent_id, "val loss"))
    rec.call("list_artifacts", lambda: client.list_artifacts(parent_id))
    rec.call("list_artifacts notes", lambda: client.list_artifacts(parent_id, "notes"))
    rec.call(
        "download_artifacts",
        lambda: Path(
            mlflow.artifacts.download_artifacts(run_id=parent_id, artifact_path="data/data.csv")
        ).read_text(),
    )
    rec.call(
        "load_dict",
        lambda: mlflow.artifacts.load_dict(f"runs:/{parent_id}/config.json"),
    )
    rec.call("load_text", lambda: mlflow.artifacts.load_text(f"runs:/{parent_id}/notes/hello.txt"))
    for i in range(3):
        rec.call(f"get_run child {i}", lambda i=i: client.get_run(children[i]))

    # --- search ------------------------------------------------------------------------
    def search(filter_string: str = "", order_by: list[str] | None = None) -> list[str]:
        runs = client.search_runs(
            [exp_a], filter_string=filter_string, order_by=order_by or ["attributes.run_name ASC"]
        )
        return names(runs)

    filters = [
        "",
        "metrics.loss < 0.5",
        "metrics.loss <= 0.5",
        "params.lr = '0.01'",
        "params.lr != '0.01'",
        "tags.stage = 'dev'",
        "attributes.status = 'FINISHED'",
        "run_name = 'child-1'",
        "attributes.run_name LIKE 'child%'",
        "run_name ILIKE 'CHILD-%'",
        "tags.mlflow.parentRunId = '{parent}'",
        "params.i IN ('0', '2')",
        "metrics.`val loss` > 0",
        "metrics.loss >= 0 and params.lr = '0.01'",
        "params.batch = '32' AND tags.kind = 'baseline'",
    ]
    for f in filters:
        rec.call(f"search_runs filter {f!r}", lambda f=f: search(f.format(parent=parent_id)))
    rec.call("search_runs bad filter", lambda: search("metrics.loss <<< 3"))
    for order in (["metrics.loss ASC"], ["metrics.loss DESC"], ["params.lr DESC"]):
        rec.call(f"search_runs order {order}", lambda o=order: search("", o))
    pages: list[Any] = []

    def first_page() -> list[str]:
        pages.append(client.search_runs([exp_a], max_results=2, order_by=["run_name ASC"]))
        return names(pages[0])

    rec.call("search_runs page 1", first_page)
    rec.call(
        "search_runs page 2",
        lambda: names(
            client.search_runs(
                [exp_a], max_results=2, order_by=["run_name ASC"], page_token=pages[0].token
            )
        ),
    )
    rec.call(
        "fluent search_runs",
        lambda: sorted(
            mlflow.search_runs([exp_a], filter_string="params.i = '1'", output_format="list")[
                0
            ].data.params.items()
        ),
    )

    # --- delete / restore ---------------------------------------------------------------
    rec.call("delete_run child 2", lambda: client.delete_run(children[2]))
    rec.call("get_run deleted", lambda: client.get_run(children[2]).info.lifecycle_stage)
    rec.call("search_runs after delete", lambda: search())
    rec.call(
        "search_runs deleted only",
        lambda: names(client.search_runs([exp_a], run_view_type=ViewType.DELETED_ONLY)),
    )
    rec.call(
        "search_runs all",
        lambda: sorted(names(client.search_runs([exp_a], run_view_type=ViewType.ALL))),
    )
    rec.call("restore_run child 2", lambda: client.restore_run(children[2]))
    rec.call("search_runs after restore", lambda: search())

    # --- the low-level client -----------------------------------------------------------
    created = rec.call(
        "create_run",
        lambda: client.create_run(exp_b, run_name="manual", tags={"source": "client"}),
    )
    manual = rec.alias(created.info.run_id, "manual") if created else "missing"
    rec.call(
        "log_batch",
        lambda: client.log_batch(
            manual,
            metrics=[Metric("m", float(i), 0, i) for i in range(4)],
            params=[Param("p", "1"), Param("q", "two")],
            tags=[RunTag("t", "x"), RunTag("u", "y")],
        ),
    )
    rec.call("delete_tag", lambda: client.delete_tag(manual, "u"))
    rec.call("update_run name", lambda: client.update_run(manual, name="manual-renamed"))
    rec.call("set_terminated failed", lambda: client.set_terminated(manual, status="FAILED"))
    rec.call("get_run manual", lambda: client.get_run(manual))
    rec.call("get_run missing", lambda: client.get_run("0" * 32))
    rec.call("log_param on missing run", lambda: client.log_param("0" * 32, "a", "b"))
    rec.call("delete_tag missing", lambda: client.delete_tag(manual, "never-set"))

    # --- models -------------------------------------------------------------------------
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    x = torch.ones(1, 2)
    with mlflow.start_run(experiment_id=exp_b, run_name="with-model") as run:
        rec.alias(run.info.run_id, "with_model")
        info = rec.call(
            "pytorch.log_model",
            lambda: mlflow.pytorch.log_model(model, name="model", input_example=x.numpy()),
        )

    def load_back() -> bool:
        if info is None:
            raise RuntimeError("log_model failed")
        return bool(mlflow.pytorch.load_model(info.model_uri)(x).item() == model(x).item())

    rec.call("pytorch.load_model", load_back)
    rec.call(
        "search_logged_models",
        lambda: [
            m.name
            for m in mlflow.search_logged_models(experiment_ids=[exp_b], output_format="list")
        ],
    )
    rec.call("get_run with-model", lambda: client.get_run(run.info.run_id).info.status)

    out.write_text(json.dumps(rec.records, indent=1, sort_keys=True))


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    main(Path(sys.argv[1]))
