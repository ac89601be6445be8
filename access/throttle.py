"""Login-failure buckets per client IP: 10 failures within 30 s block that IP (429).

One bucket per address for every place that checks a credential: HTTP Basic and scoped tokens
on the admin API, the console login, the Django admin login, the /pin page and the current
password of /api/password. Failures of any of them count; only a correct admin PASSWORD
clears the bucket (a token holder must not be able to reset it between password guesses).

The buckets live in the host's Redis, not in a process: daphne, the workers and a restarted
host all count against the same limit. One sorted set per address (member: one failure, score:
Redis' clock), under the host's unique id, so two hosts sharing a Redis keep apart. Each check
and each failure is one Lua script, one round trip, atomic; a success deletes the bucket only
when this thread's last check of that address found failures in it, so a clean login costs one
round trip. The key holds the address only.

When Redis cannot be reached the limit cannot be checked, so the check raises
`ThrottleUnavailable` (503 with `Retry-After`): logins are refused until Redis is back
(**fail closed**), rather than letting guesses go uncounted.
"""

from __future__ import annotations

import logging
import secrets
import threading

import redis

from access import identity
from common import redis_client
from common.errors import DomainError

log = logging.getLogger(__name__)

MAX_FAILURES = 10
WINDOW_S = 30.0
RETRY_UNAVAILABLE_S = 5
# Failures kept per address beyond the limit: callers stop recording once blocked, so this only
# bounds what concurrent failures of one address can add.
KEEP = MAX_FAILURES * 2
MAX_ADDRESS = 64

# KEYS[1] bucket; ARGV[1] window ms, ARGV[2] limit. Returns {ms until the address may try
# again, failures in the window}.
_CHECK = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local since = now - tonumber(ARGV[1])
local n = redis.call('ZCOUNT', KEYS[1], '(' .. since, '+inf')
local limit = tonumber(ARGV[2])
if n < limit then return {0, n} end
local nth = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. since, '+inf', 'WITHSCORES',
                       'LIMIT', n - limit, 1)
return {math.max(0, tonumber(nth[2]) - since), n}
"""

# KEYS[1] bucket; ARGV[1] window ms, ARGV[2] entries kept, ARGV[3] a unique member.
_FAIL = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[2]) + 1))
redis.call('PEXPIRE', KEYS[1], window)
return 1
"""


class ThrottleUnavailable(DomainError):
    """Redis does not answer, so a login cannot be counted: refused, not let through."""

    status = 503

    def __init__(self):
        super().__init__(
            "logins are refused while the host's Redis is unreachable "
            "(failed logins cannot be counted); try again shortly",
            retry_after=RETRY_UNAVAILABLE_S,
        )


def _prefix() -> str:
    return f"hostmgmt:{identity.unique_id()}:login-failures:"


def _key(ip: str) -> str:
    return _prefix() + (str(ip)[:MAX_ADDRESS] or "unknown")


_scripts: dict[str, redis.commands.core.Script] = {}
_last_check = threading.local()  # {address: failures its last check saw}, per thread


def _run(script: str, ip: str, *args):
    client = redis_client.client()
    try:
        if script not in _scripts:
            _scripts[script] = client.register_script(script)  # its sha, computed once
        return _scripts[script](keys=[_key(ip)], args=list(args), client=client)
    except (redis.RedisError, OSError) as exc:
        log.error("login throttle unavailable, refusing logins: %s", type(exc).__name__)
        raise ThrottleUnavailable() from None


def blocked_for(ip: str) -> float:
    """Seconds until `ip` may try again, 0 when it is not blocked."""
    wait_ms, failures = _run(_CHECK, ip, int(WINDOW_S * 1000), MAX_FAILURES)
    _last_check.seen = {ip: int(failures)}
    return int(wait_ms) / 1000.0


def record_failure(ip: str) -> None:
    _run(_FAIL, ip, int(WINDOW_S * 1000), KEEP, secrets.token_hex(8))


def record_success(ip: str) -> None:
    """A correct admin password from `ip`: forget its failures. Not for other credentials.
    Skipped when this thread's check just before found none (a failure another process adds
    meanwhile is kept, as if it came after)."""
    if getattr(_last_check, "seen", {}).get(ip) == 0:
        return
    try:
        redis_client.client().delete(_key(ip))
    except (redis.RedisError, OSError) as exc:
        log.error("login throttle unavailable, refusing logins: %s", type(exc).__name__)
        raise ThrottleUnavailable() from None


def reset() -> None:
    """Forget every address's failures on this host. An unreachable Redis holds no bucket to
    forget (and every check refuses until it is back), so that is not an error here."""
    try:
        client = redis_client.client()
        keys = list(client.scan_iter(match=_prefix() + "*", count=500))
        if keys:
            client.delete(*keys)
    except (redis.RedisError, OSError):
        return
