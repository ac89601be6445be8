"""API request latency and throughput over TLS, against a bare ASGI baseline in the same run.

Run by hand:  .venv/bin/python bench/api_latency.py [--seconds 8]

Starts a real host (runhost: supervisor, Redis, Celery, daphne, the planes) and, beside it, a
daphne on the host's own certificate serving the host's ASGI app plus /hello (raw ASGI, no
Django) against the host's state and Redis. A separate client process opens N keep-alive TLS
connections (default 10) and measures GET /hello and each read route with the bearer token;
admin routes (`/api/...` outside `/api/v1`) go with HTTP Basic, so each request also pays the
login throttle's check in Redis. Prints requests/s, p50 and p99 per route, the server daphne's
CPU per request and its share of a core, the client's CPU per request (which of the two ran
out of CPU), the ratio to the bare app, whether the goal (>= 0.3x bare, p99 <= 20 ms) is met,
and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing as mp
import os
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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


def measure(host, port, cafile, path, token, conns, seconds, server):
    """(req/s, p50 ms, p99 ms, the server's CPU ms per request, its % of a core, the client's
    CPU ms per request): the CPU columns say whether the server or the client ran out."""
    queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(
        target=client_process, args=((host, port, cafile, path, token, conns, seconds), queue)
    )
    before = sum(server.cpu_times()[:2])
    proc.start()
    rps, latencies, client_cpu, elapsed = queue.get()
    server_cpu = sum(server.cpu_times()[:2]) - before  # includes the 0.5 s warm-up
    proc.join()
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    n = max(len(latencies), 1)
    return rps, p50, p99, server_cpu / n * 1000, server_cpu / elapsed * 100, client_cpu / n * 1000


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
ADMIN = ("bench-admin", "bench-admin-password-1")
GOAL_RATIO, GOAL_P99_MS = 0.3, 20.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", default="10")
    parser.add_argument("--routes", default=",".join(ROUTES))
    opts = parser.parse_args()
    from tests.support.livehost import free_base_port, start_host

    # The running host (supervisor, Redis, Celery, its own daphne and planes) owns the state;
    # a second daphne on the same certificate serves the host's ASGI app plus the bare /hello
    # against that state and Redis, so both are measured on one server in one run.
    host = start_host()
    host.set_first_admin(*ADMIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.update(
        HOST_STATE_DIR=str(host.state_dir),
        HOST_PORT=str(host.base_port),
        REDIS_URL=f"unix://{host.state_dir / 'redis.sock'}",
        DJANGO_SETTINGS_MODULE="hostmgmt.settings",
        HOST_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    port = free_base_port() + 1
    cert, key = host.state_dir / "tls-cert.pem", host.state_dir / "tls-key.pem"
    endpoint = f"ssl:{port}:interface=127.0.0.1:privateKey={key}:certKey={cert}"
    daphne = subprocess.Popen(
        # Through the host's own daphne entry point (its body limits and GIL interval), so
        # the figures are the host's server, not stock daphne's.
        [
            sys.executable,
            "-m",
            "hostmgmt.daphne_main",
            "-v",  # as the supervisor starts it: no access log (one line per request)
            "0",
            "-e",
            endpoint,
            "bench.asgi_with_hello:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    token = host.mgmt_token
    try:
        import socket

        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        load = os.getloadavg()
        print(
            f"daphne over TLS on 127.0.0.1:{port} beside the running host, "
            f"{opts.seconds:.0f} s per point, {os.cpu_count()} cores, "
            f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
        )
        server = psutil.Process(daphne.pid)
        head = ("conns", "route", "req/s", "p50 ms", "p99 ms", "srv ms", "srv %", "cli ms")
        print("{:>5} {:<22} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7}  x bare  goal".format(*head))

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
            for route in opts.routes.split(","):
                point = measure(
                    "127.0.0.1", port, str(cert), route, token, conns, opts.seconds, server
                )
                ratio = point[0] / hello[0]
                met = "met" if ratio >= GOAL_RATIO and point[2] <= GOAL_P99_MS else "not met"
                print(f"{row(conns, route, *point)}  {ratio:>6.2f}  {met}")
        load = os.getloadavg()
        print(f"load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    finally:
        daphne.terminate()
        daphne.wait()
        host.stop()


if __name__ == "__main__":
    main()
