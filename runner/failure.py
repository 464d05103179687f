"""The failure classifier, re-exported: it lives in :mod:`tracker.rules.failure`.

It moved there so that the client can classify a run started by hand (on its captured
console output) without importing the runner; the worker and the retry policy keep importing
it from here.
"""

from __future__ import annotations

from tracker.rules.failure import *  # noqa: F403
from tracker.rules.failure import __all__ as __all__
