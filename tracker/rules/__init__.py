"""Pure rules every package shares: inputs in, values out, no I/O, the clock passed in.

keys (metric keys), config (normalize, merge, flatten, set a dotted path), config_diff,
cron (crontab fire times), sweep (``-c`` override and sweep grammar, durations), query
(the run-search language), downsample (chart buckets that keep min, max and last), health
(training-health detectors). The client, the store, the runner, the dashboard and the CLI
import these; nothing here imports them back (an import contract checks it).
"""
