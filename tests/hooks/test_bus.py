"""The event bus against a real Redis: seq, ring, restart, transactions, outages."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from hooks import conf, event_kinds


def test_emit_stamps_and_orders_fields(bus):
    bus.emit(event_kinds.LIBRARY_CHANGED, {"source": "manual"})
    ring = bus.ring_events()
    assert len(ring) == 1
    event = ring[0]
    assert list(event) == ["seq", "ts_ms", "schema", "kind", "source"]
    assert event["schema"] == 1 and event["kind"] == "library.changed"
    assert event["seq"] >= 1 and isinstance(event["ts_ms"], int)


def test_seq_is_monotonic_and_ring_keeps_newest(bus):
    for i in range(conf.RING_SIZE + 50):
        bus.emit(event_kinds.DISPLAY_RELEASED, {"count": i})
    ring = bus.ring_events()
    assert len(ring) == conf.RING_SIZE
    seqs = [e["seq"] for e in ring]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert ring[-1]["count"] == conf.RING_SIZE + 49
    assert seqs[-1] - seqs[0] == conf.RING_SIZE - 1


def test_seq_never_goes_back_after_redis_is_wiped(bus, redis_db):
    for _ in range(5):
        bus.emit(event_kinds.STORE_CHANGED)
    last = bus.ring_events()[-1]["seq"]
    assert bus.persisted_mark() >= last  # the mark on disk covers every seq handed out
    redis_db.flushall()  # what a host restart does to the private Redis
    bus.emit(event_kinds.STORE_CHANGED)
    ring = bus.ring_events()
    assert len(ring) == 1 and ring[0]["seq"] > last


def test_emit_publishes_live(bus, redis_db):
    sub = redis_db.pubsub()
    sub.subscribe(bus.keys()["channel"])
    assert sub.get_message(timeout=2)["type"] == "subscribe"
    bus.emit(event_kinds.PLUGINS_CHANGED, {"id": "p1"})
    msg = sub.get_message(timeout=2)
    assert json.loads(msg["data"])["id"] == "p1"


@pytest.mark.django_db(transaction=True)
def test_emit_waits_for_commit_and_skips_rollback(bus):
    with transaction.atomic():
        bus.emit(event_kinds.LIBRARY_CHANGED, {"source": "inside"})
        assert bus.ring_events() == []
    assert [e["source"] for e in bus.ring_events()] == ["inside"]
    with pytest.raises(RuntimeError), transaction.atomic():
        bus.emit(event_kinds.LIBRARY_CHANGED, {"source": "rolled-back"})
        raise RuntimeError("boom")
    assert [e["source"] for e in bus.ring_events()] == ["inside"]


def test_payload_is_captured_at_emit_time(bus):
    payload = {"source": "before"}
    bus.emit(event_kinds.LIBRARY_CHANGED, payload)
    payload["source"] = "after"
    assert bus.ring_events()[-1]["source"] == "before"


def test_missing_redis_never_raises(bus, redis_url, settings, tmp_path, caplog):
    settings.REDIS_URL = f"unix://{tmp_path}/nothing.sock"
    for _ in range(3):
        bus.emit(event_kinds.LIBRARY_CHANGED, {"source": "kept"})  # must not raise
    event, queued, left = bus.emit_and_wait(event_kinds.LIBRARY_CHANGED, {"source": "kept"}, 1)
    assert event["kind"] == "library.changed" and event["seq"] is None and queued == 0
    assert sum("Redis unavailable" in r.message for r in caplog.records) == 1
    assert len(bus._outbox().entries) == 4  # kept for that Redis (tests/hooks/test_outbox.py)
    settings.REDIS_URL = redis_url  # another Redis: the kept events are never delivered there
    bus.emit(event_kinds.LIBRARY_CHANGED, {"source": "after"})
    assert [e["source"] for e in bus.ring_events()] == ["after"]


def test_unknown_kind_and_reserved_keys(bus):
    bus.emit("no.such-kind", {})
    bus.emit(event_kinds.PLUGINS_CHANGED, {"id": "x", "seq": 99, "kind": "evil"})
    ring = bus.ring_events()
    assert len(ring) == 1
    assert ring[0]["kind"] == "plugins.changed" and ring[0]["seq"] != 99


def test_kind_table_and_patterns():
    assert len(event_kinds.KINDS) == 20
    assert event_kinds.pattern_matches("stream.*", "stream.started")
    assert not event_kinds.pattern_matches("stream.*", "streamx.started")
    assert event_kinds.valid_pattern("library.*") and not event_kinds.valid_pattern("nope.*")
    assert event_kinds.check_payload("stream.started", {"stream": {"hdr": "yes"}}) == [
        "stream.hdr must be bool"
    ]
    assert event_kinds.check_payload("host.started", {"version": "v", "gamestream": True}) == []


@pytest.mark.slow
def test_concurrent_emitters_never_share_a_seq(bus, redis_db, redis_url, tmp_path):
    """Four processes emitting at once (as daphne, workers and planes do) across block
    reservations: every seq is unique and the mark on disk covers them all."""
    import os
    import subprocess
    import sys

    code = (
        "import django; django.setup()\n"
        "from hooks import events\n"
        "for i in range(1500): events.emit('store.changed', {})\n"
    )
    env = {**os.environ, "REDIS_URL": redis_url, "HOST_STATE_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "hostmgmt.settings"}  # fmt: skip
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(4)]
    assert all(p.wait(120) == 0 for p in procs)
    assert int(redis_db.get(bus.keys()["seq"])) == 6000
    ring = bus.ring_events()
    seqs = [e["seq"] for e in ring]
    assert seqs == list(range(6000 - conf.RING_SIZE + 1, 6001))
    assert bus.persisted_mark() >= 6000
