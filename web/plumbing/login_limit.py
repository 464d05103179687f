"""Wrong access tokens, counted per client address: past a limit the address must wait.

An access token that a person chose can be guessed by trying; this makes guessing slow.
Each wrong token (a ``Bearer`` header or the sign-in form) is remembered for
``window_s`` seconds; an address with ``max_failures`` of them in the window gets
429 Too Many Requests, with ``Retry-After``, for every wrong token until the oldest one
leaves the window. A valid token is not refused (``auth.check_token``): stored tokens are
256 random bits and a strong configured token cannot be guessed either, so blocking them
would only let anyone on the host lock out every training host; a weak configured token
(allowed on loopback only) waits like a wrong one, so guessing it stays slow. A right
token does not reset the count: behind one NAT or proxy, a training process sending the
right token every second would otherwise give a guesser unlimited tries. Requests without
a token (and the session cookie, an HMAC nobody can guess) are not counted.

Counts live in the process (each gunicorn worker keeps its own), bounded to
``max_clients`` addresses (the least recently failing are forgotten first). Behind a
reverse proxy every request comes from the proxy's address, so the limit is then shared.
The clock is an argument (``now``; the server passes ``clock()``), so the rules are
tested without waiting.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

__all__ = ["FailureLimit"]


class FailureLimit:
    """Remembers wrong tokens per client address and says how long one must wait."""

    def __init__(
        self,
        max_failures: int = 10,
        window_s: float = 300.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_failures < 1 or window_s <= 0 or max_clients < 1:
            raise ValueError("max_failures, window_s and max_clients must be positive")
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_clients = max_clients
        self.clock = clock  # what the server passes as ``now``
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()  # gunicorn runs requests on several threads

    def retry_after(self, client: str, now: float) -> int | None:
        """Whole seconds ``client`` must wait before trying again, or None when it may."""
        with self._lock:
            times = self._recent(client, now)
            if times is None or len(times) < self.max_failures:
                return None
            oldest = times[-self.max_failures]
            return max(1, math.ceil(oldest + self.window_s - now))

    def failed(self, client: str, now: float) -> None:
        """Count a wrong token from ``client``."""
        with self._lock:
            times = self._recent(client, now)
            if times is None:
                times = self._failures[client] = deque(maxlen=self.max_failures)
            times.append(now)
            self._failures.move_to_end(client)
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)

    def _recent(self, client: str, now: float) -> deque[float] | None:
        times = self._failures.get(client)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times
