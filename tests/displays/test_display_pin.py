"""POST /api/v1/display/pin and /unpin on real Xvfb servers, in-process: what each state
becomes, what the current policy decides on unpin, and the refusals."""

from __future__ import annotations

import shutil

import pytest

from displays import machine, xvfb
from tests.displays.test_displays import events, gone, put_policy

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (scripts/system-deps.sh)"),
]


@pytest.fixture
def displays(v1, state, redis_db):
    yield v1
    xvfb.stop_all()
    assert xvfb.owned_pids() == []


def pin(client, slot, route="pin"):
    return client.post(f"/api/v1/display/{route}", {"slot": slot}, format="json")


def test_pin_an_active_display_pins_it_when_its_last_session_leaves(displays):
    put_policy(displays, keep_alive={"mode": "off"})
    d = machine.acquire("alice", "640x480@60")
    r = pin(displays, d["slot"])
    assert r.status_code == 200, r.content
    assert r.json()["state"] == "active" and r.json()["pin_on_leave"] is True
    left = machine.disconnect(d["slot"])  # `off` would have torn it down
    assert left["state"] == "pinned" and left["expires_in_ms"] is None
    assert xvfb.alive(d["pid"])
    # Re-acquired and left again: still the operator's pin, not the policy's `off`.
    again = machine.acquire("alice", "640x480@60")
    assert again["pid"] == d["pid"]
    assert machine.disconnect(d["slot"])["state"] == "pinned"


def test_pin_a_lingering_display_stops_its_countdown(displays):
    put_policy(displays, keep_alive={"mode": "duration", "seconds": 30})
    d = machine.acquire("bob", "640x480@60")
    assert machine.disconnect(d["slot"])["state"] == "lingering"
    r = pin(displays, d["slot"])
    assert r.status_code == 200
    assert r.json()["state"] == "pinned" and r.json()["expires_in_ms"] is None
    assert pin(displays, d["slot"]).json()["state"] == "pinned"  # again: no change
    rows = displays.get("/api/v1/display/state").json()["displays"]
    assert [(x["slot"], x["state"]) for x in rows] == [(d["slot"], "pinned")]


def test_unpin_goes_back_to_the_current_policys_countdown(displays):
    put_policy(displays, keep_alive={"mode": "forever"})
    d = machine.acquire("carol", "640x480@60")
    assert machine.disconnect(d["slot"])["state"] == "pinned"
    r = pin(displays, d["slot"], "unpin")  # the policy itself pins: refused with the reason
    assert r.status_code == 409 and "forever" in r.json()["error"]
    put_policy(displays, keep_alive={"mode": "duration", "seconds": 45})
    r = pin(displays, d["slot"], "unpin")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["state"] == "lingering" and 40_000 < body["expires_in_ms"] <= 45_000
    assert body["pin_on_leave"] is False and xvfb.alive(d["pid"])


def test_unpin_under_at_once_tears_the_display_down(displays):
    put_policy(displays, keep_alive={"mode": "duration", "seconds": 30})
    d = machine.acquire("dave", "640x480@60")
    machine.disconnect(d["slot"])
    assert pin(displays, d["slot"]).json()["state"] == "pinned"
    put_policy(displays, keep_alive={"mode": "off"})
    released = len(events("display.released"))
    r = pin(displays, d["slot"], "unpin")
    assert r.status_code == 204 and r.content == b""
    assert gone(d["pid"])
    assert displays.get("/api/v1/display/state").json() == {"displays": []}
    assert len(events("display.released")) == released + 1


def test_unpin_an_active_display_only_clears_its_pin(displays):
    put_policy(displays, keep_alive={"mode": "off"})
    d = machine.acquire("erin", "640x480@60")
    pin(displays, d["slot"])
    r = pin(displays, d["slot"], "unpin")
    assert r.status_code == 200 and r.json()["state"] == "active"
    assert r.json()["pin_on_leave"] is False
    assert machine.disconnect(d["slot"]) is None  # the policy's `off` again
    assert gone(d["pid"])


def test_bad_bodies_and_unknown_slots(displays):
    for route in ("pin", "unpin"):
        for bad in ({}, {"slot": -1}, {"slot": "1"}, {"slot": True}, {"slot": 1.5},
                    {"slot": 0, "x": 1}, [0], {"slot": 1 << 40}):  # fmt: skip
            r = displays.post(f"/api/v1/display/{route}", bad, format="json")
            assert r.status_code == 400, (route, bad, r.content)
            assert r.json()["error"] == "invalid request"
        r = displays.post(f"/api/v1/display/{route}")
        assert r.status_code == 400
        r = pin(displays, 7, route)
        assert r.status_code == 404 and r.json()["error"] == "no display in slot 7"


def test_an_attached_display_cannot_be_pinned(displays):
    from displays.models import VirtualDisplay

    VirtualDisplay.objects.create(slot=3, owned=False, backend="x11", width=640, height=480,
                                  refresh=60, sessions=1, identity_key="attached::9")  # fmt: skip
    for route in ("pin", "unpin"):
        r = pin(displays, 3, route)
        assert r.status_code == 409 and "operator's own" in r.json()["error"]


def test_the_routes_need_a_token_or_the_console_session(displays, settings):
    from rest_framework.test import APIClient

    settings.HOST_NO_MGMT_TOKEN = False
    for route in ("pin", "unpin"):
        assert pin(APIClient(), 0, route).status_code == 401
