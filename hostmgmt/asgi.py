"""ASGI entry point served by daphne, a Channels `ProtocolTypeRouter`: HTTP goes through the
body-size guard to Django (sync views on a thread pool, async views such as the event streams
through Django's ASGI handler); WebSockets go through the same-origin check to the routes of
the apps (today only the native plane's video relay), and any other path is refused."""

from __future__ import annotations

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")

from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

from hostmgmt.sync_dispatch import SyncViewDispatcher, bearer_wsgi_handler

django_app = SyncViewDispatcher(
    get_asgi_application(), get_wsgi_application(), bearer_app=bearer_wsgi_handler(), threads=8
)
django_app.load_urls()
django_app.start_threads()

from django.conf import settings  # noqa: E402

from apikit.errors import error_body, is_v1_path  # noqa: E402


class BodyLimit:
    """Answer 413 to bodies over the limit: by Content-Length before reading any of it, and
    for chunked bodies as soon as the running count passes the limit.

    A second line only: under daphne, Twisted has read the body before the application runs,
    so the limits that protect memory and disk are enforced in the parser
    (common/bodylimit.py via hostmgmt/daphne_main.py)."""

    def __init__(self, app, limit: int, mgmt_limit: int):
        self.app = app
        self.default_limit = limit
        self.mgmt_limit = mgmt_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.mgmt_limit if is_v1_path(scope.get("path", "")) else self.default_limit
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    return await self._reply(scope, send, 400, "invalid Content-Length")
                if length > limit:
                    return await self._reply(scope, send, 413, "request body too large")
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge()
            return message

        try:
            return await self.app(scope, limited_receive, send)
        except BodyTooLarge:
            return await self._reply(scope, send, 413, "request body too large")

    @staticmethod
    async def _reply(scope, send, status: int, message: str):
        body = json.dumps(error_body(scope.get("path", ""), status, message)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"x-frame-options", b"DENY"),
                    (b"content-security-policy", b"frame-ancestors 'none'"),
                    (b"strict-transport-security", b"max-age=31536000"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class BodyTooLarge(Exception):
    pass


from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from hostmgmt.websockets import Refuse, SameOriginValidator  # noqa: E402
from native.routing import websocket_urlpatterns as native_websockets  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_app, settings.MAX_REQUEST_BODY, settings.MGMT_MAX_REQUEST_BODY),
        "websocket": SameOriginValidator(
            URLRouter([*native_websockets, re_path(r"", Refuse.as_asgi())])
        ),
    }
)
