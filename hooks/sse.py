"""`GET /api/v1/events`: the lifecycle event stream, as an async Django view under daphne.

Why not django-eventstream: its ids are `channel:n`, its keep-alive is an event every 20 s, and
it has no kind filter or stream cap; the contract here needs all four.

One subscriber task per daphne process (the Hub) reads the Redis channel and fans each event out
to the open streams' bounded buffers; a stream whose buffer overflows, or whose socket holds more
than HOST_SSE_MAX_UNSENT_BYTES unsent, is disconnected (it resumes with Last-Event-ID) instead of
buffering without bound. A stream registers with the hub before it reads the ring, and drops
live events at or below the last seq it sent, so nothing is lost or repeated in between.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections import deque

from django.http import StreamingHttpResponse

from hooks import conf, event_kinds, events
from hooks.event_kinds import DROPPED
from hostmgmt import redis_client
from hostmgmt.api.errors import REDIS_RETRY_AFTER_S, json_error
from hostmgmt.auth import mgmt

log = logging.getLogger("hooks.sse")

INT64_MAX = 2**63 - 1
MAX_PATTERNS = 64
TRANSPORT_CHECK_S = 0.25


class BadQuery(ValueError):
    pass


def parse_cursor(query: dict, last_event_id: str | None) -> int:
    """Last-Event-ID (decimal) wins; an unparsable one is ignored. `since`: int64, >= 0."""
    if last_event_id is not None:
        raw = last_event_id.strip()
        if raw.isdigit() and int(raw) <= INT64_MAX:
            return int(raw)
    since = query.get("since")
    if since is None:
        return 0
    raw = since.strip()
    if not raw.isdigit() or int(raw) > INT64_MAX:
        raise BadQuery("since must be an integer from 0 to 9223372036854775807")
    return int(raw)


def parse_kinds(raw: str | None) -> tuple[str, ...]:
    """Comma-separated exact kinds or `domain.*` prefixes; blanks dropped; empty = no filter."""
    if raw is None:
        return ()
    patterns = tuple(p.strip() for p in raw.split(",") if p.strip())
    if len(patterns) > MAX_PATTERNS:
        raise BadQuery(f"kinds accepts at most {MAX_PATTERNS} patterns")
    for pattern in patterns:
        if not event_kinds.valid_pattern(pattern):
            raise BadQuery("kinds must list known event kinds or `<domain>.*` prefixes")
    return patterns


def wanted(patterns: tuple[str, ...], kind: str) -> bool:
    return not patterns or any(event_kinds.pattern_matches(p, kind) for p in patterns)


def frame(seq: int, kind: str, raw: str) -> bytes:
    return f"id: {seq}\nevent: {kind}\ndata: {raw}\n\n".encode()


DROPPED_FRAME = f'event: {DROPPED}\ndata: {{"dropped":true}}\n\n'.encode()
KEEPALIVE_FRAME = b": keep-alive\n\n"
OPEN_FRAME = b": stream open\n\n"


class Subscriber:
    def __init__(self, depth: int):
        self.items: deque = deque()
        self.depth = depth
        self.wake = asyncio.Event()
        self.overflow = False
        self.broken = False

    def offer(self, item) -> None:
        if len(self.items) >= self.depth:
            self.overflow = True
        else:
            self.items.append(item)
        self.wake.set()

    def fail(self) -> None:
        self.broken = True
        self.wake.set()


class Hub:
    """The one Redis subscription of this process, fanned out to every open stream."""

    def __init__(self):
        self.subs: set[Subscriber] = set()
        self.task: asyncio.Task | None = None
        self.ready: asyncio.Event | None = None
        self.loop = None
        self.streams = 0

    async def ensure_ready(self) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is not loop or self.task is None or self.task.done():
            self.loop = loop
            self.ready = asyncio.Event()
            self.task = loop.create_task(self._run())
        await asyncio.wait_for(self.ready.wait(), timeout=5)

    def add(self, depth: int) -> Subscriber:
        sub = Subscriber(depth)
        self.subs.add(sub)
        return sub

    def leave(self, sub: Subscriber) -> None:
        self.subs.discard(sub)

    async def _run(self) -> None:
        channel = events.keys()["channel"]
        while True:
            client = redis_client.async_client()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(channel)
                while True:  # the subscribe confirmation: from now on nothing is missed
                    msg = await pubsub.get_message(timeout=5)
                    if msg and msg["type"] == "subscribe":
                        break
                self.ready.set()
                async for msg in pubsub.listen():
                    if msg["type"] != "message":
                        continue
                    raw = msg["data"].decode()
                    head = json.loads(raw)
                    item = (head["seq"], head["kind"], frame(head["seq"], head["kind"], raw))
                    for sub in tuple(self.subs):
                        sub.offer(item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis went away: streams must resume
                log.warning("event stream: Redis subscription lost (%s)", exc.__class__.__name__)
                self.ready.clear()
                for sub in tuple(self.subs):
                    sub.fail()
                await asyncio.sleep(0.5)
            finally:
                try:
                    await pubsub.aclose()
                    await client.aclose()
                except Exception:  # noqa: BLE001
                    pass


hub = Hub()


def _transport(client_addr):
    """Daphne's Twisted transport for this peer, or None (not under daphne, or gone).

    Daphne writes ASGI body chunks into the transport without backpressure, so the view has to
    look at the transport itself to notice, and cut off, a consumer that stopped reading.
    """
    import sys

    if not client_addr or "twisted.internet.reactor" not in sys.modules:
        return None
    reactor = sys.modules["twisted.internet.reactor"]
    host, port = client_addr[0], int(client_addr[1])
    try:
        for transport in (*reactor.getWriters(), *reactor.getReaders()):
            peer = transport.getPeer()
            if getattr(peer, "port", None) == port and getattr(peer, "host", None) == host:
                return transport
    except Exception:  # noqa: BLE001 - diagnostics only
        return None
    return None


def unsent_bytes(client_addr) -> int | None:
    """Bytes Twisted still holds for this peer's socket (None when that cannot be known)."""
    transport = _transport(client_addr)
    if transport is None:
        return None
    try:
        return len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    except AttributeError:
        return None


