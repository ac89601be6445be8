"""`GET /api/v1/fleet/events`: every member's events from the fleet buffer as one SSE stream,
an async Django view under daphne like `/api/v1/events` (hooks/sse.py, whose keep-alive and
open frames, authentication and slow-consumer cut-off it shares).

Each frame: `event: <kind>`, `data: <the member's event JSON with "host": {id, name, url}>`,
`id: <vector>`: the member seqs this stream has sent, `<member id>:<seq>` joined by commas
(`3:120,5:88`). Resume with `Last-Event-ID` = the last vector: every buffered event whose seq
is above its member's entry, then live. The members' own seqs make this exact across members
and across a restart of this host (the buffer's order is arrival order, which no one else
could reproduce). A member's entry below its floor in the buffer (fleet/buffer.py) gets an
`event: dropped` frame tagged with that host first. An unparsable id is ignored (the whole
buffer is replayed), as hooks/sse.py ignores one.

Only the operator (management token, tokenless host) may read it; a plugin token gets 403.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import weakref

from django.http import StreamingHttpResponse

from apikit.errors import REDIS_RETRY_AFTER_S, json_error
from common import redis_client
from common.env import env_int
from fleet import buffer
from hooks import conf, sse
from hooks.event_kinds import DROPPED

log = logging.getLogger("fleet.stream")

MAX_MEMBERS = 64  # entries in an id; a longer Last-Event-ID is not one of ours
MAX_STREAMS = env_int("HOST_FLEET_MAX_STREAMS", 8)  # per web process
REPLAY_CHUNK = 500
_ENTRY = r"[0-9]{1,9}:[0-9]{1,19}"
VECTOR_RE = re.compile(rf"{_ENTRY}(,{_ENTRY}){{0,{MAX_MEMBERS - 1}}}")
INT64_MAX = 2**63 - 1
TRANSPORT_CHECK_S = 0.25

_open = 0


def parse_vector(raw: str | None) -> dict[int, int] | None:
    """`3:120,5:88` -> {3: 120, 5: 88}; None for anything else (a repeated member, a seq above
    int64, spaces, more than MAX_MEMBERS entries)."""
    if raw is None or not VECTOR_RE.fullmatch(raw):
        return None
    out: dict[int, int] = {}
    for part in raw.split(","):
        member, seq = part.split(":")
        if int(member) in out or int(seq) > INT64_MAX:
            return None
        out[int(member)] = int(seq)
    return out


def format_vector(vector: dict[int, int]) -> str:
    return ",".join(f"{m}:{s}" for m, s in sorted(vector.items()))


def _decode(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def dropped_frame(data: str) -> bytes:
    return f"event: {DROPPED}\ndata: {data}\n\n".encode()


class Position:
    """What one stream has sent: the vector, and the frames of buffer entries after it."""

    def __init__(self, vector: dict[int, int] | None):
        self.vector = dict(vector or {})

    def frame(self, fields: dict) -> bytes | None:
        member = int(_decode(fields[b"m"]))
        seq = int(_decode(fields[b"s"]))
        kind = _decode(fields[b"k"])
        data = _decode(fields[b"d"])
        have = self.vector.get(member, 0)
        if kind == DROPPED:  # kept at the seq it came after; it has no id of its own
            return dropped_frame(data) if seq >= have else None
        if seq <= have:
            return None
        self.vector[member] = seq
        if len(self.vector) > MAX_MEMBERS:  # the lowest ids leave (exact up to 64 members)
            for old in sorted(self.vector)[: len(self.vector) - MAX_MEMBERS]:
                if old != member:
                    del self.vector[old]
        return f"id: {format_vector(self.vector)}\nevent: {kind}\ndata: {data}\n\n".encode()


async def gaps(client, vector: dict[int, int]) -> list[bytes]:
    """A tagged `dropped` per member whose entry is below the buffer's floor for it."""
    if not vector:
        return []
    floors = await client.hgetall(buffer.FLOORS)
    hosts = await client.hgetall(buffer.HOSTS)
    frames = []
    for member, seq in sorted(vector.items()):
        floor = floors.get(str(member).encode())
        if seq > 0 and floor is not None and seq < int(floor):
            raw = hosts.get(str(member).encode())
            tag = json.loads(raw) if raw else {"id": member}
            frames.append(dropped_frame(buffer.dropped_data(tag)))
    return frames


