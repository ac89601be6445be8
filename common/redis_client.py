"""The one way any process of the host reaches its Redis.

Why one module: the event bus, the hook dispatcher, the SSE view, the compat session record,
the native plane's registry, pending queue and rate limits, and the preflight check all talk to
the same server. One URL source (`settings.REDIS_URL`), one sync client per process and one set
of timeouts keep them from disagreeing about where Redis is or how long to wait for it.

- `client()`: the process's sync client. Made on first use and made again after a fork (a
  Celery prefork child must not share its parent's sockets) or when `settings.REDIS_URL`
  changes (a test pointing the host at its own server). Thread-safe; redis-py pools
  connections per client.
- `async_client()`: a new asyncio client for the caller to own and close. Asyncio connections
  belong to the event loop that opened them, so there is no process-wide one; the SSE hub,
  the only async user, keeps one per subscription.
"""

from __future__ import annotations

import os
import threading

import redis
import redis.asyncio
from django.conf import settings

# A local server answers in microseconds; these only bound how long a caller (an event emit
# included) hangs on a Redis that is wedged or unreachable. The read timeout stays above the
# 1 s server-side wait of the blocking pops (streaming.services.wait_report).
CONNECT_TIMEOUT_S = 1.0
SOCKET_TIMEOUT_S = 2.0

_lock = threading.Lock()
# ((pid, url), client): swapped as one tuple so a reader never pairs one client with another's key
_current: tuple[tuple[int, str], redis.Redis] | None = None


def url() -> str:
    """The host's Redis URL (the private unix socket unless REDIS_URL is set)."""
    return settings.REDIS_URL


def client() -> redis.Redis:
    """This process's sync client (see the module doc for when it is remade)."""
    global _current
    key = (os.getpid(), url())
    current = _current
    if current is None or current[0] != key:
        with _lock:
            current = _current
            if current is None or current[0] != key:
                made = redis.Redis.from_url(
                    key[1],
                    socket_timeout=SOCKET_TIMEOUT_S,
                    socket_connect_timeout=CONNECT_TIMEOUT_S,
                )
                current = _current = (key, made)
    return current[1]


def async_client(*, socket_timeout: float | None = None) -> redis.asyncio.Redis:
    """A new asyncio client on the host's Redis; the caller closes it (`await c.aclose()`).

    No read timeout by default: a subscriber waits for messages for as long as there are none.
    """
    return redis.asyncio.Redis.from_url(
        url(), socket_timeout=socket_timeout, socket_connect_timeout=CONNECT_TIMEOUT_S
    )


def ping(other_url: str | None = None) -> None:
    """Raise when Redis does not answer (a redis or OS error); for checks and start-up waits.

    `other_url`: a server that is not (yet) the host's, e.g. one just started; its one-off
    connection is closed again.
    """
    if other_url is None:
        client().ping()
        return
    with redis.Redis.from_url(
        other_url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=CONNECT_TIMEOUT_S
    ) as one_off:
        one_off.ping()
