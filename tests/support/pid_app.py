"""An ASGI app that answers every request with the pid of the process serving it: which of
several daphne processes on one socket took a connection. Imports nothing of the host."""

from __future__ import annotations

import os


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = str(os.getpid()).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
