"""Events emitted while Redis is away (hooks/outbox.py) against a real redis-server that the
tests kill -9 and start again on the same socket, wiped, as the supervisor does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hooks import event_kinds, events, outbox


class OwnRedis:
    """A redis-server of this test, started as the supervisor starts the host's."""

    def __init__(self, root: Path):
        self.root = root
        self.sock = root / "redis.sock"
        self.url = f"unix://{self.sock}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        from supervisor import redis_server

        self.sock.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            redis_server.redis_argv(self.sock, self.root / "data"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        redis_server.wait_ready(self.url)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.kill()


@pytest.fixture
def own_redis(tmp_path, settings, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    server = OwnRedis(tmp_path)
    server.start()
    settings.REDIS_URL = server.url
    try:
        yield server
    finally:
        server.stop()


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def ring(kind: str | None = None) -> list[dict]:
    try:
        got = events.ring_events()
    except Exception:  # Redis still starting
        return []
    return [e for e in got if kind is None or e["kind"] == kind]


def spools(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / outbox.SPOOL_DIR).glob(f"*{outbox.SPOOL_SUFFIX}"))


def test_outage_keeps_order_and_seq_survives_a_wiping_restart(own_redis, tmp_path):
    events.emit(event_kinds.LIBRARY_CHANGED, {"source": "before"})
    before = ring()[-1]["seq"]
    own_redis.kill()
    emitted_at = time.time() * 1000
    for i in range(3):
        started = time.monotonic()
        events.emit(event_kinds.LIBRARY_CHANGED, {"source": f"kept-{i}"})
        assert time.monotonic() - started < 2.0  # bounded: no wait on the missing Redis
    # On disk before emit returned: one spool with the three events, in order.
    (spool,) = spools(tmp_path)
    _header, entries = outbox.read_spool(spool.read_bytes())
    assert [json.loads('{"seq":0' + e.suffix)["source"] for e in entries] == [
        "kept-0",
        "kept-1",
        "kept-2",
    ]
    time.sleep(0.3)  # the flusher retries against the dead socket meanwhile
    own_redis.start()  # a fresh, empty Redis: the ring and the counter are gone
    got = wait_for(lambda: len(ring()) == 3 and ring())
    assert [e["source"] for e in got] == ["kept-0", "kept-1", "kept-2"]
    seqs = [e["seq"] for e in got]
    assert seqs == sorted(seqs) and seqs[0] > before and len(set(seqs)) == 3
    assert all(emitted_at - 5 <= e["ts_ms"] <= emitted_at + 5000 for e in got)  # emit time
    wait_for(lambda: not spools(tmp_path))  # delivered: the spool is gone
    events.emit(event_kinds.LIBRARY_CHANGED, {"source": "after"})  # direct again, next seq
    assert ring()[-1]["source"] == "after" and ring()[-1]["seq"] == seqs[-1] + 1


def test_events_emitted_during_delivery_queue_behind_the_kept_ones(own_redis, tmp_path):
    own_redis.kill()
    for i in range(50):
        events.emit(event_kinds.DISPLAY_RELEASED, {"count": i})
    own_redis.start()
    for i in range(50, 100):  # while the flusher delivers: behind it, never before
        events.emit(event_kinds.DISPLAY_RELEASED, {"count": i})
    got = wait_for(lambda: len(ring()) == 100 and ring())
    assert [e["count"] for e in got] == list(range(100))
    assert [e["seq"] for e in got] == list(range(got[0]["seq"], got[0]["seq"] + 100))


def test_past_the_bound_subscribers_get_dropped(own_redis, tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_EVENTS_BUFFER_MAX", "3")
    own_redis.kill()
    for i in range(6):
        events.emit(event_kinds.DISPLAY_RELEASED, {"count": i})
    own_redis.start()
    got = wait_for(lambda: len(ring()) == 4 and ring())
    assert [e["kind"] for e in got] == ["display.released"] * 3 + [event_kinds.DROPPED]
    assert [e.get("count") for e in got[:3]] == [0, 1, 2]
    assert got[3]["dropped"] is True and got[3]["seq"] == got[2]["seq"] + 1


def test_within_the_bound_there_is_no_dropped(own_redis, monkeypatch):
    monkeypatch.setenv("HOST_EVENTS_BUFFER_MAX", "3")
    own_redis.kill()
    for i in range(3):
        events.emit(event_kinds.DISPLAY_RELEASED, {"count": i})
    own_redis.start()
    got = wait_for(lambda: len(ring()) == 3 and ring())
    assert event_kinds.DROPPED not in [e["kind"] for e in got]


EMIT_AND_DIE = """
import os, sys, django
django.setup()
from hooks import events
for i in range(3):
    events.emit("library.changed", {"source": f"orphan-{i}"})
print("emitted", flush=True)
sys.stdin.read()
"""


def test_a_dead_process_spool_is_delivered_once(own_redis, tmp_path):
    own_redis.kill()
    env = {
        **os.environ,
        "REDIS_URL": own_redis.url,
        "HOST_STATE_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", EMIT_AND_DIE],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "emitted"
        (spool,) = spools(tmp_path)
        taken = []
        # Its process lives (it holds the spool's lock): nobody else takes it.
        kept = outbox.recover_orphans(spool.parent, own_redis.url, lambda e, u: taken.append(e))
        assert kept == 0 and taken == []
    finally:
        proc.kill()  # SIGKILL, before Redis is back
        proc.wait(10)
    own_redis.start()
    with open(spool, "ab") as fh:  # a torn write at the moment of the kill
        fh.write(b'{"e": "tor')
    assert events.recover_spools() == 3
    assert [e["source"] for e in ring()] == ["orphan-0", "orphan-1", "orphan-2"]
    assert not spools(tmp_path)
    assert events.recover_spools() == 0 and len(ring()) == 3


def test_a_kept_event_is_published_at_most_once(own_redis):
    entry = outbox.Entry("abc123", event_kinds.LIBRARY_CHANGED, ',"ts_ms":1,"kind":"x"}')
    events._deliver_kept(entry, own_redis.url)
    events._deliver_kept(entry, own_redis.url)  # a crash before its `done` line: no repeat
    assert len(ring()) == 1


def test_hooks_are_scheduled_once_per_kept_event_after_delivery(own_redis, monkeypatch):
    scheduled = []
    monkeypatch.setattr(events, "_schedule_hooks", lambda event: scheduled.append(event) or [])
    own_redis.kill()
    events.emit(event_kinds.LIBRARY_CHANGED, {"source": "kept"})
    assert scheduled == []  # no seq yet: nothing to fire
    own_redis.start()
    wait_for(lambda: scheduled)
    time.sleep(0.5)
    assert len(scheduled) == 1 and scheduled[0]["seq"] == ring()[-1]["seq"]


def test_kept_events_never_go_to_another_redis(own_redis, settings, tmp_path):
    own_redis.kill()
    events.emit(event_kinds.LIBRARY_CHANGED, {"source": "for-the-first"})
    other = OwnRedis(tmp_path / "other")
    other.root.mkdir()
    other.start()
    try:
        settings.REDIS_URL = other.url
        time.sleep(0.5)  # the flusher retries meanwhile
        assert ring() == []
    finally:
        other.stop()


def test_buffer_bound_setting():
    from hooks import conf

    os.environ.pop("HOST_EVENTS_BUFFER_MAX", None)
    assert conf.events_buffer_max() == 4096
    for raw, want in (("10", 10), ("0", 1), ("99999999", 1_000_000), ("x", 4096)):
        os.environ["HOST_EVENTS_BUFFER_MAX"] = raw
        try:
            assert conf.events_buffer_max() == want
        finally:
            del os.environ["HOST_EVENTS_BUFFER_MAX"]
