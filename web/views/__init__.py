"""Views: each parses its input (``plumbing.params``), makes one store call and serializes
the result. ``runs`` (runs, metrics, files, ingest, clone), ``queue`` (jobs, workers,
schedules), ``sweeps`` (sweeps that learn), ``mlflow`` (the MLflow-compatible REST subset),
``pages`` (HTML)."""
