"""What every WebSocket of the host goes through, whatever its route (see `hostmgmt/asgi.py`).

Why our own origin check and not Channels' `AllowedHostsOriginValidator`: `ALLOWED_HOSTS` is
`*` (the host answers on whatever name the LAN knows it by), which would let any site's page
open a socket. The rule here is the browser's own notion of same origin, minus the scheme:
the `Origin` header's host and port must be the `Host` the request was sent to.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.middleware import BaseMiddleware

CLOSE_CROSS_ORIGIN = 4403
CLOSE_NO_ROUTE = 4404


def same_origin(scope) -> bool:
    """A non-empty `Origin` whose host:port is the request's `Host`."""
    headers = dict(scope.get("headers") or [])
    origin = headers.get(b"origin", b"").decode("latin-1")
    host = headers.get(b"host", b"").decode("latin-1")
    return bool(origin) and urlsplit(origin).netloc == host


class Refuse(AsyncWebsocketConsumer):
    """Closes before the accept (daphne answers the handshake with HTTP 403) and ends."""

    code = CLOSE_NO_ROUTE
    channel_layer_alias = None

    async def connect(self) -> None:
        await self.close(code=self.code)
        raise StopConsumer


class RefuseCrossOrigin(Refuse):
    code = CLOSE_CROSS_ORIGIN


class SameOriginValidator(BaseMiddleware):
    """Channels middleware: a WebSocket whose `Origin` is not this host is refused before any
    route or credential is looked at, so another site's page cannot use one even with a leaked
    token."""

    refuse = staticmethod(RefuseCrossOrigin.as_asgi())

    async def __call__(self, scope, receive, send):
        if not same_origin(scope):
            return await self.refuse(scope, receive, send)
        return await super().__call__(scope, receive, send)
