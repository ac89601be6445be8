"""The low-latency video path, daphne side: `wss://<host>/native/ws` relays one
native session's encoded frames (from its peer process's Unix socket, see `wsvideo.py`) to
the page, one binary WebSocket message per access unit.

A Channels consumer behind two middlewares (wired in `hostmgmt/asgi.py`):
`hostmgmt.websockets.SameOriginValidator` refuses a page of another site, and
`RelayTokenAuthMiddleware` resolves the session token into `scope["native_session"]`, the way
Channels' `AuthMiddleware` resolves a cookie into `scope["user"]`. The token is the only
authority (it was handed to the paired device over its DTLS data channel). The page sends it
as a WebSocket subprotocol (`token.<token>`, beside `hostmgmt.video`), never in the URL, which
would end up in access logs and browser history.

No channel layer: the frames go from one Unix socket to one WebSocket, point to point; a
layer (Redis) in between would add a hop per frame and nothing else, so the consumer opts out
of one even if `CHANNEL_LAYERS` is set some day.
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.middleware import BaseMiddleware

from native import sessions

log = logging.getLogger("native")

PATH = "/native/ws"
SUBPROTOCOL = "hostmgmt.video"
TOKEN_PREFIX = "token."
SCOPE_KEY = "native_session"
LENGTH_SIZE = 4
MAX_FRAME = 16 * 1024 * 1024
CLOSE_REFUSED = 4403  # before the accept: daphne answers the handshake with HTTP 403
CLOSE_GONE = 4404


def find_session(token: str) -> dict | None:
    """The live session whose WebCodecs token this is (constant-time compare), else None."""
    for rec in sessions.registry().values():
        wanted = rec.get("ws_token") or ""
        if wanted and hmac.compare_digest(wanted.encode(), token.encode()):
            return rec
    return None


def offered_token(scope) -> str:
    offered = scope.get("subprotocols") or []
    return next((p[len(TOKEN_PREFIX) :] for p in offered if p.startswith(TOKEN_PREFIX)), "")


class RelayTokenAuthMiddleware(BaseMiddleware):
    """Puts the session named by the subprotocol token in `scope["native_session"]` (None when
    there is no token or it names no live session); the consumer refuses None. A token in the
    query string is never read."""

    async def __call__(self, scope, receive, send):
        token = offered_token(scope)
        rec = await asyncio.to_thread(find_session, token) if token else None
        return await super().__call__({**scope, SCOPE_KEY: rec}, receive, send)


class VideoRelayConsumer(AsyncWebsocketConsumer):
    """Relays the session's frames to the page; the page sends nothing here (its input goes
    over the data channel). Ends the WebSocket with 1000 when the session's socket closes."""

    channel_layer_alias = None  # point to point: no layer, even if one is configured later
    pump: asyncio.Task | None = None
    writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        rec = self.scope.get(SCOPE_KEY)
        if rec is None:
            await self.close(code=CLOSE_REFUSED)
            raise StopConsumer
        try:
            reader, self.writer = await asyncio.open_unix_connection(rec["ws_sock"])
        except OSError:
            await self.close(code=CLOSE_GONE)
            raise StopConsumer from None
        await self.accept(SUBPROTOCOL)
        self.pump = asyncio.create_task(self._pump(reader))

    async def _pump(self, reader: asyncio.StreamReader) -> None:
        # Straight to daphne's send: one message per frame, no per-frame dispatch.
        send = self.base_send
        try:
            while True:
                head = await reader.readexactly(LENGTH_SIZE)
                size = int.from_bytes(head, "little")
                if size > MAX_FRAME:
                    break
                data = await reader.readexactly(size)
                await send({"type": "websocket.send", "bytes": data})
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        self.writer.close()
        try:  # the session ended: tell the page
            await self.close(code=1000)
        except Exception:  # the page left at the same moment
            pass

    async def receive(self, text_data=None, bytes_data=None) -> None:
        pass

    async def disconnect(self, code) -> None:
        if self.pump is not None:
            self.pump.cancel()
        if self.writer is not None:
            self.writer.close()
