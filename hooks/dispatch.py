"""Deciding, at emit time, which hooks an event fires, and handing the firings to Celery.

Why decide in the emitting process: the in-flight cap must drop extra firings rather than queue
them, so the permit is taken before anything is queued. Matching is a pure function over the
cached hook document; debounce and the permits live in Redis so every process shares them.
The semaphore is a sorted set of leases (expiry as score): a worker that crashes mid-firing
cannot leak a permit for longer than the firing's timeout plus a margin.
Every function that touches Redis takes the client from its caller (the bus, the hook worker):
this module sits below `hooks.events` and never imports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid

from hooks import conf, event_kinds, hook_config

log = logging.getLogger("hooks.dispatch")

LEASE_MARGIN_S = 60
PERMITS_KEY_SUFFIX = ":hooks:inflight"
DEBOUNCE_KEY_SUFFIX = ":hooks:debounce:"

# KEYS: the lease set. ARGV: now_ms, expiry_ms, limit, token.
_ACQUIRE_LUA = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
return 1
"""

_scripts: dict[int, object] = {}


def _permits_key() -> str:
    return conf.events_prefix() + PERMITS_KEY_SUFFIX


# -- matching --------------------------------------------------------------------------------


def _event_values(event: dict, name: str) -> list[str] | None:
    """The values of filter field `name` that this event carries, or None if its kind lacks it."""
    kind = event.get("kind", "")
    domain = kind.split(".", 1)[0]
    obj = event.get(domain) if isinstance(event.get(domain), dict) else {}
    if name == "client":
        if domain in ("client", "session", "stream", "game"):
            key = "name" if domain == "client" else "client"
            return [obj[key]] if key in obj else None
        if domain == "pairing":
            dev = event.get("device") or {}
            return [dev["name"]] if "name" in dev else None
        return None
    if name == "fingerprint":
        src = event.get("device") if domain == "pairing" else obj if domain == "client" else None
        if not src or "fingerprint" not in src:
            return None
        return [str(src["fingerprint"]).lower()]
    if name == "plane":
        if domain == "pairing":
            obj = event.get("device") or {}
        if domain in ("client", "stream", "game", "pairing") and "plane" in obj:
            return [obj["plane"]]
        return None
    if name == "app":
        if domain == "stream" and "app" in obj:
            return [obj["app"]]
        if domain == "game":
            if "app" in obj:
                return [obj["app"]]
            return [obj["title"]] if "title" in obj else None
    return None


def matches(entry: dict, event: dict) -> bool:
    if not event_kinds.pattern_matches(entry["on"].strip(), event.get("kind", "")):
        return False
    for name, wanted in (entry.get("filter") or {}).items():
        values = _event_values(event, name)
        if values is None:
            return False
        if name == "fingerprint":
            wanted = wanted.lower()
        if wanted not in [str(v) for v in values]:
            return False
    return True


