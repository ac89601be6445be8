"""The host's ASGI app plus a bare hello-world endpoint at /hello, for bench/api_latency.py.

The hello endpoint answers from raw ASGI without Django, so the difference between it and a
real route is what Django, DRF and our auth cost per request on the same daphne server.
"""

from hostmgmt.asgi import application as host_app

HELLO = b'{"hello":"world"}'


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/hello":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(HELLO)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": HELLO})
        return
    await host_app(scope, receive, send)
