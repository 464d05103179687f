"""The dashboard's cores below HTTP: no Flask here. ``mlflow_compat`` maps MLflow's
requests and answers onto runs (pure); ``ingest`` checks the ingest API's bodies and turns
metric batches into point rows for the store."""
