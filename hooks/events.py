"""The lifecycle event bus: `emit(kind, payload)` is the one way any process announces an event.

Design (why it looks like this):
- Every process of the host (daphne, Celery workers, the supervisor, plane listeners) emits, so
  the bus state lives in the host's Redis: a counter for `seq`, a list for the replay ring and a
  pub/sub channel for live fan-out. One Lua script increments, appends, trims and publishes
  atomically, so ring order == seq order == publish order; an SSE reader that subscribes first
  and then reads the ring sees every event exactly once.
- The private Redis has no persistence and is wiped at every restart, yet `seq` must never be
  reused. The script refuses to hand out a seq above a "reserved" mark; a process that hits the
  mark persists a new high-water mark (file in the state dir, atomic write under flock) one
  block ahead and raises the mark. After a restart the counter resumes at the persisted mark, so
  seq may jump forward but never goes back. One fsync per SEQ_BLOCK events.
- `emit` never raises into its caller and never waits on a consumer. While Redis is away the
  event is kept in this process's outbox (`hooks/outbox.py`: bounded, in order, spooled to
  disk) and delivered, seq stamped then, when Redis is back; past the bound subscribers get a
  `dropped` marker in the order instead.
- Inside a database transaction the event is stamped and published only after commit.
"""

from __future__ import annotations

import fcntl
import json
import logging
import threading
import time
from functools import partial

from common import redis_client
from common.files import atomic_write
from common.statedir import EVENTS_SEQ_FILE, state_path
from hooks import conf, dispatch, outbox
from hooks.event_kinds import KINDS, RESERVED_KEYS, SCHEMA_VERSION

log = logging.getLogger("hooks.events")

SEQ_FILE = EVENTS_SEQ_FILE

# KEYS: seq, reserved, ring, kept-event id key.  ARGV: doc prefix, doc suffix, ring size,
# channel, kept-event id ('' for a direct emit).
# Returns {seq, doc}, {0, current seq, reserved} when a reservation is needed first, or {-1}
# when this kept event was delivered before (a crash between delivery and its `done` line).
_EMIT_LUA = """
local reserved = tonumber(redis.call('GET', KEYS[2]) or '-1')
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
if reserved < 0 or cur < 0 or cur + 1 > reserved then
  return {0, cur, reserved}
end
if ARGV[5] ~= '' and not redis.call('SET', KEYS[4], '1', 'NX', 'EX', 86400) then
  return {-1}
end
local seq = redis.call('INCR', KEYS[1])
local doc = ARGV[1] .. string.format('%d', seq) .. ARGV[2]
redis.call('RPUSH', KEYS[3], doc)
redis.call('LTRIM', KEYS[3], -tonumber(ARGV[3]), -1)
redis.call('PUBLISH', ARGV[4], doc)
return {seq, doc}
"""

# KEYS: seq, reserved, base.  ARGV: persisted mark before this reservation, new mark.
# `base` records where the counter of this Redis run started: every seq at or below it belongs
# to an earlier run (the SSE view tells a restart from a gap with it).
_RESERVE_LUA = """
if redis.call('SETNX', KEYS[1], ARGV[1]) == 1 then redis.call('SET', KEYS[3], ARGV[1]) end
local reserved = tonumber(redis.call('GET', KEYS[2]) or '-1')
if tonumber(ARGV[2]) > reserved then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
"""


def keys() -> dict[str, str]:
    prefix = conf.events_prefix()
    return {
        "seq": f"{prefix}:seq",
        "reserved": f"{prefix}:reserved",
        "ring": f"{prefix}:ring",
        "channel": f"{prefix}:live",
        "base": f"{prefix}:base",
        "kept": f"{prefix}:kept:",
    }


class _Bus:
    """The bus's Lua scripts over the host's one Redis client."""

    def __init__(self):
        self.lock = threading.Lock()
        self.scripts = None  # (client, emit script, reserve script)

    def get(self):
        return redis_client.client()

    def script(self, client, which: str):
        scripts = self.scripts
        if scripts is None or scripts[0] is not client:
            with self.lock:
                scripts = (
                    client,
                    client.register_script(_EMIT_LUA),
                    client.register_script(_RESERVE_LUA),
                )
                self.scripts = scripts
        return scripts[1] if which == "emit" else scripts[2]


_bus = _Bus()


def emit(kind: str, payload: dict | None = None) -> None:
    """Announce a lifecycle event. Returns at once; never raises.

    Inside an atomic block the event goes out only when the transaction commits (and not at all
    on rollback). The payload is serialized now, so later mutation by the caller has no effect.
    """
    try:
        if kind not in KINDS:
            log.error("event bus: refusing unknown event kind %r", kind)
            return
        body = _payload_json(kind, payload or {})
        try:
            # optional: a process without Django's database emits at once (the except below)
            from django.db import connection, transaction

            in_atomic = connection.in_atomic_block
        except Exception:  # no Django DB here: emit now
            in_atomic = False
        if in_atomic:
            transaction.on_commit(partial(_emit_now, kind, body), robust=True)
        else:
            _emit_now(kind, body)
    except Exception:  # the caller's work must never fail because of the bus
        log.exception("event bus: emit of %s failed", kind)


def _payload_json(kind: str, payload: dict) -> str:
    clean = {k: v for k, v in payload.items() if k not in RESERVED_KEYS}
    if len(clean) != len(payload):
        log.warning("event bus: %s payload carried reserved keys; they were dropped", kind)
    return json.dumps(clean, separators=(",", ":"), default=str)


