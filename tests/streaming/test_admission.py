"""Admission across both planes (`streaming.sessions.admission`) against a real Redis: one
count of places under one lock, `max_sessions` read at each admission, port slots, and the
native plane's reservations, held places and reconnects."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from hostconfig import store
from streaming import services
from streaming.sessions import admission, registry

FP = "ab" * 32


@pytest.fixture
def r(redis_db, restore_config):
    """The tests' Redis, empty, and the host config given back afterwards."""
    return redis_db


def compat(sid: str, fp: str = FP) -> dict:
    return {"id": sid, "client": "Deck", "client_id": fp[:12], "fingerprint": fp,
            "mode": "1280x720@60", "width": 1280, "height": 720, "fps": 60, "app": "1",
            "app_title": "Desktop", "t_start": time.time()}  # fmt: skip


def native_live(sid: str, fp: str, pid: int | None = None) -> dict:
    rec = {**compat(sid, fp), "plane": "native", "pid": pid or os.getpid()}
    registry.put(rec)
    return rec


def _race(n: int) -> tuple[list[int], list[str]]:
    """`n` launches by `n` clients released at the same instant."""
    barrier = threading.Barrier(n)
    slots: list[int] = []
    refusals: list[str] = []

    def launch(i: int) -> None:
        barrier.wait()
        try:
            slots.append(services.claim(compat(f"race{i:04d}", fp=f"{i:02x}" * 32)))
        except admission.Refused as exc:
            refusals.append(exc.message)

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return slots, refusals


def test_eight_launches_at_once_get_exactly_three_places_and_the_lowest_slots(r):
    store.write({"max_sessions": "3"})
    for _round in range(3):
        r.flushall()
        slots, refusals = _race(8)
        assert sorted(slots) == [0, 1, 2], (slots, refusals)
        assert refusals == ["The host is already streaming to 3 clients (max_sessions = 3)"] * 5
        assert len(registry.live("compat")) == 3


def test_one_client_launching_twice_at_once_starts_one_session(r):
    store.write({"max_sessions": "8"})
    barrier = threading.Barrier(4)
    got: list = []

    def launch(i: int) -> None:
        barrier.wait()
        try:
            got.append(services.claim(compat(f"twin{i:04d}")))  # the same fingerprint
        except admission.Refused as exc:
            got.append((exc.status, exc.message))

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert got.count(0) == 1, got
    assert got.count((400, "An app is already running on this host")) == 3, got


def test_max_sessions_is_read_at_each_admission(r):
    """`max_sessions` acts from the next admission, no restart: 1 is the one-session host."""
    store.write({"max_sessions": "1"})
    assert services.claim(compat("aaaa0001")) == 0
    with pytest.raises(admission.Refused) as refused:
        services.claim(compat("aaaa0002", fp="cd" * 32))
    assert refused.value.status == 503
    assert refused.value.message == "The host is already streaming to 1 clients (max_sessions = 1)"
    store.write({"max_sessions": "2"})
    assert services.claim(compat("aaaa0002", fp="cd" * 32)) == 1
    with pytest.raises(admission.Refused):
        services.claim(compat("aaaa0003", fp="ef" * 32))
    # The default is 2; an unreadable value admits as the default does.
    store.write({"max_sessions": None})
    assert admission.max_sessions() == 2


def test_a_freed_slot_is_taken_again_lowest_first_and_a_dead_claim_expires(r):
    store.write({"max_sessions": "3"})
    assert [services.claim(compat(f"bbbb000{i}", fp=f"{i:02x}" * 32)) for i in range(3)] == [
        0, 1, 2,
    ]  # fmt: skip
    services.release("bbbb0000", 0)
    assert services.claim(compat("bbbb0003", fp="33" * 32)) == 0
    # A session that never beats again: its record goes stale and its claim expires.
    r.delete(admission.slot_key(1))
    r.hdel(registry.LIVE, "bbbb0001")
    assert services.claim(compat("bbbb0004", fp="44" * 32)) == 1
    assert services.owns("bbbb0004", 1) and not services.owns("bbbb0001", 1)


