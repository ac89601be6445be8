"""Login-failure buckets per client IP: 10 failures within 30 s block that IP (429).

One bucket per address for every place that checks a credential: HTTP Basic and scoped tokens
on the admin API, the console login, the Django admin login, the /pin page and the current
password of /api/password. Failures of any of them count; only a correct admin PASSWORD
clears the bucket (a token holder must not be able to reset it between password guesses).
"""

from __future__ import annotations

import threading
import time
from collections import deque

MAX_FAILURES = 10
WINDOW_S = 30.0

_buckets: dict[str, deque[float]] = {}
_lock = threading.Lock()


def _trim(bucket: deque[float], now: float) -> None:
    while bucket and now - bucket[0] > WINDOW_S:
        bucket.popleft()


def blocked_for(ip: str) -> float:
    """Seconds until `ip` may try again, 0 when it is not blocked."""
    now = time.monotonic()
    with _lock:
        bucket = _buckets.get(ip)
        if not bucket:
            return 0.0
        _trim(bucket, now)
        if len(bucket) < MAX_FAILURES:
            return 0.0
        return max(0.0, WINDOW_S - (now - bucket[0]))


def record_failure(ip: str) -> None:
    now = time.monotonic()
    with _lock:
        if len(_buckets) > 10000:  # a flood of spoofed sources must not grow memory forever
            for key in [k for k, b in _buckets.items() if not b or now - b[-1] > WINDOW_S]:
                del _buckets[key]
        bucket = _buckets.setdefault(ip, deque(maxlen=MAX_FAILURES * 2))
        _trim(bucket, now)
        bucket.append(now)


def record_success(ip: str) -> None:
    """A correct admin password from `ip`: forget its failures. Not for other credentials."""
    with _lock:
        _buckets.pop(ip, None)


def reset() -> None:
    with _lock:
        _buckets.clear()
