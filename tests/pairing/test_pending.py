"""The pending-device queue on the tests' Redis with a fake clock: caps and TTL."""

from __future__ import annotations

import pytest

from pairing.native_pending import (
    MAX_PENDING,
    MAX_WRONG_PINS,
    TTL_S,
    PendingQueue,
    QueueFull,
)
from tests.native.helpers import FakeClock


@pytest.fixture
def q(redis_db):
    return PendingQueue(redis_db, FakeClock())


def test_global_cap_and_message(q):
    for i in range(MAX_PENDING):
        q.knock(f"{i:064x}", f"d{i}", f"10.0.{i}.1")
    with pytest.raises(QueueFull, match="32 max"):
        q.knock("f" * 64, "one more", "10.9.9.9")
    entry, new = q.knock(f"{0:064x}", "", "10.0.0.1")  # re-knock: same id, name kept
    assert not new and entry.id == 1 and entry.name == "d0"


def test_per_ip_cap_and_ttl(q):
    for i in range(4):
        q.knock(f"{i:064x}", "x", "10.0.0.1")
    with pytest.raises(QueueFull, match="4 per address"):
        q.knock("e" * 64, "x", "10.0.0.1")
    q.knock("e" * 64, "x", "10.0.0.2")
    q.clock.t += TTL_S + 1  # everything expired
    assert q.entries() == []
    assert q.take(1) is None
    entry, new = q.knock("e" * 64, "x", "10.0.0.1")
    assert new and entry.id > 5


def test_take_once_and_pin(q):
    entry, _ = q.knock("a" * 64, "x", "1.2.3.4")
    assert q.take(entry.id).fingerprint == "a" * 64
    assert q.take(entry.id) is None
    state = q.arm(60, "b" * 64)
    # bound to b: refused, neither consumed nor counted
    assert q.consume_pin(state["pin"], "c" * 64).outcome == "elsewhere"
    assert q.armed()["wrong"] == 0
    assert q.consume_pin(state["pin"], "b" * 64).outcome == "paired"
    assert q.consume_pin(state["pin"], "b" * 64).outcome == "not-armed"  # one use
    q.arm(60, None)
    q.clock.t += 61
    assert q.armed() is None


def test_a_reknock_during_a_decision_is_not_queued_again(q):
    """approve/deny claim the entry before it leaves the queue: the page's re-knock in that
    window must not become a second pending entry (a race seen on a live host)."""
    fp = "c" * 64
    entry, new = q.knock(fp, "tv", "10.0.0.1")
    claimed = q.claim(entry.id)
    assert claimed is not None and claimed.fingerprint == fp
    again, new = q.knock(fp, "tv", "10.0.0.1")
    assert (again.id, new) == (entry.id, False)
    assert q.entries() == []
    assert q.claim(entry.id) is None  # taken once
    q.release(fp)
    later, new = q.knock(fp, "tv", "10.0.0.1")
    assert new and later.id != entry.id


def _wrong(pin: str, i: int = 0) -> str:
    return f"{(int(pin) + 1 + i) % 10000:04d}"


def test_wrong_pins_close_the_window(q):
    pin = q.arm(60, None)["pin"]
    left = [q.consume_pin(_wrong(pin, i), f"{i:064x}") for i in range(MAX_WRONG_PINS - 1)]
    assert [(c.outcome, c.left) for c in left] == [("wrong", n) for n in (4, 3, 2, 1)]
    assert q.consume_pin(_wrong(pin), "f" * 64).outcome == "closed-now"
    assert q.armed() is None and q.closed_by_wrong_pins()
    assert q.consume_pin(pin, "f" * 64).outcome == "closed"  # the right PIN too
    pin = q.arm(60, None)["pin"]  # a new window starts from zero
    assert not q.closed_by_wrong_pins()
    assert q.consume_pin(_wrong(pin), "f" * 64).left == MAX_WRONG_PINS - 1
    assert q.consume_pin(pin, "f" * 64).outcome == "paired"
    q.arm(60, None)
    q.disarm()
    assert not q.closed_by_wrong_pins()


def test_concurrent_guesses_count_exactly(q):
    """Guesses from many processes at once: the watched transaction counts each one, so no
    more than MAX_WRONG_PINS are ever compared against one window."""
    from concurrent.futures import ThreadPoolExecutor

    pin = q.arm(60, None)["pin"]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: q.consume_pin(_wrong(pin, i), "a" * 64).outcome, range(40)))
    assert got.count("wrong") == MAX_WRONG_PINS - 1
    assert got.count("closed-now") == 1
    assert got.count("closed") == 40 - MAX_WRONG_PINS