def cut_off(client_addr) -> None:
    """Drop a too-slow consumer's connection now, with whatever it has not read: the buffer is
    the memory we refuse to grow. It resumes with Last-Event-ID from what it really got."""
    transport = _transport(client_addr)
    if transport is not None:
        try:
            transport.abortConnection()
        except Exception:  # noqa: BLE001 - already gone
            pass


def _authenticate(request):
    header = request.META.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
    if mgmt.tokenless() and not header:
        return mgmt.TOKENLESS_ADMIN
    principal = mgmt.resolve(header) if header else None
    if principal is None and mgmt.tokenless():
        return mgmt.TOKENLESS_ADMIN
    return principal


async def events_view(request):
    if request.method != "GET":
        return json_error(request.path, 405, "method not allowed", {"Allow": "GET"})
    principal = _authenticate(request)
    if principal is None:
        return json_error(
            request.path, 401, "invalid or missing bearer token", {"WWW-Authenticate": mgmt.REALM}
        )
    if principal.role == "plugin" and mgmt.plugin_denied(request, principal):
        return json_error(request.path, 403, mgmt.PLUGIN_FORBIDDEN)
    return await stream_response(request)


async def stream_response(request):
    """The event stream for a caller already authorised by its own route (the SSE view above,
    the console's session-authenticated relay): query rules, cap, replay and live tail."""
    try:
        cursor = parse_cursor(request.GET, request.headers.get("Last-Event-ID"))
        patterns = parse_kinds(request.GET.get("kinds"))
    except BadQuery as exc:
        return json_error(request.path, 400, str(exc))
    if hub.streams >= conf.SSE_MAX_STREAMS:
        return json_error(
            request.path, 503, "too many event streams open; retry shortly", {"Retry-After": "2"}
        )
    try:
        await hub.ensure_ready()
    except Exception as exc:  # noqa: BLE001 - no Redis: the stream cannot be served
        log.warning("event stream unavailable: %s", exc.__class__.__name__)
        return json_error(
            request.path,
            503,
            "event stream unavailable; retry shortly",
            {"Retry-After": str(REDIS_RETRY_AFTER_S)},
        )
    slot = _Slot()  # taken now so concurrent requests cannot overshoot the cap
    body = _stream(cursor, patterns, request.scope.get("client"), slot)
    # A response that is never iterated (client gone before the first byte) never runs the
    # generator's `finally`; the finalizer gives its slot back when it is collected.
    weakref.finalize(body, slot.release)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _snapshot() -> tuple[list[tuple[int, str, str]], int]:
    """The ring (seq, kind, raw) and the last seq handed out, read atomically."""
    client = redis_client.client()
    k = events.keys()
    pipe = client.pipeline(transaction=True)
    pipe.lrange(k["ring"], 0, -1)
    pipe.get(k["seq"])
    raw_ring, seq = pipe.execute()
    ring = []
    for raw in raw_ring:
        text = raw.decode()
        head = json.loads(text)
        ring.append((head["seq"], head["kind"], text))
    last = int(seq) if seq is not None else (ring[-1][0] if ring else 0)
    return ring, last


