"""The fleet buffer: every member's events, tagged with their host, in this host's Redis.

One stream (`fleet:events`, entries `m` member id, `s` member seq, `k` kind, `d` the event JSON
with `host`) bounded at `MAX_EVENTS` entries: a flooding member cannot grow memory. Beside it,
per member: `fleet:cursor` (the member's seq the buffer holds up to: the relay's resume point)
and `fleet:floor` (every event of the member above its floor is still in the buffer). One Lua
script appends, advances the cursor and trims in one step, so an event is in the buffer exactly
once even when a relay dies between appending and noting its progress; the trim raises the
floor of each member whose events it removes, so the fleet stream can tell a resume it can
serve exactly from one that fell off (`floors`).

The private Redis is wiped when this host restarts; the relays then read each member's
replay ring from its start again (`cursor` is None), which refills the buffer with what the
members still hold, and a consumer's resume is exact as long as its position is in there.

Nothing here imports Django.
"""

from __future__ import annotations

import json

from common import redis_client
from common.env import env_int
from hooks.event_kinds import DROPPED

STREAM = "fleet:events"
CURSORS = "fleet:cursor"
FLOORS = "fleet:floor"
HOSTS = "fleet:hosts"  # member id -> its host tag (JSON), for markers the stream makes itself
RELAYS = "fleet:relay"  # member id -> the relay's state (JSON), for the console and the API
MAX_EVENTS = env_int("HOST_FLEET_BUFFER_MAX", 10_000)

# KEYS: stream, cursors, floors.  ARGV: member, floor if none yet, max entries, then
# (seq, kind, data) per event. A `dropped` marker is kept at the cursor it came after.
_APPEND_LUA = """
local m = ARGV[1]
local cur = tonumber(redis.call('HGET', KEYS[2], m) or '-1')
if redis.call('HEXISTS', KEYS[3], m) == 0 then redis.call('HSET', KEYS[3], m, ARGV[2]) end
local added = 0
for i = 4, #ARGV, 3 do
  local s = tonumber(ARGV[i])
  local k = ARGV[i + 1]
  if k == 'dropped' then
    local at = cur
    if at < 0 then at = tonumber(ARGV[2]) end
    redis.call('XADD', KEYS[1], '*', 'm', m, 's', string.format('%d', at), 'k', k, 'd', ARGV[i + 2])
    added = added + 1
  elseif s > cur then
    redis.call('XADD', KEYS[1], '*', 'm', m, 's', ARGV[i], 'k', k, 'd', ARGV[i + 2])
    cur = s
    added = added + 1
  end
end
if cur >= 0 then redis.call('HSET', KEYS[2], m, string.format('%d', cur)) end
local over = redis.call('XLEN', KEYS[1]) - tonumber(ARGV[3])
if over > 0 then
  local gone = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', over)
  for _, entry in ipairs(gone) do
    local f = entry[2]
    local gm, gs, gk
    for j = 1, #f, 2 do
      if f[j] == 'm' then gm = f[j + 1] elseif f[j] == 's' then gs = f[j + 1]
      elseif f[j] == 'k' then gk = f[j + 1] end
    end
    if gk ~= 'dropped' then
      local fl = tonumber(redis.call('HGET', KEYS[3], gm) or '0')
      if tonumber(gs) > fl then redis.call('HSET', KEYS[3], gm, gs) end
    end
    redis.call('XDEL', KEYS[1], entry[1])
  end
end
return {added, cur}
"""

_script = None


def _append_script(client):
    global _script
    if _script is None or _script.registered_client is not client:
        _script = client.register_script(_APPEND_LUA)
    return _script


def append(member_id: int, floor: int, events: list[tuple[int, str, str]]) -> int:
    """Append (seq, kind, tagged JSON) of one member, skipping any at or below its cursor.
    `floor`: the position the relay resumed after (used when the buffer has none for it).
    Returns the member's cursor afterwards (-1: none yet). Raises while Redis is away."""
    client = redis_client.client()
    args: list = [member_id, floor, MAX_EVENTS]
    for seq, kind, data in events:
        args += [seq, kind, data]
    _, cursor = _append_script(client)(keys=[STREAM, CURSORS, FLOORS], args=args, client=client)
    return int(cursor)


def cursor(member_id: int) -> int | None:
    """The member's seq the buffer holds up to; None when it has nothing of the member (a new
    member, or this host's Redis was wiped)."""
    raw = redis_client.client().hget(CURSORS, member_id)
    return int(raw) if raw is not None else None


def set_host(member_id: int, tag: dict) -> None:
    redis_client.client().hset(HOSTS, member_id, json.dumps(tag, separators=(",", ":")))


def forget(member_id: int) -> None:
    """A member left: its resume point and state go (its events age out of the buffer)."""
    client = redis_client.client()
    for key in (CURSORS, FLOORS, HOSTS, RELAYS):
        client.hdel(key, member_id)


def note_relay(member_id: int, state: dict) -> None:
    redis_client.client().hset(RELAYS, member_id, json.dumps(state, separators=(",", ":")))


def relay_states() -> dict[int, dict]:
    """Each member's relay as its relay last said: `state` (`connected`, `backing_off`,
    `stopped`), `error` (safe to show), `cursor`, `at` (epoch s). For a console page."""
    out = {}
    for key, raw in redis_client.client().hgetall(RELAYS).items():
        try:
            out[int(key)] = json.loads(raw)
        except ValueError:
            continue
    return out


def dropped_data(tag: dict) -> str:
    return json.dumps({"dropped": True, "host": tag}, separators=(",", ":"))


def length() -> int:
    return int(redis_client.client().xlen(STREAM))


__all__ = ["DROPPED", "append", "cursor", "forget", "relay_states", "length", "MAX_EVENTS"]
