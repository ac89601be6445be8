"""Pairing cost and nvhttp throughput of the compat plane's listener, baseline in the same run.

Run by hand:  .venv/bin/python bench/pairing.py [--pairings 10] [--seconds 5] [--threads 4]

Starts `manage.py run_compat_plane` on a throwaway state dir and free ports (no mDNS), then:
1. Host-side CPU time of one full pairing after the PIN is entered: a real Moonlight client
   (moonlight-python) knocks, the PIN is handed over as `POST /api/pin` does, and the listener
   process's on-CPU time (all threads, /proc schedstat) is read just before the PIN and after the
   client finished. Baseline: the handshake's crypto alone, in this process.
2. Requests per second of `/serverinfo` and `/applist` over HTTPS with a paired client
   certificate (a new TLS connection per request, as the host closes each one, like Sunshine).
   Baseline: plain-HTTP `/serverinfo` in the same run. The load generator shares the machine's
   cores with the listener, so these are lower bounds for a dedicated host.
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_base() -> int:
    from tests.support.livehost import free_base_port

    return free_base_port()


def setup_env() -> tuple[Path, int]:
    state = Path(tempfile.mkdtemp(prefix="bench-pairing-"))
    base = free_base()
    os.environ.update(
        HOST_STATE_DIR=str(state),
        HOST_PORT=str(base),
        DJANGO_SETTINGS_MODULE="hostmgmt.settings",
        HOST_LOG_LEVEL="WARNING",
        REDIS_URL="unix:///nonexistent-bench.sock",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from access import identity

    identity.ensure_identity()
    identity.ensure_tls()
    return state, base


def start_listener(base: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "run_compat_plane", "--no-mdns"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", base - 5), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("listener did not start")


def cpu_s(pid: int) -> float:
    """On-CPU seconds of every thread of `pid` (schedstat: nanoseconds, unlike clock ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


def bench_pairing(proc, base: int, rounds: int, config_dir: Path) -> list[float]:
    from moonlight_python import MoonlightClient
    from moonlight_python.discovery import connect_to_server

    from pairing import services

    client = MoonlightClient(config_dir=str(config_dir))
    server = connect_to_server("127.0.0.1", client._identity, base)
    costs = []
    for _ in range(rounds):
        errors: list[BaseException] = []

        def run():
            try:
                client.pair(server, pin="4821")
            except BaseException as exc:
                errors.append(exc)  # noqa: B023 - read right after join

        t = threading.Thread(target=run)
        t.start()
        while not services.pending_requests():
            time.sleep(0.01)
        time.sleep(0.3)  # let the listener settle into its PIN poll
        before = cpu_s(proc.pid)
        assert services.submit_pin("4821", "bench")
        t.join(30)
        after = cpu_s(proc.pid)
        assert not errors, errors
        costs.append(after - before)
    return costs


def crypto_baseline(rounds: int) -> float:
    """CPU seconds of the host's handshake steps alone (no HTTP, no database)."""
    from cryptography.hazmat.primitives import serialization

    from access import identity
    from compat.nvhttp.handshake import HostIdentity, ServerHandshake
    from pairing import crypto
    from tests.compat.test_handshake import Client

    pem = identity.cert_path().read_bytes()
    key = serialization.load_pem_private_key(identity.key_path().read_bytes(), None)
    from cryptography import x509

    host = HostIdentity(pem, key, x509.load_pem_x509_certificate(pem).signature)
    total = 0.0
    for _ in range(rounds):
        c = Client("4821")
        challenge = c.client_challenge()
        secret = c.pairing_secret()
        t0 = time.process_time()
        hs = ServerHandshake(
            crypto.load_client_cert(c.cert.public_bytes(serialization.Encoding.PEM)), c.salt, host
        )
        hs.accept_pin("4821")
        resp = hs.client_challenge(challenge)
        t1 = time.process_time()
        enc, _ = c.answer(resp, pem)
        t2 = time.process_time()
        hs.server_challenge_response(enc)
        assert hs.client_pairing_secret(secret)
        t3 = time.process_time()
        total += (t1 - t0) + (t3 - t2)
    return total / rounds


def client_ctx(config_dir: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(config_dir / "cert.pem"), str(config_dir / "key.pem"))
    return ctx


def one(port: int, path: str, ctx: ssl.SSLContext | None) -> bytes:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if ctx is not None:
        sock = ctx.wrap_socket(sock)
    with sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def rate(port: int, path: str, ctx, seconds: float, threads: int, expect: bytes) -> float:
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def worker(i):
        while time.monotonic() < stop:
            body = one(port, path, ctx)
            assert expect in body, body[-300:]
            counts[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairings", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()

    state, base = setup_env()
    proc = start_listener(base)
    try:
        config_dir = state / "moonlight"
        costs = bench_pairing(proc, base, args.pairings, config_dir)
        floor = crypto_baseline(args.pairings)
        ms = sorted(c * 1000 for c in costs)
        print(
            f"pairing after PIN, listener CPU ms over {len(ms)} pairings: "
            f"median {statistics.median(ms):.1f}, min {ms[0]:.1f}, max {ms[-1]:.1f} "
            "(4 nvhttp requests, one TLS handshake, the client row, events)"
        )
        print(f"  baseline, handshake crypto alone in-process: {floor * 1000:.2f} ms")

        ctx = client_ctx(config_dir)
        q = "?uniqueid=0123456789ABCDEF&uuid=1"
        http = rate(base, "/serverinfo" + q, None, args.seconds, args.threads, b"<hostname>")
        info = rate(
            base - 5,
            "/serverinfo" + q,
            ctx,
            args.seconds,
            args.threads,
            b"<PairStatus>1</PairStatus>",
        )
        apps = rate(base - 5, "/applist" + q, ctx, args.seconds, args.threads, b"<AppTitle>")
        print(f"HTTPS + client cert, {args.threads} client threads, new connection per request:")
        print(f"  /serverinfo {info:.0f} req/s, /applist {apps:.0f} req/s")
        print(f"  baseline, plain HTTP /serverinfo: {http:.0f} req/s")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
