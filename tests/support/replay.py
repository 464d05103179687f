"""The spill files a run's messages tell the user to replay."""

from __future__ import annotations

import re
import shlex

REPLAY = re.compile(r"`tracker db replay ([^`]+)`")


def named_spill_files(text: str) -> list[str]:
    """Every file that ``tracker db replay`` commands in ``text`` name, once each, in the
    order said (a command names one or more paths, each quoted for a shell)."""
    return list(dict.fromkeys(f for command in REPLAY.findall(text) for f in shlex.split(command)))