def entry_key(entry: dict) -> str:
    """Debounce identity: the entry's content, so an identical PUT keeps the debounce state."""
    canonical = json.dumps(entry, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


# -- shared state in Redis -------------------------------------------------------------------


def debounced(client, entry: dict) -> bool:
    """True when this entry fired less than debounce_ms ago (leading edge: first one fires)."""
    window = int(entry.get("debounce_ms") or 0)
    if window <= 0:
        return False
    key = conf.events_prefix() + DEBOUNCE_KEY_SUFFIX + entry_key(entry)
    return not client.set(key, b"1", px=window, nx=True)


def acquire_permit(client, timeout_s: float) -> str | None:
    script = _scripts.get(id(client))
    if script is None:
        script = _scripts[id(client)] = client.register_script(_ACQUIRE_LUA)
    now_ms = int(time.time() * 1000)
    token = uuid.uuid4().hex
    expiry = now_ms + int((timeout_s + LEASE_MARGIN_S) * 1000)
    ok = script(
        keys=[_permits_key()], args=[now_ms, expiry, conf.HOOKS_MAX_IN_FLIGHT, token], client=client
    )
    return token if int(ok) == 1 else None


def release_permit(token: str | None, client) -> None:
    if not token:
        return
    try:
        client.zrem(_permits_key(), token)
    except Exception:  # the lease expires on its own
        log.warning("could not release a hook permit; it expires with its lease")


def in_flight(client) -> int:
    now_ms = int(time.time() * 1000)
    return int(client.zcount(_permits_key(), now_ms, "+inf"))


# -- scheduling ------------------------------------------------------------------------------


def actions_for(event: dict) -> list[tuple[str, dict]]:
    """(action, entry) pairs the event fires, before debounce and the cap."""
    snapshot = hook_config.current()
    entries = list(snapshot.entries) + hook_config.builtin_entries()
    out = []
    for entry in entries:
        if not matches(entry, event):
            continue
        if entry.get("run"):
            out.append(("run", entry))
        if entry.get("webhook"):
            out.append(("webhook", entry))
    return out


def schedule(event: dict, client) -> list[str]:
    """Queue every firing this event causes; called by `events.emit` after publishing.

    Returns the permits of the firings it queued: each is released when its firing is done, so
    a caller that must know (the supervisor at shutdown) can wait for them (`wait_released`).
    """
    pairs = actions_for(event)
    queued: list[str] = []
    if not pairs:
        return queued
    seen_entries: dict[int, bool] = {}
    for action, entry in pairs:
        # One debounce decision per entry, shared by its run and webhook.
        if id(entry) not in seen_entries:
            seen_entries[id(entry)] = debounced(client, entry)
        if seen_entries[id(entry)]:
            continue
        timeout = int(entry.get("timeout_s") or conf.HOOK_TIMEOUT_DEFAULT_S)
        token = acquire_permit(client, timeout)
        if token is None:
            log.warning(
                "hook %s for %s #%s dropped: %d firings already in flight",
                action,
                event.get("kind"),
                event.get("seq"),
                conf.HOOKS_MAX_IN_FLIGHT,
            )
            _send("hooks.record_drop", [event, action, entry])
            continue
        if _send("hooks.fire", [event, action, entry, token]):
            queued.append(token)
        else:
            release_permit(token, client)
    return queued


def pending(tokens: list[str], client) -> list[str]:
    """The permits of `tokens` still held (their firings have not finished)."""
    if not tokens:
        return []
    pipe = client.pipeline(transaction=False)
    for token in tokens:
        pipe.zscore(_permits_key(), token)
    return [t for t, score in zip(tokens, pipe.execute(), strict=True) if score is not None]


def wait_released(
    tokens: list[str], timeout_s: float, client, *, abort=None, poll_s: float = 0.05
) -> list[str]:
    """Wait until the firings holding `tokens` are done, at most `timeout_s` (or until `abort()`
    says stop). Returns the permits still held then (empty: everything finished). Never raises:
    with Redis gone there is nothing left to wait on.
    """
    deadline = time.monotonic() + max(0.0, timeout_s)
    left = list(tokens)
    try:
        while left:
            left = pending(left, client)
            if not left or time.monotonic() >= deadline or (abort is not None and abort()):
                break
            time.sleep(poll_s)
    except Exception as exc:  # Redis gone: nothing to wait on any more
        log.warning("could not watch hook firings (%s)", exc.__class__.__name__)
    return left


def queue_firing(event: dict, action: str, entry: dict, client) -> str | None:
    """Queue one firing outside matching (the console's test-fire): the permit it holds, or
    None when the cap is full or the broker is down (nothing queued, nothing held)."""
    timeout = int(entry.get("timeout_s") or conf.HOOK_TIMEOUT_DEFAULT_S)
    token = acquire_permit(client, timeout)
    if token is None:
        return None
    if _send("hooks.fire", [event, action, entry, token]):
        return token
    release_permit(token, client)
    return None


def _send(name: str, args: list) -> bool:
    try:
        from hostmgmt.celery import app  # the wiring's, a layer above: lazy (pyproject.toml)

        app.send_task(name, args=args, queue=conf.HOOKS_QUEUE, retry=False)
        return True
    except Exception as exc:  # broker down: the firing is lost, say so once
        log.warning("could not queue %s (%s)", name, exc.__class__.__name__)
        return False
