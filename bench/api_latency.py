"""API request latency and throughput over TLS, against a bare ASGI baseline in the same run.

Run by hand:  .venv/bin/python bench/api_latency.py [--seconds 8]

Starts daphne (TLS, the host's own certificate) on a throwaway state dir serving the real host
app plus /hello (raw ASGI, no Django). A separate client process opens N keep-alive TLS
connections and measures GET /api/v1/host with the bearer token, and GET /hello, at 1, 10 and
50 connections. Prints requests/s, p50 and p99 latency, and the host/hello ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def prepare_state(state_dir: Path, base: int) -> str:
    os.environ.update(
        {
            "HOST_STATE_DIR": str(state_dir),
            "HOST_PORT": str(base),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
            "HOST_LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from hostmgmt.auth import tokens
    from hostmgmt.supervisor.main import Supervisor

    Supervisor().prepare()
    return tokens.current_token(tokens.MGMT)


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
    if token:
        headers += f"Authorization: Bearer {token}\r\n"
    request = (headers + "\r\n").encode()
    latencies: list[float] = []
    # warm-up
    await _worker(host, port, ctx, request, time.perf_counter() + 0.5, [])
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(
        *(_worker(host, port, ctx, request, deadline, latencies) for _ in range(conns))
    )
    elapsed = time.perf_counter() - start
    return len(latencies) / elapsed, latencies


def client_process(args, queue):
    queue.put(asyncio.run(_run(*args)))


def measure(host, port, cafile, path, token, conns, seconds):
    queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(
        target=client_process, args=((host, port, cafile, path, token, conns, seconds), queue)
    )
    proc.start()
    rps, latencies = queue.get()
    proc.join()
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    return rps, p50, p99


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", default="1,10,50")
    opts = parser.parse_args()
    from tests.support.livehost import free_base_port

    state = Path(tempfile.mkdtemp(prefix="bench-api-"))
    base = free_base_port()
    token = prepare_state(state, base)
    port = base + 1
    cert, key = state / "tls-cert.pem", state / "tls-key.pem"
    endpoint = f"ssl:{port}:interface=127.0.0.1:privateKey={key}:certKey={cert}"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    daphne = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-e", endpoint, "bench.asgi_with_hello:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import socket

        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        print(
            f"daphne over TLS on 127.0.0.1:{port}, {opts.seconds:.0f} s per point, 2 cores shared"
        )
        print(f"{'conns':>5} {'route':<16} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
        for conns in [int(c) for c in opts.connections.split(",")]:
            hello = measure("127.0.0.1", port, str(cert), "/hello", None, conns, opts.seconds)
            host = measure("127.0.0.1", port, str(cert), "/api/v1/host", token, conns, opts.seconds)
            for name, (rps, p50, p99) in (("/hello (bare)", hello), ("/api/v1/host", host)):
                print(f"{conns:>5} {name:<16} {rps:>8.0f} {p50:>8.2f} {p99:>8.2f}")
            print(
                f"{conns:>5} {'ratio host/bare':<16} {host[0] / hello[0]:>8.2f}"
                f" {host[1] / hello[1]:>8.2f} {host[2] / hello[2]:>8.2f}"
            )
    finally:
        daphne.terminate()
        daphne.wait()


if __name__ == "__main__":
    main()
