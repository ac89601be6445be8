"""A bare ASGI event stream (no Django) for bench/events.py: the floor of the host's SSE.

Any GET opens a stream; one task per process subscribes to the host's Redis event channel and
writes each event, framed as the host frames it, to every open stream in turn. Same Redis, same
daphne, same TLS and the same client processes as the host's `/api/v1/events`, so the
difference is what the host's view, auth, filters, replay and hub bookkeeping cost.
"""

from __future__ import annotations

import asyncio
import json
import os

import redis.asyncio

CHANNEL = os.environ.get("HOST_EVENTS_PREFIX", "hostmgmt:events") + ":live"
HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]

streams: set = set()
_task: asyncio.Task | None = None
_ready = asyncio.Event()


async def _fan_out() -> None:
    client = redis.asyncio.Redis.from_url(os.environ["REDIS_URL"])
    pubsub = client.pubsub()
    await pubsub.subscribe(CHANNEL)
    _ready.set()
    async for msg in pubsub.listen():
        if msg["type"] != "message":
            continue
        raw = msg["data"].decode()
        head = json.loads(raw)
        data = f"id: {head['seq']}\nevent: {head['kind']}\ndata: {raw}\n\n".encode()
        body = {"type": "http.response.body", "body": data, "more_body": True}
        for send in tuple(streams):
            await send(body)


async def application(scope, receive, send):
    global _task
    if scope["type"] != "http":
        return
    if _task is None:
        _task = asyncio.get_running_loop().create_task(_fan_out())
    await _ready.wait()
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})
    streams.add(send)
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    finally:
        streams.discard(send)
