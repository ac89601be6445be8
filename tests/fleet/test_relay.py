"""The relay against members that are real TLS servers speaking the member's SSE format
(tests/support/fakemember.py): events land in the buffer tagged and in order, a relay started
again resumes exactly, a member's `dropped` is forwarded, and a member sending garbage, an
endless line or a flood is cut and backed off while another member's events flow. Real member
hosts: test_fleet_e2e.py."""

from __future__ import annotations

import json
import time

import pytest

from fleet import buffer, member_tokens, relay
from fleet.models import Member
from tests.support.fakemember import FakeMember

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def members():
    made: list[FakeMember] = []

    def make(mode="normal", n=11):
        member = FakeMember(mode, n=n, keepalive_s=0.3)
        made.append(member)
        return member

    yield make
    for member in made:
        member.close()


def join(member: FakeMember, name: str) -> Member:
    row = Member.objects.create(url=member.url, fingerprint=member.fingerprint, name=name)
    member_tokens.put(row.id, member.token)
    return row


def buffered(member_id: int) -> list[tuple[int, str, dict]]:
    out = []
    for _, f in buffer.redis_client.client().xrange(buffer.STREAM):
        if int(f[b"m"]) == member_id:
            out.append((int(f[b"s"]), f[b"k"].decode(), json.loads(f[b"d"])))
    return out


def wait_for(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_events_are_relayed_tagged_in_order_and_resume_exactly(redis_db, members):
    member = members()
    row = join(member, "den")
    for _ in range(5):
        member.emit("game.running", {"game": {"id": "x"}})
    first = relay.Relay(row.id, row.url, row.fingerprint, row.name)
    first.start()
    wait_for(lambda: len(buffered(row.id)) == 5)
    first.stop()
    first.join(5)
    for _ in range(3):  # while no relay runs
        member.emit("game.exited")
    again = relay.Relay(row.id, row.url, row.fingerprint, row.name)
    again.start()
    try:
        wait_for(lambda: len(buffered(row.id)) == 8)
        member.emit("game.running")
        got = wait_for(lambda: len(buffered(row.id)) == 9 and buffered(row.id))
    finally:
        again.stop()
        again.join(5)
    assert [s for s, _, _ in got] == list(range(1, 10))
    assert all(e["host"] == {"id": row.id, "name": "den", "url": member.url} for _, _, e in got)
    assert got[5][1] == "game.exited" and got[5][2]["seq"] == 6
    wait_for(lambda: Member.objects.get(pk=row.id).event_seq == 9)
    assert member.requests == 2  # one stream each, no retries


def test_a_members_dropped_is_forwarded_tagged(redis_db, members):
    member = members()
    row = join(member, "den")
    member.emit("game.running")
    with member.cond:  # what the member's SSE says when its ring lost events
        member.events.append((1, 'event: dropped\ndata: {"dropped":true}\n\n'))
    member.emit("game.exited")
    r = relay.Relay(row.id, row.url, row.fingerprint, row.name)
    r.start()
    try:
        got = wait_for(lambda: len(buffered(row.id)) == 3 and buffered(row.id))
    finally:
        r.stop()
        r.join(5)
    assert [(s, k) for s, k, _ in got] == [(1, "game.running"), (1, "dropped"), (2, "game.exited")]
    assert got[1][2] == {"dropped": True, "host": {"id": row.id, "name": "den", "url": member.url}}


@pytest.mark.parametrize("mode", ["garbage", "bigline", "flood"])
def test_a_bad_member_is_cut_and_backed_off_and_others_flow(redis_db, members, mode, monkeypatch):
    monkeypatch.setattr(relay, "RATE_PER_S", 200.0)
    monkeypatch.setattr(relay, "RATE_BURST", 100.0)
    monkeypatch.setattr(relay, "BACKOFF_MIN_S", 20.0)  # one cut seen, not a retry's (under load)
    bad, good = members(mode, n=12), members()
    bad_row, good_row = join(bad, "bad"), join(good, "good")
    relays = relay.Relays()
    relays.sync()
    try:
        assert set(relays.running) == {bad_row.id, good_row.id}
        for _ in range(20):
            good.emit("game.running")
            time.sleep(0.02)
        wait_for(lambda: len(buffered(good_row.id)) == 20)
        state = wait_for(lambda: buffer.relay_states().get(bad_row.id, {}).get("error"))
        reasons = {"garbage": ("SSE field",), "bigline": ("longer than",)}
        assert any(r in state for r in reasons.get(mode, ("a second", "do not rise"))), state
        assert buffer.relay_states()[bad_row.id]["state"] == "backing_off"
        assert len(buffered(bad_row.id)) < 400  # the flood got little more than its burst in
        # Removing a member stops its relay and forgets its cursor.
        bad_id = bad_row.id
        bad_row.delete()
        relays.sync()
        assert set(relays.running) == {good_row.id} and buffer.cursor(bad_id) is None
        requests = bad.requests
        time.sleep(1.0)
        assert bad.requests == requests
    finally:
        relays.stop_all()


def test_a_wrong_fingerprint_sends_nothing(redis_db, members):
    member = members()
    row = Member.objects.create(url=member.url, fingerprint="0" * 64, name="x")
    member_tokens.put(row.id, member.token)
    r = relay.Relay(row.id, row.url, row.fingerprint, row.name)
    r.start()
    try:
        error = wait_for(lambda: buffer.relay_states().get(row.id, {}).get("error"))
    finally:
        r.stop()
        r.join(5)
    assert "does not match the pinned fingerprint" in error
    assert member.requests == 0
