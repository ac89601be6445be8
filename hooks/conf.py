"""Settings of the `hooks` app, read from the environment with working defaults.

Read at call time (not import time) where tests need to change them per process.
"""

from __future__ import annotations

import os

from common.env import env_int, env_str

# Replay ring size (spec: newest ~1024 events).
RING_SIZE = 1024
# seq high-water mark is persisted in blocks of this many: one fsync per block, and after a
# restart seq resumes above everything that may have been handed out.
SEQ_BLOCK = 1024
# Concurrent SSE streams per web process (HOST_WEB_PROCESSES of them); beyond it 503. Per
# process on purpose: the cap bounds the fan-out work of one event loop, and a host-wide count
# would have to outlive a process killed with its streams open.
SSE_MAX_STREAMS = env_int("HOST_SSE_MAX_STREAMS", 32)
# Live events buffered per SSE stream before the consumer counts as too slow and is cut off.
SSE_QUEUE_DEPTH = env_int("HOST_SSE_QUEUE_DEPTH", 256)
# Unsent bytes the transport may hold for one SSE stream before the consumer counts as too slow.
SSE_MAX_UNSENT_BYTES = env_int("HOST_SSE_MAX_UNSENT_BYTES", 1024 * 1024)
# Hook firings in flight across the host; extra firings are dropped.
HOOKS_MAX_IN_FLIGHT = 8
HOOK_TIMEOUT_DEFAULT_S = 30
# Celery queue served by the dedicated threads worker (hook commands and webhooks).
HOOKS_QUEUE = "hooks"
HOOKS_WORKER_CONCURRENCY = env_int("HOST_HOOKS_WORKER_CONCURRENCY", 12)
# Hook webhook POST timeout (seconds).
WEBHOOK_TIMEOUT_S = 10
# Admin API stream webhooks: timeout and retries (spec: 5 s, 2 retries with backoff).
STREAM_WEBHOOK_TIMEOUT_S = 5
STREAM_WEBHOOK_RETRIES = 2
# Delivery records older than this are pruned.
DELIVERY_RETENTION_DAYS = env_int("HOST_DELIVERY_RETENTION_DAYS", 14)
# Largest hooks.json / PUT /hooks document accepted.
HOOKS_DOC_MAX_BYTES = 256 * 1024


def _env_seconds(name: str, default: float, low: float, high: float) -> float:
    """A number of seconds from the environment, clamped; the default when unset or not a number."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = default
    return min(max(value, low), high)


def keepalive_s() -> float:
    """SSE keep-alive interval (spec: 15 s); tests shorten it with HOST_SSE_KEEPALIVE_S."""
    return _env_seconds("HOST_SSE_KEEPALIVE_S", 15.0, 0.05, 3600.0)


def stopping_hooks_grace_s() -> float:
    """How long the supervisor lets `host.stopping` hooks run before it stops the workers
    (HOST_STOPPING_HOOKS_GRACE_S, default 15 s: a webhook's 10 s timeout plus a margin)."""
    return _env_seconds("HOST_STOPPING_HOOKS_GRACE_S", 15.0, 0.0, 600.0)


def events_buffer_max() -> int:
    """Events one process keeps while Redis is away (HOST_EVENTS_BUFFER_MAX, 1-1000000, default
    4096); past it newer events are dropped and subscribers get `dropped`."""
    raw = os.environ.get("HOST_EVENTS_BUFFER_MAX", "").strip()
    try:
        value = int(raw) if raw else 4096
    except ValueError:
        value = 4096
    return min(max(value, 1), 1_000_000)


def on_connect_cmd() -> str:
    return env_str("HOST_ON_CONNECT_CMD", "").strip()


def on_disconnect_cmd() -> str:
    return env_str("HOST_ON_DISCONNECT_CMD", "").strip()


def webhook_ca_bundle() -> str:
    """Extra CA bundle the webhook senders trust beside the system store (private CAs)."""
    return env_str("HOST_WEBHOOK_CA_BUNDLE", "").strip()


def events_prefix() -> str:
    """Redis key prefix of the bus; one private Redis per host, so a constant suffices."""
    return env_str("HOST_EVENTS_PREFIX", "hostmgmt:events")