def test_native_offers_and_compat_launches_share_the_places(r):
    store.write({"max_sessions": "2"})
    token = admission.admit_native("11" * 32, hold_s=20)
    assert token and len(admission.places()) == 1
    assert services.claim(compat("cccc0001")) == 0
    # Both places taken: a native offer is refused with the same text as a compat launch.
    with pytest.raises(admission.Refused) as refused:
        admission.admit_native("22" * 32, hold_s=20)
    assert "already streaming to 2 clients (max_sessions = 2)" in refused.value.message
    # The offer's process takes its place over (one place, not two) for as long as it lives.
    peer = subprocess.Popen(["sleep", "30"])
    try:
        admission.hold_native(peer.pid, "11" * 32, token)
        assert admission.places() == {"c:cccc0001", f"p:{peer.pid}"}
        native_live("dddd0001", "11" * 32, pid=peer.pid)  # proven, live: still one place
        assert len(admission.places()) == 2
        # The device reconnecting to its own live session needs no place.
        assert admission.admit_native("11" * 32, hold_s=20) == ""
        with pytest.raises(admission.Refused):
            services.claim(compat("cccc0002", fp="33" * 32))
    finally:
        peer.kill()
        peer.wait()
    # The process is gone: its place is free again.
    registry.remove("dddd0001")
    assert admission.places() == {"c:cccc0001"}
    assert services.claim(compat("cccc0002", fp="33" * 32)) == 1


def test_an_offer_that_never_reaches_its_process_frees_its_place(r):
    store.write({"max_sessions": "1"})
    token = admission.admit_native("11" * 32, hold_s=0.2)
    with pytest.raises(admission.Refused):
        services.claim(compat("eeee0001"))
    time.sleep(0.3)
    assert services.claim(compat("eeee0001")) == 0
    admission.drop_reservation(token)


def test_a_slow_start_keeps_its_slot_claim(r, monkeypatch):
    """Display, prep and app can outlast the claim's TTL on a loaded machine: the session
    beats meanwhile, so its slot is never expired and handed to another launch."""
    from compat.session import CompatSession

    monkeypatch.setattr(admission, "SLOT_TTL_S", 2)
    record = compat("ffff0001")
    slot = services.claim(record)
    spec = {**record, "arm": "a1", "app_id": 1, "app_name": "Desktop", "port_slot": slot,
            "client": {"fingerprint": FP, "name": "Deck", "uuid": "U"}}  # fmt: skip
    session = CompatSession(spec)
    monkeypatch.setattr(session, "_start", lambda: time.sleep(4.5))
    session.start()
    assert services.owns("ffff0001", slot)
    with pytest.raises(admission.Refused):  # max_sessions 2: the slot is still taken, not free
        services.claim(compat("ffff0002", fp="cd" * 32))
        services.claim(compat("ffff0003", fp="ef" * 32))


def test_a_slot_a_live_session_still_binds_is_not_given_away_when_its_claim_is_gone(r):
    """After a Redis restart the claims are gone until each session's next heartbeat; a
    /launch in between must not be given a slot whose stream ports a live session holds."""
    import socket

    from django.conf import settings

    live = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the live session's video port
    live.bind((settings.HOST_BIND, settings.PORTS.stream_ports(0).video))
    try:
        assert r.get(admission.slot_key(0)) is None  # its claim: wiped with Redis
        assert services.claim(compat("aaaa0001")) == 1
    finally:
        live.close()
    assert services.claim(compat("bbbb0002", fp="cd" * 32)) == 0  # free once nobody binds it


def test_a_session_process_takes_and_leaves_its_place_through_one_call_on_both_planes(r):
    store.write({"max_sessions": "2"})
    # compat: the /launch claim is still its own (a late process finds it gone: False).
    slot = services.claim(compat("abab0001"))
    assert admission.take("compat", {"id": "abab0001", "port_slot": slot}, os.getpid())
    assert not admission.take("compat", {"id": "abab0002", "port_slot": slot}, os.getpid())
    # native: the offer's reservation becomes the process's place, connecting until proven.
    token = admission.admit_native("11" * 32, hold_s=20)
    peer = subprocess.Popen(["sleep", "30"])
    try:
        offer = {"fingerprint": "11" * 32, "admission": token}
        assert admission.take("native", offer, peer.pid)
        assert admission.places() == {"c:abab0001", f"p:{peer.pid}"}
        assert registry.connecting() == {peer.pid: "11" * 32}
        admission.leave("native", "abab0003", peer.pid)
        assert registry.connecting() == {} and admission.places() == {"c:abab0001"}
    finally:
        peer.kill()
        peer.wait()
    admission.leave("compat", "abab0001", os.getpid(), slot)
    assert admission.places() == set() and registry.get("abab0001") is None
