"""The host's ASGI app plus bare endpoints under /hello, for bench/api_latency.py.

Each /hello endpoint adds one layer of what a host route goes through, on the same daphne
process, so the bench can say which layer costs what:
- `/hello`: raw ASGI, no Django (the floor the goal divides by);
- `/hello/pool`: plus the hop to a view thread and back (`SyncViewDispatcher`'s thread pool);
- `/hello/wsgi`: plus the WSGI call the dispatcher makes (environ, start_response, body) of a
  trivial WSGI app, no Django.
`/api/v1/health` then adds Django's handler, the bearer middleware and DRF with an empty view.
"""

from hostmgmt.asgi import application as host_app
from hostmgmt.asgi import django_app

HELLO = b'{"hello":"world"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(HELLO)).encode())]


def trivial_wsgi(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [HELLO]


def nothing():
    return None


async def application(scope, receive, send):
    path = scope.get("path", "") if scope["type"] == "http" else ""
    if path.startswith("/hello"):
        if path == "/hello/pool":
            await django_app.run_in_pool(nothing)
        elif path == "/hello/wsgi":
            await django_app.run_in_pool(django_app._run, trivial_wsgi, scope, None)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": HELLO})
        return
    await host_app(scope, receive, send)
