"""`GET /api/v1/events`: the lifecycle event stream, as an async Django view under daphne.

Why not django-eventstream: its ids are `channel:n`, its keep-alive is an event every 20 s, and
it has no kind filter or stream cap; the contract here needs all four.

One subscriber task per daphne process (the Hub) reads the Redis channel and fans each event out.
A stream that has caught up (replay written, nothing queued) is written by the hub itself: one
frame per event, built once, handed to each stream's ASGI `send` in turn, with no task wake-up
or Django response iteration per stream (measured: those cost more than the socket write at
100 streams). A stream that is catching up (its replay, a Redis outage) gets a bounded buffer that
its own task writes as one chunk. A stream whose buffer overflows, or whose socket holds more
than HOST_SSE_MAX_UNSENT_BYTES unsent, is disconnected (it resumes with Last-Event-ID) instead of
buffering without bound. A stream registers with the hub before it reads the ring, and drops
live events at or below the last seq it sent, so nothing is lost or repeated in between.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import weakref
from collections import deque

from django.http import StreamingHttpResponse

from access import mgmt
from apikit.errors import REDIS_RETRY_AFTER_S, json_error
from common import redis_client
from hooks import conf, event_kinds, events
from hooks.event_kinds import DROPPED
from hostmgmt.sync_dispatch import ASGI_SEND

log = logging.getLogger("hooks.sse")

INT64_MAX = 2**63 - 1
MAX_PATTERNS = 64
TRANSPORT_CHECK_S = 0.25
# A live stream's socket backlog is looked at once every this many of the hub's writes to it.
BACKLOG_CHECK_EVERY = 8
BATCH_MAX = 256  # events the hub takes from Redis at once (a queued stream's depth)


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
    # A `dropped` marker (events lost past the bus's outage buffer) concerns every filter.
    if not patterns or kind == DROPPED:
        return True
    return any(event_kinds.pattern_matches(p, kind) for p in patterns)


DROPPED_FRAME = f'event: {DROPPED}\ndata: {{"dropped":true}}\n\n'.encode()


def frame(seq: int, kind: str, raw: str) -> bytes:
    if kind == DROPPED:  # the bus's marker takes a seq in the ring; the frame has no id (spec)
        return DROPPED_FRAME
    return f"id: {seq}\nevent: {kind}\ndata: {raw}\n\n".encode()


KEEPALIVE_FRAME = b": keep-alive\n\n"
OPEN_FRAME = b": stream open\n\n"


class Subscriber:
    """One open stream as the hub sees it: a bounded queue while the stream catches up, and
    its ASGI `send` (`writer`) once it is live, for the hub to write to directly."""

    def __init__(self, depth: int, passes=lambda kind: True, peer=None):
        self.items: deque = deque()
        self.depth = depth
        self.passes = passes  # the stream's kind filter
        self.peer = peer
        self.wake = asyncio.Event()
        self.overflow = False
        self.stalled = False  # its socket held too much unsent: cut off
        self.broken = False
        self.resync = False  # the hub lost Redis: re-read the ring once it is subscribed again
        self.writer = None
        self.sent = 0  # the last seq this stream wrote or skipped
        self.wrote_at = 0.0  # loop time of its last direct write (the keep-alive counts on)
        self.writes = 0  # direct writes so far (the backlog is looked at every few)

    def offer(self, item) -> None:
        if len(self.items) >= self.depth:
            self.overflow = True
        else:
            self.items.append(item)
        self.wake.set()

    async def deliver(self, items: list, now: float) -> None:
        """The hub's write of a batch of live events (direct mode): the ones after `sent` that
        pass the filter, as one write; a single event goes as the hub's shared message. `now`:
        the loop time of the batch (the keep-alive counts from it)."""
        if len(items) == 1:
            seq, kind, _, message = items[0]
            if seq > self.sent:
                self.sent = seq
                if self.passes(kind):
                    await self.write(message, now)
            return
        chunk = self._unwritten(items)
        if chunk:
            await self.write(body(chunk), now)

    async def write(self, message: dict, now: float) -> None:
        try:
            await self.writer(message)
        except Exception:  # the connection is gone: its task ends the stream
            self.fail()
            return
        self.wrote_at = now
        # The socket's backlog every BACKLOG_CHECK_EVERY writes: a look at Twisted's buffers
        # per write was a fifth of a live frame's cost, and a few frames more than
        # SSE_MAX_UNSENT_BYTES before the cut-off hold no real memory.
        self.writes += 1
        if (self.writes - 1) % BACKLOG_CHECK_EVERY:  # the 1st, the 9th, ...
            return
        backlog = self.peer.unsent() if self.peer is not None else None
        if backlog is not None and backlog > conf.SSE_MAX_UNSENT_BYTES:
            self.stalled = True
            self.writer = None
            self.wake.set()

    def drain(self) -> bytes:
        """What was queued and not yet written, as one chunk; the queue is left empty."""
        chunk = self._unwritten(self.items)
        self.items.clear()
        return chunk

    def _unwritten(self, items) -> bytes:
        """The frames of `items` after `sent` that pass the filter, joined; `sent` moves past
        every one of them (the ones the filter drops too)."""
        parts = []
        for seq, kind, data, _ in items:
            if seq > self.sent:
                self.sent = seq
                if self.passes(kind):
                    parts.append(data)
        return b"".join(parts)

    def fail(self) -> None:
        self.broken = True
        self.writer = None
        self.wake.set()

    def lost(self) -> None:
        self.resync = True
        self.writer = None  # until it has re-read the ring, live events queue
        self.wake.set()


def body(data: bytes) -> dict:
    return {"type": "http.response.body", "body": data, "more_body": True}


class Hub:
    """The one Redis subscription of this process, fanned out to every open stream."""

    def __init__(self):
        self.subs: set[Subscriber] = set()
        self.task: asyncio.Task | None = None
        self.ready: asyncio.Event | None = None
        self.loop = None
        self.streams = 0
        # Redis restarts (which wipe the ring): the run id of the server subscribed to, the
        # highest seq seen from it, and the highest seq seen from the run before this one.
        self.run_id: str | None = None
        self.last_seen = 0
        self.prev_run_last: int | None = None

    async def ensure_ready(self) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is not loop or self.task is None or self.task.done():
            self.loop = loop
            self.ready = asyncio.Event()
            self.task = loop.create_task(self._run())
        await asyncio.wait_for(self.ready.wait(), timeout=5)

    def add(self, depth: int, passes=lambda kind: True, peer=None) -> Subscriber:
        sub = Subscriber(depth, passes, peer)
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
                await self._note_run(client)
                self.ready.set()
                async for msg in pubsub.listen():
                    if msg["type"] != "message":
                        continue
                    batch = [msg]
                    # What Redis has already delivered goes out with it: a burst costs one
                    # write per live stream, not one per event. `can_read` (~9 us) first: an
                    # empty `get_message(timeout=0)` costs ~65 us, paid on every lone event.
                    while len(batch) < BATCH_MAX and await pubsub.connection.can_read():
                        more = await pubsub.get_message(timeout=0)
                        if more is None:
                            break
                        if more["type"] == "message":
                            batch.append(more)
                    await self._fan_out(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: streams must resume
                log.warning("event stream: Redis subscription lost (%s)", exc.__class__.__name__)
                self.ready.clear()
                for sub in tuple(self.subs):  # they stay open and catch up once it is back
                    sub.lost()
                await asyncio.sleep(0.5)
            finally:
                try:
                    await pubsub.aclose()
                    await client.aclose()
                except Exception:
                    pass

    async def _fan_out(self, batch: list) -> None:
        items = []
        for msg in batch:
            raw = msg["data"].decode()
            head = json.loads(raw)
            seq, kind = head["seq"], head["kind"]
            data = frame(seq, kind, raw)
            items.append((seq, kind, data, body(data)))  # one message for every live stream
        self.last_seen = items[-1][0]
        now = asyncio.get_running_loop().time()  # one clock read for the batch's writes
        for sub in tuple(self.subs):
            if sub.writer is not None:
                await sub.deliver(items, now)
            else:
                for item in items:
                    sub.offer(item)

    async def _note_run(self, client) -> None:
        """After (re)subscribing: remember which Redis run this is, and when it is a new one
        (a restart wiped the ring), the highest seq this hub saw from the run before. A cursor
        at or above that mark missed nothing of the old run (see `missed`)."""
        try:
            run_id = (await client.info("server")).get("run_id")
            seq = await client.get(events.keys()["seq"])
        except Exception as exc:  # unknown run: a later restart counts as a gap
            log.warning("event stream: Redis run not identified (%s)", exc.__class__.__name__)
            self.run_id, self.prev_run_last = None, None
            return
        if self.run_id is not None and run_id != self.run_id:
            self.prev_run_last = self.last_seen
            self.last_seen = int(seq or 0)
        else:
            self.last_seen = max(self.last_seen, int(seq or 0))
        self.run_id = run_id


hub = Hub()


def missed(cursor: int, first: int, last_seq: int, base: int | None) -> bool:
    """Whether a stream whose last seq is `cursor` may have missed events: its cursor fell off
    the ring or is ahead of it, unless Redis restarted (seq at or below `base`, or ahead of an
    empty new run) since a cursor at or above the highest seq this hub saw from the old run
    (`hub.prev_run_last`), and the ring still holds this run from its start."""
    if not cursor:
        return False
    from_old_run = (base is not None and cursor <= base) or (base is None and cursor > last_seq)
    if from_old_run:
        whole_run = base is None or first == base + 1
        return not (hub.prev_run_last is not None and cursor >= hub.prev_run_last and whole_run)
    return cursor + 1 < first or cursor > last_seq


async def _resync(sent: int, patterns, keepalive: float):
    """After the hub lost Redis: keep-alives until it is subscribed again, then the ring's
    events after `sent`. Yields frames (bytes) and, last, the new cursor (int)."""
    while True:
        try:
            await asyncio.wait_for(hub.ready.wait(), keepalive)
        except TimeoutError:
            yield KEEPALIVE_FRAME
            continue
        try:
            async for data, seq in _catch_up(sent, patterns):
                if data:
                    yield data
                sent = seq
        except Exception:  # lost again before the ring was read: wait again
            await asyncio.sleep(0.2)
            continue
        yield sent
        return


def _transport(client_addr):
    """Daphne's Twisted transport for this peer, or None (not under daphne, or gone).

    Daphne writes ASGI body chunks into the transport without backpressure, so the view has to
    look at the transport itself to notice, and cut off, a consumer that stopped reading.
    This walks every connection of the process: a stream looks its own up once (`_Peer`).
    """
    if not client_addr or "twisted.internet.reactor" not in sys.modules:
        return None
    reactor = sys.modules["twisted.internet.reactor"]
    host, port = client_addr[0], int(client_addr[1])
    try:
        for transport in (*reactor.getWriters(), *reactor.getReaders()):
            peer = transport.getPeer()
            if getattr(peer, "port", None) == port and getattr(peer, "host", None) == host:
                return transport
    except Exception:  # diagnostics only
        return None
    return None


def unsent_bytes(client_addr) -> int | None:
    """Bytes Twisted still holds for this peer's socket (None when that cannot be known)."""
    return _unsent(_transport(client_addr))


