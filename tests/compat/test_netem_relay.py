"""The user-space netem stand-in (tests/support/netem_relay.py) does what the lossy tests
rely on: the client's datagrams reach the host untouched, the host's lose the seeded share,
arrive within delay + jitter, and reordering happens only when asked for by jitter."""

from __future__ import annotations

import socket
import time

from tests.support.netem_relay import Impairment, UdpRelay


def _pair(imp: Impairment):
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    host.bind(("127.0.0.1", 0))
    relay = UdpRelay(host.getsockname(), imp)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(("127.0.0.1", 0))
    client.settimeout(2)
    host.settimeout(2)
    client.sendto(b"ping", ("127.0.0.1", relay.port))
    data, back = host.recvfrom(100)
    assert data == b"ping"  # upstream untouched
    return host, relay, client, back


def _receive(client, relay, sent: int, got: list, deadline_s: float = 10.0) -> None:
    """Read until the relay has dealt with `sent` datagrams and everything it forwarded came."""
    client.settimeout(0.05)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if relay.forwarded + relay.dropped == sent and len(got) == relay.forwarded:
            return
        try:
            data, _ = client.recvfrom(100)
        except TimeoutError:
            continue
        got.append((time.monotonic(), int(data)))
    raise AssertionError(f"relay stalled: {relay.forwarded} + {relay.dropped} of {sent}")


def test_loss_is_seeded_and_near_the_asked_share():
    counts = []
    for _ in range(2):
        host, relay, client, back = _pair(Impairment(loss_pct=10, seed=3))
        got: list = []
        for i in range(1000):
            host.sendto(str(i).encode(), back)
            if i % 50 == 49:  # read as we go: no kernel buffer overflows on a loaded machine
                _receive(client, relay, i + 1, got)
        relay.close()
        counts.append((relay.dropped, [n for _, n in got]))
        assert relay.dropped + len(got) == 1000
        assert 60 <= relay.dropped <= 140, relay.dropped
        assert [n for _, n in got] == sorted(n for _, n in got)  # no jitter: in order
    assert counts[0] == counts[1]  # same seed, same datagrams lost


def test_jitter_delays_within_bounds_and_reorders():
    host, relay, client, back = _pair(Impairment(delay_ms=30, jitter_ms=20, reorder_pct=20))
    sent, got = {}, []
    for i in range(100):
        sent[i] = time.monotonic()
        host.sendto(str(i).encode(), back)
    _receive(client, relay, 100, got)
    relay.close()
    assert len(got) == 100 and relay.dropped == 0
    assert min(at - sent[n] for at, n in got) >= 0.029  # never earlier than the delay
    order = [n for _, n in got]
    assert order != sorted(order) and relay.reordered > 0


def test_each_delay_is_the_base_plus_jitter_and_a_reordered_one_is_held_back_more():
    relay = UdpRelay(("127.0.0.1", 9), Impairment(delay_ms=30, jitter_ms=20, reorder_pct=25))
    draws = [relay._delay() for _ in range(4000)]
    relay.close()
    assert all(0.030 <= d <= 0.050 for d, held in draws if not held)
    assert all(0.050 <= d <= 0.070 for d, held in draws if held)
    assert 0.21 < sum(held for _, held in draws) / len(draws) < 0.29
    plain = UdpRelay(("127.0.0.1", 9))
    assert plain._delay() == (0.0, False)  # no impairment: sent at once
    plain.close()


def test_jitter_alone_keeps_the_order():
    host, relay, client, back = _pair(Impairment(delay_ms=5, jitter_ms=20))
    got: list = []
    for i in range(100):
        host.sendto(str(i).encode(), back)
    _receive(client, relay, 100, got)
    relay.close()
    assert [n for _, n in got] == list(range(100)) and relay.reordered == 0
