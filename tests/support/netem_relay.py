"""A user-space stand-in for `tc netem`: UDP (and plain TCP) relays between a client and a host.

`tc netem` needs a network namespace (and iproute2), which the tests may not use; this relay
gives the same impairments on one path, seeded so a run repeats: loss, delay with jitter, and
reordering. The client is sent to the relay's port (a SETUP reply naming it, or a second
loopback address); the relay forwards the client's datagrams to the host untouched and the
host's datagrams back through the impairment.

Delay and reordering: a datagram is delayed by `delay_ms` plus a uniform share of `jitter_ms`,
but never sent before the one ahead of it (jitter alone keeps the order, as a queue on a
jittery link does, and as netem does with a rate; per-datagram jitter without that reorders
two thirds of a frame's datagrams, a link no real path is). `reorder_pct` of the datagrams are
instead held back one more `jitter_ms` outside that queue, so the ones behind overtake them.
"""

from __future__ import annotations

import heapq
import random
import select
import socket
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Impairment:
    loss_pct: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder_pct: float = 0.0
    seed: int = 0


class UdpRelay:
    """client <-> front (here) <-> host; the host's datagrams go through the impairment.

    Counts: `forwarded`, `dropped`, `reordered` (sent after a datagram that arrived later);
    `dropped_heads` keeps the first 32 bytes of each dropped datagram (to tell which video
    frame lost a packet)."""

    def __init__(self, host: tuple[str, int], imp: Impairment = Impairment(),
                 front: tuple[str, int] = ("127.0.0.1", 0),
                 back_ip: str = "127.0.0.1"):  # fmt: skip
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(front)
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind((back_ip, 0))
        self.port = self.front.getsockname()[1]
        self.host, self.imp = host, imp
        self.rng = random.Random(imp.seed)
        self.client: tuple[str, int] | None = None
        self.forwarded = self.dropped = self.reordered = 0
        self.dropped_heads: list[bytes] = []
        self._queue: list[tuple[float, int, bytes]] = []  # (due, arrival number, datagram)
        self._arrivals = self._last_sent = 0
        self._last_due = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delay(self) -> tuple[float, bool]:
        """(seconds, held back out of order)."""
        imp = self.imp
        if not (imp.delay_ms or imp.jitter_ms):
            return 0.0, False
        ms = imp.delay_ms + self.rng.uniform(0, imp.jitter_ms)
        if imp.reorder_pct and self.rng.random() < imp.reorder_pct / 100:
            return (ms + imp.jitter_ms) / 1000, True
        return ms / 1000, False

    def _from_host(self, data: bytes) -> None:
        if self.client is None:
            return
        if self.imp.loss_pct and self.rng.random() < self.imp.loss_pct / 100:
            self.dropped += 1
            self.dropped_heads.append(data[:32])
            return
        self._arrivals += 1
        delay, held = self._delay()
        if not delay and not self._queue:
            self._send(self._arrivals, data)
            return
        due = time.monotonic() + delay
        if not held:  # in the queue: not before the datagram ahead
            due = self._last_due = max(due, self._last_due)
        heapq.heappush(self._queue, (due, self._arrivals, data))

    def _send(self, arrival: int, data: bytes) -> None:
        if arrival < self._last_sent:
            self.reordered += 1
        self._last_sent = max(self._last_sent, arrival)
        self.forwarded += 1
        try:
            self.front.sendto(data, self.client)
        except OSError:
            pass

    def _run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            while self._queue and self._queue[0][0] <= now:
                _, arrival, data = heapq.heappop(self._queue)
                self._send(arrival, data)
            wait = min(0.05, max(0.0, self._queue[0][0] - now)) if self._queue else 0.05
            ready, _, _ = select.select([self.front, self.back], [], [], wait)
            for sock in ready:
                try:
                    data, addr = sock.recvfrom(65535)
                except OSError:
                    continue
                if sock is self.front:  # the client's pings and reports go on untouched
                    self.client = addr
                    self.back.sendto(data, self.host)
                else:
                    self._from_host(data)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.front.close()
        self.back.close()


class TcpRelay:
    """Each connection to `front` is piped to `host` (half-closes too): RTSP beside the UDP."""

    def __init__(self, front: tuple[str, int], host: tuple[str, int],
                 back_ip: str = "127.0.0.1"):  # fmt: skip
        self.listener = socket.create_server(front)
        self.listener.settimeout(0.1)
        self.host, self.back_ip = host, back_ip
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.host, timeout=10,
                                            source_address=(self.back_ip, 0)) as up:  # fmt: skip
            ends = {conn: up, up: conn}
            open_ = {conn, up}
            while open_:
                ready, _, _ = select.select(list(open_), [], [], 5)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if data:
                        ends[sock].sendall(data)
                    else:
                        open_.discard(sock)
                        ends[sock].shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.listener.close()