def _unsent(transport) -> int | None:
    if transport is None:
        return None
    try:
        return len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    except AttributeError:
        return None


def cut_off(client_addr) -> None:
    """Drop a too-slow consumer's connection now, with whatever it has not read: the buffer is
    the memory we refuse to grow. It resumes with Last-Event-ID from what it really got."""
    _abort(_transport(client_addr))


def _abort(transport) -> None:
    if transport is not None:
        try:
            transport.abortConnection()
        except Exception:  # already gone
            pass


class _Peer:
    """One stream's own transport, found once: a lookup per check walks every
    connection of the process, 4 times a second per stream, O(streams²) with many open."""

    def __init__(self, client_addr):
        self.client_addr = client_addr
        self.transport = None

    def get(self):
        if self.transport is None:
            self.transport = _transport(self.client_addr)
        return self.transport

    def unsent(self) -> int | None:
        return _unsent(self.get())

    def cut_off(self) -> None:
        _abort(self.get())


def authenticate(request):
    """The principal of an SSE request (bearer token, or the tokenless admin); None: 401."""
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
    principal = authenticate(request)
    if principal is None:
        return json_error(
            request.path, 401, "invalid or missing bearer token", {"WWW-Authenticate": mgmt.REALM}
        )
    refusal = mgmt.scope_refusal(request, principal)
    if refusal:
        return json_error(request.path, 403, refusal)
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
    except Exception as exc:  # no Redis: the stream cannot be served
        log.warning("event stream unavailable: %s", exc.__class__.__name__)
        return json_error(
            request.path,
            503,
            "event stream unavailable; retry shortly",
            {"Retry-After": str(REDIS_RETRY_AFTER_S)},
        )
    slot = _Slot()  # taken now so concurrent requests cannot overshoot the cap
    send = request.scope.get(ASGI_SEND)
    content = _stream(cursor, patterns, request.scope.get("client"), slot, send)
    # A response that is never iterated (client gone before the first byte) never runs the
    # generator's `finally`; the finalizer gives its slot back when it is collected.
    weakref.finalize(content, slot.release)
    response = StreamingHttpResponse(content, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _snapshot() -> tuple[list[tuple[int, str, str]], int, int | None]:
    """The ring (seq, kind, raw), the last seq handed out and this Redis run's first seq - 1
    (None before its first event), read atomically."""
    client = redis_client.client()
    k = events.keys()
    pipe = client.pipeline(transaction=True)
    pipe.lrange(k["ring"], 0, -1)
    pipe.get(k["seq"])
    pipe.get(k["base"])
    raw_ring, seq, base = pipe.execute()
    ring = []
    for raw in raw_ring:
        text = raw.decode()
        head = json.loads(text)
        ring.append((head["seq"], head["kind"], text))
    last = int(seq) if seq is not None else (ring[-1][0] if ring else 0)
    return ring, last, int(base) if base is not None else None


async def _catch_up(cursor: int, patterns):
    """Frames from the ring after `cursor`: a `dropped` first when the stream may have missed
    events. Yields (frame or None, new cursor); raises when Redis is unavailable."""
    ring, last_seq, base = await asyncio.to_thread(_snapshot)
    first = ring[0][0] if ring else last_seq + 1
    if missed(cursor, first, last_seq, base):
        yield DROPPED_FRAME, cursor
        if cursor > last_seq and (base is None or cursor > base):  # ahead of the ring
            cursor = last_seq
    for seq, kind, raw in ring:
        if seq > cursor:
            cursor = seq
            yield (frame(seq, kind, raw) if wanted(patterns, kind) else None), cursor
    yield None, cursor


class _Slot:
    """One of the capped stream slots; released exactly once."""

    def __init__(self):
        hub.streams += 1
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            hub.streams -= 1


async def _stream(cursor, patterns, client_addr, slot: _Slot | None = None, send=None):
    """The stream's body. With the connection's ASGI `send` (what `hostmgmt.asgi` hands an
    async view in its scope), the stream goes live once it has caught up: the hub writes its
    events and this task only wakes for keep-alives and trouble. Without it, this task writes
    every chunk itself."""
    loop = asyncio.get_running_loop()
    slot = slot or _Slot()
    # The kind filter's verdict per kind, worked out once per stream, not once per event.
    verdicts: dict[str, bool] = {}

    def passes(kind: str) -> bool:
        verdict = verdicts.get(kind)
        if verdict is None:
            verdict = verdicts[kind] = wanted(patterns, kind)
        return verdict

    peer = _Peer(client_addr)
    sub = hub.add(conf.SSE_QUEUE_DEPTH, passes, peer)
    try:
        yield OPEN_FRAME
        sub.sent = cursor
        replay = []
        try:
            async for data, seq in _catch_up(cursor, patterns):
                if data:
                    replay.append(data)
                sub.sent = seq
        except Exception as exc:  # Redis vanished meanwhile: let it resume
            log.warning("event stream: ring unavailable (%s)", exc.__class__.__name__)
            return
        if replay:  # the replay as one write too
            yield b"".join(replay)
        keepalive = conf.keepalive_s()
        sub.wrote_at = loop.time()
        next_check = loop.time() + TRANSPORT_CHECK_S
        while True:
            if not sub.items and not (sub.broken or sub.overflow or sub.stalled or sub.resync):
                if send is not None:
                    # Caught up, and everything yielded so far is written (this task runs
                    # again only once Django has sent it): the hub writes from here on.
                    sub.writer = send
                sub.wake.clear()
                # A timer on this task, not wait_for's extra task per wake-up.
                try:
                    async with asyncio.timeout_at(sub.wrote_at + keepalive):
                        await sub.wake.wait()
                except TimeoutError:
                    pass
            if sub.broken:
                return
            # Everything queued since the last write goes out as one write (a stream that
            # fell behind catches up in one chunk); the frames are the hub's shared bytes.
            chunk = sub.drain()
            if chunk:
                yield chunk
                sub.wrote_at = loop.time()
            if sub.overflow:
                log.warning("event stream consumer too slow; disconnected at seq %s", sub.sent)
                peer.cut_off()
                return
            if sub.resync:  # Redis went away: wait for the hub, then re-read the ring
                sub.resync = False
                async for data in _resync(sub.sent, patterns, keepalive):
                    if isinstance(data, int):
                        sub.sent = data
                    else:
                        yield data
                sub.wrote_at = loop.time()
                continue
            now = loop.time()
            if not sub.stalled and sub.writer is None and now >= next_check:
                next_check = now + TRANSPORT_CHECK_S  # a live stream's writes check it
                backlog = peer.unsent()
                sub.stalled = backlog is not None and backlog > conf.SSE_MAX_UNSENT_BYTES
            if sub.stalled:
                log.warning("event stream consumer not reading; disconnected at seq %s", sub.sent)
                peer.cut_off()
                return
            if now >= sub.wrote_at + keepalive:  # whole frames: it may go between the hub's
                yield KEEPALIVE_FRAME
                sub.wrote_at = loop.time()
    finally:
        sub.writer = None
        hub.leave(sub)
        slot.release()