async def _stream(vector, client_addr, slot):
    loop = asyncio.get_running_loop()
    client = redis_client.async_client()
    position = Position(vector)
    keepalive_ms = max(1, int(conf.keepalive_s() * 1000))
    try:
        yield sse.OPEN_FRAME
        try:
            chunk = b"".join(await gaps(client, position.vector))
            last = "-"
            while True:  # the replay, a chunk per write
                start = last if last == "-" else "(" + last
                entries = await client.xrange(buffer.STREAM, start, "+", count=REPLAY_CHUNK)
                for entry_id, fields in entries:
                    last = _decode(entry_id)
                    chunk += position.frame(fields) or b""
                if chunk:
                    yield chunk
                    chunk = b""
                if len(entries) < REPLAY_CHUNK:
                    break
            if last == "-":
                last = "0"
            next_check = loop.time() + TRANSPORT_CHECK_S
            while True:
                answer = await client.xread(
                    {buffer.STREAM: last}, count=REPLAY_CHUNK, block=keepalive_ms
                )
                parts = []
                for _, entries in answer or ():
                    for entry_id, fields in entries:
                        last = _decode(entry_id)
                        parts.append(position.frame(fields) or b"")
                data = b"".join(parts)
                yield data if data else sse.KEEPALIVE_FRAME
                if loop.time() >= next_check:
                    next_check = loop.time() + TRANSPORT_CHECK_S
                    backlog = sse.unsent_bytes(client_addr)
                    if backlog is not None and backlog > conf.SSE_MAX_UNSENT_BYTES:
                        log.warning("fleet event stream consumer not reading; disconnected")
                        sse.cut_off(client_addr)
                        return
        except Exception as exc:  # Redis went away: the client resumes with its last id
            log.warning("fleet event stream ended (%s)", type(exc).__name__)
            return
    finally:
        slot.release()
        try:
            await client.aclose()
        except Exception:
            pass


class _Slot:
    def __init__(self):
        global _open
        _open += 1
        self.held = True

    def release(self) -> None:
        global _open
        if self.held:
            self.held = False
            _open -= 1


async def fleet_events_view(request):
    if request.method != "GET":
        return json_error(request.path, 405, "method not allowed", {"Allow": "GET"})
    principal = sse.authenticate(request)
    if principal is None:
        challenge = {"WWW-Authenticate": sse.mgmt.REALM}
        return json_error(request.path, 401, "invalid or missing bearer token", challenge)
    refusal = sse.mgmt.scope_refusal(request, principal)  # plugin and fleet tokens: their words
    if refusal or not principal.is_admin:
        why = refusal or "only the operator may read the fleet's events"
        return json_error(request.path, 403, why)
    if _open >= MAX_STREAMS:
        busy = "too many fleet event streams open; retry shortly"
        return json_error(request.path, 503, busy, {"Retry-After": "2"})
    vector = parse_vector(request.headers.get("Last-Event-ID"))
    try:
        await asyncio.to_thread(redis_client.client().ping)
    except Exception:
        return json_error(
            request.path,
            503,
            "fleet event stream unavailable; retry shortly",
            {"Retry-After": str(REDIS_RETRY_AFTER_S)},
        )
    slot = _Slot()
    content = _stream(vector, getattr(request, "scope", {}).get("client"), slot)
    weakref.finalize(content, slot.release)
    response = StreamingHttpResponse(content, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
