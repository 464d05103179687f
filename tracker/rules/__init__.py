"""Pure rules every package shares: inputs in, values out, no I/O, the clock passed in.

keys (metric keys), config (normalize, merge, flatten), config_diff, tags (the tag rule),
units (durations and byte sizes), jsonvalues (NaN and ±Inf in JSON), cron (crontab fire
times), sweep (``-c`` override and sweep grammar, set a dotted path), query (the run-search
language), downsample (chart buckets that keep min, max and last), health (training-health
detectors). The client, the store, the runner, the dashboard and the CLI import these;
nothing here imports them back (an import contract checks it).
"""