class _Slot:
    """One of the capped stream slots; released exactly once."""

    def __init__(self):
        hub.streams += 1
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            hub.streams -= 1


async def _stream(cursor, patterns, client_addr, slot: _Slot | None = None):
    loop = asyncio.get_running_loop()
    slot = slot or _Slot()
    sub = hub.add(conf.SSE_QUEUE_DEPTH)
    try:
        yield OPEN_FRAME
        try:
            ring, last_seq = await asyncio.to_thread(_snapshot)
        except Exception as exc:  # noqa: BLE001 - Redis vanished meanwhile: let it resume
            log.warning("event stream: ring unavailable (%s)", exc.__class__.__name__)
            return
        first = ring[0][0] if ring else last_seq + 1
        if cursor and (cursor + 1 < first or cursor > last_seq):
            yield DROPPED_FRAME
            if cursor > last_seq:  # ahead of the ring (host restarted): live from here
                cursor = last_seq
        sent = cursor
        for seq, kind, raw in ring:
            if seq > sent:
                sent = seq
                if wanted(patterns, kind):
                    yield frame(seq, kind, raw)
        keepalive = conf.keepalive_s()
        next_keepalive = loop.time() + keepalive
        next_check = loop.time() + TRANSPORT_CHECK_S
        while True:
            if not sub.items and not sub.broken and not sub.overflow:
                sub.wake.clear()
                try:
                    await asyncio.wait_for(sub.wake.wait(), max(0.0, next_keepalive - loop.time()))
                except TimeoutError:
                    pass
            if sub.broken:
                return
            chunk = []
            while sub.items:
                seq, kind, data = sub.items.popleft()
                if seq > sent:
                    sent = seq
                    if wanted(patterns, kind):
                        chunk.append(data)
            if chunk:
                yield b"".join(chunk)
                next_keepalive = loop.time() + keepalive
            if sub.overflow:
                log.warning("event stream consumer too slow; disconnected at seq %s", sent)
                cut_off(client_addr)
                return
            now = loop.time()
            if now >= next_check:
                next_check = now + TRANSPORT_CHECK_S
                backlog = unsent_bytes(client_addr)
                if backlog is not None and backlog > conf.SSE_MAX_UNSENT_BYTES:
                    log.warning("event stream consumer not reading; disconnected at seq %s", sent)
                    cut_off(client_addr)
                    return
            if now >= next_keepalive:
                yield KEEPALIVE_FRAME
                next_keepalive = now + keepalive
    finally:
        hub.leave(sub)
        slot.release()
