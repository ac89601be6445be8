"""The low-latency video path, daphne side: `wss://<host>/native/ws` relays one
native session's encoded frames (from its peer process's Unix socket, see `wsvideo.py`) to
the page, one binary WebSocket message per access unit.

Why a raw ASGI app in front of Django: Django's ASGI handler speaks HTTP only, and this relay
needs nothing from Django but the session registry. The token is the only authority (it was
handed to the paired device over its DTLS data channel); the Origin must also be this host,
so another site's page cannot open it even with a leaked token. The page sends the token as
a WebSocket subprotocol (`token.<token>`, beside `hostmgmt.video`), never in the URL, which
would end up in access logs and browser history.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from urllib.parse import urlsplit

log = logging.getLogger("streaming.native")

PATH = "/native/ws"
SUBPROTOCOL = "hostmgmt.video"
TOKEN_PREFIX = "token."
LENGTH_SIZE = 4
MAX_FRAME = 16 * 1024 * 1024


def _find(token: str) -> dict | None:
    from streaming.native import sessions

    for rec in sessions.registry().values():
        wanted = rec.get("ws_token") or ""
        if wanted and hmac.compare_digest(wanted.encode(), token.encode()):
            return rec
    return None


def _same_origin(scope) -> bool:
    headers = dict(scope.get("headers") or [])
    origin = headers.get(b"origin", b"").decode("latin-1")
    host = headers.get(b"host", b"").decode("latin-1")
    return bool(origin) and urlsplit(origin).netloc == host


async def relay(scope, receive, send) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    offered = scope.get("subprotocols") or []
    token = next((p[len(TOKEN_PREFIX) :] for p in offered if p.startswith(TOKEN_PREFIX)), "")
    rec = await asyncio.to_thread(_find, token) if token and _same_origin(scope) else None
    if rec is None:
        await send({"type": "websocket.close", "code": 4403})
        return
    try:
        reader, writer = await asyncio.open_unix_connection(rec["ws_sock"])
    except OSError:
        await send({"type": "websocket.close", "code": 4404})
        return
    await send({"type": "websocket.accept", "subprotocol": SUBPROTOCOL})

    async def pump() -> None:
        try:
            while True:
                head = await reader.readexactly(LENGTH_SIZE)
                size = int.from_bytes(head, "little")
                if size > MAX_FRAME:
                    return
                data = await reader.readexactly(size)
                await send({"type": "websocket.send", "bytes": data})
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    async def watch() -> None:
        while (await receive())["type"] != "websocket.disconnect":
            pass  # the page sends nothing here: input goes over the data channel

    tasks = [asyncio.create_task(pump()), asyncio.create_task(watch())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        pump_ended = tasks[0] in done
    finally:
        for t in tasks:
            t.cancel()
        writer.close()
    if pump_ended:  # the session ended: tell the page
        try:
            await send({"type": "websocket.close", "code": 1000})
        except Exception:  # noqa: BLE001 - the page left at the same moment
            pass


class NativeWebSockets:
    """ASGI wrapper: `/native/ws` WebSockets to the relay, everything else to `app`."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            if scope.get("path") == PATH:
                return await relay(scope, receive, send)
            await receive()
            return await send({"type": "websocket.close", "code": 4404})
        return await self.app(scope, receive, send)
