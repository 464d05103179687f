"""A sweep's trial written for MLflow, unchanged: params from the job's config
(``TRACKER_CONFIG``, the JSON every job gets), then only ``mlflow`` calls --
``start_run``, ``log_param``, ``log_metric("val_loss", v, step=s)``. It never names a run:
the job's environment decides where it logs. Writes ``<out>/<job id>.json`` with the run
MLflow logged to and the last value, for the test to compare."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import mlflow


def main() -> None:
    out = Path(sys.argv[1])
    config = json.loads(os.environ.get("TRACKER_CONFIG") or "{}")
    lr, width = float(config["lr"]), int(config["width"])
    with mlflow.start_run() as run:
        mlflow.log_param("lr", lr)
        mlflow.log_param("width", width)
        value = math.nan
        for step in range(4):
            value = abs(math.log10(lr) + 2.0) + 64 / width + 1.0 / (step + 1)
            mlflow.log_metric("val_loss", value, step=step)
        report = {"run_id": run.info.run_id, "last": value}
    job = os.environ.get("TRACKER_JOB_ID", "by-hand")
    (out / f"{job}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
