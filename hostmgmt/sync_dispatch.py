"""Serve Django's sync views from a thread pool in one hop, and async views through ASGI.

Under daphne, Django's ASGI handler runs a sync view behind about eight event-loop/thread
hops (request signals, each sync middleware boundary, the view), each ~0.1 ms here, and all
sync work shares one thread, so one slow view (an art fetch waiting on a CDN) stalls every
other request. Routing sync views to Django's WSGI handler on a pool of threads costs one
hop and lets slow views block only their own thread. Async views (the SSE streams) keep the
ASGI handler, which is the only one that can stream without holding a thread.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from tempfile import SpooledTemporaryFile

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import connections
from django.urls import Resolver404, get_resolver

log = logging.getLogger(__name__)

BODY_SPOOL_BYTES = 65536

# What a bearer request to the management API (`/api/v1/...` with `Authorization: Bearer`)
# does not use: it never has a console session (the token authenticator answers before the
# session one is asked; a wrong token is a 401 there), DRF views are CSRF-exempt, and
# nothing on those routes sends Django messages. SecurityHeadersMiddleware sets
# X-Frame-Options itself. Skipping them took about a fifth of such a request's time.
BEARER_SKIPPED = frozenset(
    {
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    }
)
V1_PREFIX = "/api/v1/"
# Where an async view finds its connection's ASGI `send` in `request.scope`: the event streams
# (hooks/sse.py) write live events to it from one fan-out loop instead of a task per stream.
ASGI_SEND = "hostmgmt.asgi_send"


def bearer_wsgi_handler() -> WSGIHandler:
    """Django's WSGI handler with the middleware chain of a bearer management request
    (`settings.MIDDLEWARE` less BEARER_SKIPPED; every other check kept, in order)."""
    full = settings.MIDDLEWARE
    settings.MIDDLEWARE = [m for m in full if m not in BEARER_SKIPPED]
    try:
        return WSGIHandler()  # reads settings.MIDDLEWARE once, here
    finally:
        settings.MIDDLEWARE = full


def is_bearer_v1(scope) -> bool:
    if not scope["path"].startswith(V1_PREFIX):
        return False
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return value[:7].lower() == b"bearer "
    return False


def _environ(scope, body) -> dict:
    """The WSGI environ of an ASGI HTTP scope (PEP 3333 names; header values latin-1)."""
    environ = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": "",
        "PATH_INFO": scope["path"].encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    server = scope.get("server") or ("localhost", 80)
    environ["SERVER_NAME"] = str(server[0])
    environ["SERVER_PORT"] = str(server[1] or 0)
    if scope.get("client"):
        environ["REMOTE_ADDR"] = scope["client"][0]
        environ["REMOTE_PORT"] = str(scope["client"][1])
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_LENGTH", "CONTENT_TYPE"):
            name = f"HTTP_{name}"
        value = raw_value.decode("latin-1")
        environ[name] = f"{environ[name]},{value}" if name in environ else value
    return environ


class SyncViewDispatcher:
    """ASGI app: async views → `asgi_app`; everything else → `wsgi_app` on a thread pool
    (`bearer_app` for bearer requests to the management API)."""

    def __init__(self, asgi_app, wsgi_app, threads: int = 16, bearer_app=None):
        self.asgi_app = asgi_app
        self.wsgi_app = wsgi_app
        self.bearer_app = bearer_app or wsgi_app
        self.threads = threads
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="django-sync")
        self._async_paths: dict[str, bool] = {}

    def start_threads(self) -> None:
        """Start every view thread now, each with its database connection open.

        The pool would start a thread only when a request finds none idle, and each thread
        keeps its own SQLite connection (CONN_MAX_AGE=None: the database file and its WAL,
        two fds) for the life of the process: the process's open files then grew with the
        busiest moment so far, up to the pool's size, which looks like a leak to anything
        that watches fds (the soak) and puts a connection's set-up into a request. Started
        here, the set is whole before daphne listens and stays the same for the process's
        life."""
        barrier = threading.Barrier(self.threads)

        def open_connections() -> None:
            barrier.wait(timeout=30)  # holds each thread until all are started
            for conn in connections.all():
                try:
                    conn.ensure_connection()
                except Exception as exc:  # the thread's first request opens it (and says why)
                    log.warning("view thread: database %s not opened at start: %s",
                                conn.alias, exc)  # fmt: skip

        for future in [self.pool.submit(open_connections) for _ in range(self.threads)]:
            future.result()

    @staticmethod
    def load_urls() -> None:
        """Import the URL conf (every app's views and what they pull in) now: daphne loads the
        application before it listens, so this moves out of the first request (a py-spy
        profile of it is mostly these imports; a first GET /health measures 30 ms with them
        in it, 17 ms without) into the start the supervisor waits for."""
        get_resolver().url_patterns  # noqa: B018 - the property imports them

    def _is_async_view(self, path: str) -> bool:
        cached = self._async_paths.get(path)
        if cached is not None:
            return cached
        try:
            match = get_resolver().resolve(path)
            result = iscoroutinefunction(match.func)
        except Resolver404:
            result = False
        if len(self._async_paths) < 4096:  # paths with ids in them must not grow this forever
            self._async_paths[path] = result
        return result

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.asgi_app(scope, receive, send)
        if self._is_async_view(scope["path"]):
            return await self.asgi_app({**scope, ASGI_SEND: send}, receive, send)
        with SpooledTemporaryFile(max_size=BODY_SPOOL_BYTES) as body:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body.write(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body.seek(0)
            app = self.bearer_app if is_bearer_v1(scope) else self.wsgi_app
            status, headers, content = await self.run_in_pool(self._run, app, scope, body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def run_in_pool(self, fn, *args):
        """`fn(*args)` on a view thread."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def _run(self, app, scope, body):
        started: dict = {}

        def start_response(status, response_headers, exc_info=None):
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [
                (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response_headers
            ]

        result = app(_environ(scope, body), start_response)
        try:
            content = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()  # fires request_finished: Django closes this thread's DB connection
        return started["status"], started["headers"], content
