"""Event bus outage benchmark: what `emit` costs while Redis is away (kept + spooled with
fdatasync), and how long N kept events take to be delivered once Redis is back.

Run by hand: `.venv/bin/python bench/events_outage.py [--counts 100,1000,4000]`. In-process,
no host: its own redis-server on a unix socket (as the supervisor starts the host's), killed
with SIGKILL and started again, empty, as the supervisor restarts it. For each N it prints the
per-emit cost during the outage and the flush time: from the moment the new Redis answers a
PING to the moment the last kept event is published (seq stamped, in the ring, on the live
channel), beside a direct publish of N events on a healthy Redis as the floor.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


class Server:
    def __init__(self, root: Path):
        self.root = root
        self.sock = root / "redis.sock"
        self.url = f"unix://{self.sock}"
        self.proc = None

    def start(self) -> None:
        from supervisor import redis_server

        self.sock.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            redis_server.redis_argv(self.sock, self.root / "data"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        redis_server.wait_ready(self.url, timeout=30)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="100,1000,4000")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]

    root = Path(tempfile.mkdtemp(prefix="bench-outage-"))
    os.environ["HOST_STATE_DIR"] = str(root / "state")
    os.environ["HOST_EVENTS_BUFFER_MAX"] = str(max(counts))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    server = Server(root)
    os.environ["REDIS_URL"] = server.url
    import django

    django.setup()
    from common import redis_client
    from hooks import events

    server.start()
    print(f"state dir {root}; buffer bound {max(counts)}")
    try:
        for n in counts:
            started = time.perf_counter()
            for i in range(n):
                events.emit("display.released", {"count": i})
            direct_ms = (time.perf_counter() - started) * 1000

            server.kill()
            costs = []
            for i in range(n):
                t0 = time.perf_counter()
                events.emit("display.released", {"count": i})
                costs.append((time.perf_counter() - t0) * 1000)
            box = events._outbox()
            assert len(box.entries) == n, len(box.entries)
            server.start()  # answers PING: the clock starts
            back = time.perf_counter()
            while box.entries:
                time.sleep(0.001)
            flush_ms = (time.perf_counter() - back) * 1000
            ring = events.ring_events(redis_client.client())
            tail = [e["count"] for e in ring[-min(n, len(ring)) :]]
            assert tail == list(range(n - len(tail), n)), "kept events out of order"
            print(
                f"N={n:5d}  emit while down: p50 {pct(costs, 50):.2f} ms  p99 {pct(costs, 99):.2f}"
                f" ms  |  flush after Redis is back: {flush_ms:8.1f} ms"
                f" ({n / flush_ms * 1000:7.0f} ev/s)  |  floor, direct emit of N on a healthy"
                f" Redis: {direct_ms:8.1f} ms"
            )
    finally:
        if server.proc and server.proc.poll() is None:
            server.kill()


if __name__ == "__main__":
    main()
