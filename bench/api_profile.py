"""Where a read-API request's time goes: cProfile + pstats and Django's query count per route.

Run by hand:  .venv/bin/python bench/api_profile.py [--requests 200] [--top 10]

Sets up a throwaway host state (tokens, migrations, identity, TLS) with its own private Redis
(the same redis-server arguments the supervisor uses), then drives each read route, with the
bearer token, through the handler daphne's dispatcher hands such a request to, in-process
(Django's middleware, DRF, auth, the view, the renderer). Prints per route the mean time per
request, the SQL queries per request (the `PRAGMA data_version` change check of
common/dbversion.py runs on the raw connection and is not counted) and the top
functions by cumulative time. A warm-up request runs first so one-time imports do not count.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUTES = [
    "/api/v1/health",
    "/api/v1/host",
    "/api/v1/status",
    "/api/v1/library",
    "/api/v1/clients",
    "/api/v1/display/state",
    "/api/v1/gpus",
]


OWN_CODE = r"^(?!.*(site-packages|bench/|<frozen|\{built-in))"


def setup(state: Path, redis_sock: Path) -> str:
    os.environ.update(
        {
            "HOST_STATE_DIR": str(state),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
            "HOST_LOG_LEVEL": "WARNING",
            "REDIS_URL": f"unix://{redis_sock}",
        }
    )
    from tests.support.livehost import free_base_port

    os.environ["HOST_PORT"] = str(free_base_port())
    import django

    django.setup()
    from access import tokens
    from supervisor.main import Supervisor

    Supervisor().prepare()
    return tokens.current_token(tokens.MGMT)


def wsgi_get(app, path: str, token: str) -> tuple[int, bytes]:
    """One GET through the handler daphne's dispatcher hands sync views to (in this thread,
    so cProfile sees the middleware, DRF, auth and the view)."""
    import io as _io

    from hostmgmt.sync_dispatch import _environ

    scope = {
        "method": "GET",
        "scheme": "https",
        "path": path,
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 443),
    }
    out: dict = {}

    def start_response(status, headers, exc_info=None):
        out["status"] = int(status.split()[0])

    body = b"".join(app(_environ(scope, _io.BytesIO(b"")), start_response))
    return out["status"], body


def profile_route(app, path, token, n, top):
    from django.db import connection

    status, body = wsgi_get(app, path, token)  # warm-up
    prof = cProfile.Profile()
    queries = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    # (Django empties connection.queries at each request_started: count with a wrapper.)
    with connection.execute_wrapper(count):
        t0 = time.perf_counter()
        prof.enable()
        for _ in range(n):
            wsgi_get(app, path, token)
        prof.disable()
        elapsed = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        wsgi_get(app, path, token)
    plain = time.perf_counter() - t0
    buf = io.StringIO()
    # The project's own frames and the stdlib (file reads, subprocesses, sockets): the
    # framework's wrappers all sit at the top of a cumulative sort and would hide them.
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(OWN_CODE, top)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    print(f"\n== {path}  status {status}  {len(body)} bytes")
    root = str(ROOT) + "/"
    print(
        f"   {plain / n * 1000:.2f} ms/request ({elapsed / n * 1000:.2f} profiled), "
        f"{len(queries) / n:.1f} SQL queries/request"
    )
    for ln in lines[start : start + top + 1]:
        print("   " + ln.replace(root, "").replace(sys.base_prefix + "/lib/", "")[:150])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--routes", default=",".join(ROUTES))
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-prof-"))
    state = tmp / "state"
    state.mkdir()
    from supervisor import redis_server

    sock = tmp / "redis.sock"
    redis = subprocess.Popen(
        redis_server.redis_argv(sock, tmp / "data"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        redis_server.wait_ready(f"unix://{sock}")
        token = setup(state, sock)
        from hostmgmt.asgi import django_app

        # The handler daphne's dispatcher gives a bearer /api/v1 request.
        app = getattr(django_app, "bearer_app", django_app.wsgi_app)
        for path in opts.routes.split(","):
            profile_route(app, path, token, opts.requests, opts.top)
    finally:
        redis.terminate()
        redis.wait(10)


if __name__ == "__main__":
    main()
