"""Matching, debounce and the in-flight cap, on a real Redis (the Celery hand-off is captured)."""

from __future__ import annotations

import pytest

from common import redis_client
from hooks import dispatch, hook_config
from tests.support.events import emitted

STREAM = {
    "seq": 1,
    "kind": "stream.started",
    "stream": {
        "mode": "1280x720@60",
        "hdr": False,
        "client": "Deck",
        "app": "steam:1",
        "plane": "native",
    },
}
PAIRING = {
    "seq": 2,
    "kind": "pairing.pending",
    "device": {"name": "TV", "fingerprint": "ABCDEF", "plane": "compat"},
}
GAME = {
    "seq": 3,
    "kind": "game.running",
    "game": {"title": "Doom", "client": "Deck", "plane": "native"},
}


@pytest.mark.parametrize(
    "entry, event, expected",
    [
        ({"on": "stream.*"}, STREAM, True),
        ({"on": "stream.stopped"}, STREAM, False),
        ({"on": "stream.*", "filter": {"client": "Deck", "plane": "native"}}, STREAM, True),
        ({"on": "stream.*", "filter": {"client": "TV"}}, STREAM, False),
        ({"on": "stream.*", "filter": {"app": "steam:1"}}, STREAM, True),
        ({"on": "stream.*", "filter": {"fingerprint": "ab"}}, STREAM, False),  # kind lacks it
        ({"on": "pairing.*", "filter": {"fingerprint": "abcdef"}}, PAIRING, True),
        ({"on": "pairing.*", "filter": {"client": "TV", "plane": "compat"}}, PAIRING, True),
        ({"on": "game.running", "filter": {"app": "Doom"}}, GAME, True),  # falls back to title
        ({"on": "library.*", "filter": {"client": "x"}}, {"kind": "library.changed"}, False),
    ],
)
def test_matching(entry, event, expected):
    assert dispatch.matches(entry, event) is expected


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr(dispatch, "_send", lambda name, args: calls.append((name, args)) or True)
    return calls


def test_debounce_is_leading_edge(bus, sent):
    hook_config.save([{"on": "stream.*", "run": "true", "debounce_ms": 60000}])
    for _ in range(3):
        dispatch.schedule(STREAM, redis_client.client())
    assert [c[0] for c in sent] == ["hooks.fire"]


def test_run_and_webhook_each_fire(bus, sent):
    hook_config.save([{"on": "stream.*", "run": "true", "webhook": "https://10.1.1.1/x"}])
    dispatch.schedule(STREAM, redis_client.client())
    assert sorted(c[1][1] for c in sent) == ["run", "webhook"]


def test_cap_drops_beyond_eight_and_leases_expire(bus, sent, caplog):
    hook_config.save([{"on": "stream.*", "run": "true"}])
    for _ in range(20):
        dispatch.schedule(STREAM, redis_client.client())
    fired = [c for c in sent if c[0] == "hooks.fire"]
    dropped = [c for c in sent if c[0] == "hooks.record_drop"]
    assert len(fired) == 8 and len(dropped) == 12
    assert dispatch.in_flight(redis_client.client()) == 8
    assert any("dropped" in r.message for r in caplog.records)
    dispatch.release_permit(fired[0][1][3], redis_client.client())
    assert dispatch.in_flight(redis_client.client()) == 7
    client = redis_client.client()
    client.zadd(dispatch._permits_key(), {"crashed-worker": 1})  # a lease long expired
    assert dispatch.acquire_permit(client, 30) is not None  # the stale lease does not count


def test_builtin_connect_hook(bus, sent, monkeypatch):
    monkeypatch.setenv("HOST_ON_CONNECT_CMD", "echo connected")
    dispatch.schedule(
        {"seq": 5, "kind": "client.connected", "client": {"name": "a", "plane": "native"}},
        redis_client.client(),
    )
    dispatch.schedule(
        {"seq": 6, "kind": "client.disconnected", "client": {"name": "a", "plane": "native"}},
        redis_client.client(),
    )
    assert [(c[1][0]["seq"], c[1][2]["run"]) for c in sent] == [(5, "echo connected")]


def test_invalid_file_fires_nothing(bus, sent):
    hook_config.hooks_path().write_text('{"hooks": [{"on": "stream.*", "run": "true", "x": 1}]}')
    dispatch.schedule(STREAM, redis_client.client())
    assert sent == []


def test_schedule_returns_the_permits_and_wait_released_follows_them(bus, sent):
    hook_config.save([{"on": "stream.*", "run": "true", "webhook": "https://10.1.1.1/x"}])
    permits = dispatch.schedule(STREAM, redis_client.client())
    assert sorted(permits) == sorted(c[1][3] for c in sent if c[0] == "hooks.fire")
    assert len(permits) == 2
    # Nothing released yet: the wait gives up at its deadline and names both.
    assert sorted(dispatch.wait_released(permits, 0.2, redis_client.client())) == sorted(permits)
    dispatch.release_permit(permits[0], redis_client.client())
    assert dispatch.wait_released(permits, 0.2, redis_client.client()) == [permits[1]]
    # abort() ends the wait early even with a long deadline.
    assert dispatch.wait_released(permits, 30, redis_client.client(), abort=lambda: True) == [
        permits[1]
    ]
    dispatch.release_permit(permits[1], redis_client.client())
    assert dispatch.wait_released(permits, 30, redis_client.client()) == []


def test_emit_and_wait_returns_when_the_firings_finish(bus, sent):
    import threading

    hook_config.save([{"on": "host.stopping", "run": "true"}])
    threading.Timer(
        0.3, lambda: dispatch.release_permit(sent[0][1][3], redis_client.client())
    ).start()
    event, queued, left = bus.emit_and_wait(
        "host.stopping", {"version": "v1", "gamestream": False}, 10
    )
    assert event["kind"] == "host.stopping" and event["version"] == "v1"
    assert sent[0][1][0] == event
    assert queued == 1 and left == []
    assert dispatch.in_flight(redis_client.client()) == 0


def test_announce_stopping_carries_the_host_facts_and_gives_up_at_the_grace(bus, sent, caplog):
    from common.version import VERSION
    from hostconfig import store
    from supervisor import lifecycle

    hook_config.save([{"on": "host.stopping", "run": "true"}])
    store.write({"compat_enabled": "false"})
    try:
        assert lifecycle.announce_stopping(0.2) is False  # nobody releases the permit
    finally:
        store.write({"compat_enabled": None})
    (event,) = emitted("host.stopping")
    assert (event["version"], event["gamestream"]) == (VERSION, False)
    assert sent[0][1][0] == event
    assert "1 of 1 host.stopping hook firing(s) still running" in caplog.text
