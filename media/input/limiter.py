"""A token bucket for input floods.

A client (or an attacker with the session key) can send thousands of input events a second.
X copes, but the game and the session loop should not drown, so presses, moves and scrolls
beyond `rate` a second (after a `burst`) are dropped. Releases are never limited: dropping a
key-up is exactly how keys get stuck.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    def __init__(
        self,
        rate: float = 1000.0,
        burst: float = 200.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rate = float(rate)
        self.burst = float(burst)
        self._clock = clock
        self._tokens = self.burst
        self._last = clock()
        self.dropped = 0

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        self.dropped += 1
        return False
