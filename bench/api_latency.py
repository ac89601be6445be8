"""API request latency and throughput over TLS, against a bare ASGI baseline in the same run.

Run by hand: .venv/bin/python bench/api_latency.py [--seconds 8] [--processes N]

Starts a real host (runhost: supervisor, Redis, Celery, daphne, the planes) and, beside it, N
daphnes (default: the host's number of web processes) on one TLS port (SO_REUSEPORT,
bench/bare_daphne.py) on the host's own certificate, serving the host's ASGI app plus /hello (raw
ASGI, no Django; and with one more layer of a host route at a time: the hop to a view thread, the
WSGI call) against the host's state and Redis: the bare app and the host's routes on the same
server, in the same run, with the same number of processes (to compare with a host that runs N web
processes). A separate client process opens C keep-alive TLS connections (default 10) and measures
GET /hello and each read route with the bearer token; admin routes (`/api/...` outside `/api/v1`)
go with HTTP Basic, so each request also pays the login throttle's check in Redis. Prints
requests/s, p50 and p99 per route, the server daphne's CPU per request and its share of a core (all
N processes together), the client's CPU per request (which of the two ran out of CPU), the ratios
host/bare of req/s, p50 and p99, whether the goal (>= 0.3x bare, p99 <= 20 ms) is met, and the load
average at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing as mp
import os
import ssl
import statistics
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import bare_daphne  # noqa: E402
from supervisor import web_listener  # noqa: E402


async def _worker(host, port, ctx, request: bytes, deadline: float, latencies: list[float]):
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx)
    try:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            writer.write(request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            status = int(head.split(b" ", 2)[1])
            await reader.readexactly(length)
            if status != 200:
                raise RuntimeError(f"status {status}")
            latencies.append(time.perf_counter() - t0)
    finally:
        writer.close()


async def _run(host, port, cafile, path, token, conns, seconds):
    ctx = ssl.create_default_context(cafile=cafile)
    headers = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: keep-alive\r\n"
    if token and path.startswith("/api/") and not path.startswith("/api/v1/"):
        basic = base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
        headers += f"Authorization: Basic {basic}\r\n"
    elif token:
        headers += f"Authorization: Bearer {token}\r\n"
    request = (headers + "\r\n").encode()
    latencies: list[float] = []
    # warm-up
    await _worker(host, port, ctx, request, time.perf_counter() + 0.5, [])
    start, cpu = time.perf_counter(), time.process_time()
    deadline = start + seconds
    await asyncio.gather(
        *(_worker(host, port, ctx, request, deadline, latencies) for _ in range(conns))
    )
    elapsed = time.perf_counter() - start
    return len(latencies) / elapsed, latencies, time.process_time() - cpu, elapsed


def client_process(args, queue):
    queue.put(asyncio.run(_run(*args)))


def measure(host, port, cafile, path, token, conns, seconds, servers):
    """(req/s, p50 ms, p99 ms, the server's CPU ms per request, its % of a core, the client's
    CPU ms per request): the CPU columns say whether the server or the client ran out."""
    queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(
        target=client_process, args=((host, port, cafile, path, token, conns, seconds), queue)
    )
    before = server_cpu_s(servers)
    proc.start()
    rps, latencies, client_cpu, elapsed = queue.get()
    server_cpu = server_cpu_s(servers) - before  # includes the 0.5 s warm-up
    proc.join()
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    n = max(len(latencies), 1)
    return rps, p50, p99, server_cpu / n * 1000, server_cpu / elapsed * 100, client_cpu / n * 1000


def server_cpu_s(servers) -> float:
    return sum(sum(s.cpu_times()[:2]) for s in servers)


ROUTES = (
    "/api/v1/health",
    "/api/v1/host",
    "/api/v1/status",
    "/api/v1/library",
    "/api/v1/clients",
    "/api/v1/display/state",
    "/api/v1/gpus",
    "/api/config",
)
# What a host route adds to the bare app, one layer at a time (bench/asgi_with_hello.py); the
# first route, /api/v1/health, then adds Django, the bearer middleware and DRF (an empty view).
LAYERS = (("/hello/pool", "+ view-thread hop"), ("/hello/wsgi", "+ WSGI call"))
ADMIN = ("bench-admin", "bench-admin-password-1")
GOAL_RATIO, GOAL_P99_MS = 0.3, 20.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", default="10")
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument(
        "--processes",
        type=int,
        default=web_listener.default_processes(),
        help="daphnes serving both apps on one port (default: the host's web processes)",
    )
    opts = parser.parse_args()
    from tests.support.livehost import start_host

    # The running host (supervisor, Redis, Celery, its own daphne and planes) owns the state;
    # N more daphnes on the same certificate serve the host's ASGI app plus the bare /hello
    # against that state and Redis, so both are measured on one server in one run.
    host = start_host()
    host.set_first_admin(*ADMIN)
    # Through the host's own daphne entry point (its body limits and GIL interval), so the
    # figures are the host's server, not stock daphne's.
    port, daphnes = bare_daphne.start(host, "bench.asgi_with_hello:application", opts.processes)
    cert = host.state_dir / "tls-cert.pem"
    token = host.mgmt_token
    try:
        load = os.getloadavg()
        print(
            f"{opts.processes} daphne(s) over TLS on 127.0.0.1:{port} beside the running host, "
            f"{opts.seconds:.0f} s per point, {os.cpu_count()} cores, "
            f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
        )
        server = [psutil.Process(d.pid) for d in daphnes]
        head = ("conns", "route", "req/s", "p50 ms", "p99 ms", "srv ms", "srv %", "cli ms")
        print(
            "{:>5} {:<22} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7}".format(*head)
            + "  host/bare: req/s   p50   p99  goal"
        )

        def row(conns, name, rps, p50, p99, srv_ms, srv_pct, cli_ms):
            return (
                f"{conns:>5} {name:<22} {rps:>8.0f} {p50:>8.2f} {p99:>8.2f} {srv_ms:>7.2f} "
                f"{srv_pct:>6.0f} {cli_ms:>7.2f}"
            )

        for conns in [int(c) for c in opts.connections.split(",")]:
            hello = measure(
                "127.0.0.1", port, str(cert), "/hello", None, conns, opts.seconds, server
            )
            print(row(conns, "/hello (bare ASGI)", *hello))
            for layer, name in LAYERS:
                point = measure(
                    "127.0.0.1", port, str(cert), layer, None, conns, opts.seconds, server
                )
                print(f"{row(conns, name, *point)}  {' ' * 10}{point[0] / hello[0]:>5.2f}")
            for route in opts.routes.split(","):
                point = measure(
                    "127.0.0.1", port, str(cert), route, token, conns, opts.seconds, server
                )
                ratio = point[0] / hello[0]
                met = "met" if ratio >= GOAL_RATIO and point[2] <= GOAL_P99_MS else "not met"
                print(
                    f"{row(conns, route, *point)}  {' ' * 10}{ratio:>5.2f} "
                    f"{point[1] / hello[1]:>5.1f} {point[2] / hello[2]:>5.1f}  {met}"
                )
        load = os.getloadavg()
        print(f"load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    finally:
        bare_daphne.stop(daphnes)
        host.stop()


if __name__ == "__main__":
    main()
