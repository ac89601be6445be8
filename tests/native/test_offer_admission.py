"""A native offer goes through the one admission of both planes (`native.sessions.start`), on
the tests' Redis: refused with the shared 503 text when `max_sessions` are taken, its
reservation dropped whatever the session manager answered, and a device with a live session
of its own reconnects without a place. The manager itself is replaced at `runtime.spawn`."""

from __future__ import annotations

import os
import time

import pytest

from hostconfig import store
from native import sessions
from streaming import services
from streaming.sessions import admission, registry, runtime

FP = "ab" * 32


@pytest.fixture
def r(redis_db, restore_config):
    store.write({"max_sessions": "1"})
    return redis_db


def offer(fp: str = FP) -> dict:
    return {"fingerprint": fp, "sdp": "v=0", "type": "offer"}


def test_a_full_host_refuses_an_offer_with_the_shared_message(r, monkeypatch):
    spawned = []
    monkeypatch.setattr(runtime, "spawn", lambda plane, spec, timeout: spawned.append(spec))
    services.claim({"id": "cafe0001", "fingerprint": "cd" * 32, "t_start": time.time()})
    with pytest.raises(sessions.SessionError) as refused:
        sessions.start(offer())
    assert refused.value.status == 503
    assert str(refused.value) == "The host is already streaming to 1 clients (max_sessions = 1)"
    assert spawned == []  # refused before any process was started


def test_the_reservation_goes_whatever_the_manager_answers(r, monkeypatch):
    seen = []

    def failing(plane, spec, timeout):
        seen.append(admission.places())
        raise runtime.SpawnError(503, "the session manager is not running")

    monkeypatch.setattr(runtime, "spawn", failing)
    with pytest.raises(sessions.SessionError):
        sessions.start(offer())
    (during,) = seen
    assert len(during) == 1 and next(iter(during)).startswith("r:")  # held while answering
    assert admission.places() == set()  # and given back after
    monkeypatch.setattr(runtime, "spawn", lambda plane, spec, timeout: {"sdp": "v=0"})
    assert sessions.start(offer()) == {"sdp": "v=0"}


def test_a_device_reconnecting_to_its_own_live_session_needs_no_place(r, monkeypatch):
    specs = []

    def spawn(plane, spec, timeout):
        specs.append(spec)
        return {"sdp": "v=0"}

    monkeypatch.setattr(runtime, "spawn", spawn)
    registry.put({"id": "beef0001", "plane": "native", "pid": os.getpid(), "fingerprint": FP,
                  "t_start": time.time()})  # fmt: skip
    assert sessions.start(offer()) == {"sdp": "v=0"}
    assert specs[-1]["admission"] == ""  # no place taken
    with pytest.raises(sessions.SessionError):  # another device: the one place is taken
        sessions.start(offer("ef" * 32))