def emit_and_wait(
    kind: str, payload: dict | None, timeout_s: float, *, abort=None
) -> tuple[dict | None, int, list[str]]:
    """Emit now (never deferred to a commit) and wait up to `timeout_s` for the hook firings
    the event queued to finish. For the supervisor at shutdown, whose workers must outlive the
    `host.stopping` hooks. Returns (event, firings queued, permits still held at the end).
    Never raises.
    """
    try:
        if kind not in KINDS:
            log.error("event bus: refusing unknown event kind %r", kind)
            return None, 0, []
        event, permits = _emit_now(kind, _payload_json(kind, payload or {}))
    except Exception:  # the caller's work must never fail because of the bus
        log.exception("event bus: emit of %s failed", kind)
        return None, 0, []
    waited = dispatch.wait_released(permits, timeout_s, _bus.get(), abort=abort)
    return event, len(permits), waited


def _emit_now(kind: str, payload_json: str) -> tuple[dict, list[str]]:
    ts_ms = int(time.time() * 1000)
    inner = payload_json[1:-1]
    suffix = (
        f',"ts_ms":{ts_ms},"schema":{SCHEMA_VERSION},"kind":{json.dumps(kind)}'
        + (f",{inner}" if inner else "")
        + "}"
    )
    # Events kept earlier go first: this one queues behind them. (No outbox was ever made in
    # this process: the usual case costs one dict check.)
    box = _outbox() if outbox.any_made() else None
    event = None
    if box is None or not box.pending():
        try:
            event = _publish('{"seq":', suffix)
        except Exception as exc:  # Redis down or misconfigured: keep it
            box = box or _outbox()
            box.failed(exc)
    if event is None:
        box.add(kind, suffix)
        event = json.loads('{"seq":null' + suffix)
        return event, []
    return event, _schedule_hooks(event)


def _outbox() -> outbox.Outbox:
    return outbox.get(redis_client.url(), state_path(outbox.SPOOL_DIR), _deliver_kept)


def _deliver_kept(entry: outbox.Entry, url: str) -> None:
    """Publish one kept event (seq stamped now) and queue its hooks; raises while Redis is away.
    Only ever on the Redis the event was kept for."""
    if redis_client.url() != url:
        raise RuntimeError("the host's Redis URL changed; the event stays kept for its own")
    event = _publish('{"seq":', entry.suffix, kept_id=entry.eid)
    if event is not None and entry.kind in KINDS:
        _schedule_hooks(event)


def recover_spools() -> int:
    """Deliver the spools of processes that died while Redis was away (the supervisor runs
    this periodically; any process's flusher also does after its own delivery)."""
    try:
        return outbox.recover_orphans(
            state_path(outbox.SPOOL_DIR), redis_client.url(), _deliver_kept
        )
    except Exception as exc:  # Redis still away: the spools stay for next time
        log.debug("event bus: orphaned spools not delivered yet (%s)", exc)
        return 0


def _publish(prefix: str, suffix: str, kept_id: str = "") -> dict | None:
    """Stamp and publish; None when `kept_id` was delivered before."""
    client = _bus.get()
    k = keys()
    for _ in range(5):
        result = _bus.script(client, "emit")(
            keys=[k["seq"], k["reserved"], k["ring"], k["kept"] + (kept_id or "-")],
            args=[prefix, suffix, conf.RING_SIZE, k["channel"], kept_id],
            client=client,
        )
        if int(result[0]) < 0:
            return None
        if int(result[0]) > 0:
            doc = result[1].decode() if isinstance(result[1], bytes) else result[1]
            return json.loads(doc)
        _reserve(client, int(result[1]))
    raise RuntimeError("could not reserve event sequence numbers")


def seq_file():
    return state_path(SEQ_FILE)


def persisted_mark() -> int:
    try:
        return int(seq_file().read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _reserve(client, current: int) -> None:
    """Persist a high-water mark one block ahead, then let Redis hand out seqs up to it."""
    path = seq_file()
    with open(path.with_name(SEQ_FILE + ".lock"), "a+") as lock_fh:
        fcntl.flock(lock_fh, fcntl.LOCK_EX)
        try:
            mark = persisted_mark()
            if current > mark:  # the counter ran past the file (file lost): never go back
                mark = current
            new_mark = mark + conf.SEQ_BLOCK
            atomic_write(path, f"{new_mark}\n")
            k = keys()
            _bus.script(client, "reserve")(
                keys=[k["seq"], k["reserved"], k["base"]], args=[mark, new_mark], client=client
            )
        finally:
            fcntl.flock(lock_fh, fcntl.LOCK_UN)


def _schedule_hooks(event: dict) -> list[str]:
    """Queue the event's hook firings; returns their permits (see `dispatch.schedule`)."""
    try:
        return dispatch.schedule(event, _bus.get())
    except Exception:  # hooks are best-effort observers
        log.exception("event bus: scheduling hooks for seq %s failed", event.get("seq"))
        return []


# -- readers -------------------------------------------------------------------------------


def ring_events(client=None) -> list[dict]:
    """The replay ring, oldest first. Raises the redis error when Redis is unavailable."""
    client = client or _bus.get()
    return [json.loads(raw) for raw in client.lrange(keys()["ring"], 0, -1)]
