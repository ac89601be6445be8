"""The virtual display state machine on real Xvfb servers, in-process."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time

import pytest
from django.utils import timezone

from displays import machine, reaper, xvfb
from tests.support.events import emitted

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (scripts/system-deps.sh)"),
]


def gone(pid: int, timeout: float = 3.0) -> bool:
    """True once `pid` no longer exists (reaped) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def displays(v1, state, redis_db):
    """The API client, with the tests' Redis emptied so the bus's ring holds this test's events."""
    yield v1
    xvfb.stop_all()
    assert xvfb.owned_pids() == []


def put_policy(client, **fields):
    r = client.put("/api/v1/display/settings", {"preset": "custom", **fields}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def events(kind):
    """The `kind` events this test published on the bus (read from the tests' Redis)."""
    return emitted(kind)


def test_walk_active_lingering_reacquired_released(displays):
    from displays import capture

    put_policy(displays, keep_alive={"mode": "duration", "seconds": 30})
    created_before = len(events("display.created"))
    d = machine.acquire("alice", "640x480@60")
    assert d["state"] == "active" and d["mode"] == "640x480@60" and d["running"]
    assert xvfb.is_ours(d["pid"])
    assert len(events("display.created")) == created_before + 1
    assert events("display.created")[-1]["backend"] == "xvfb"
    frame = capture.grab(d["x_display"])
    assert frame.size == (640, 480) and len(frame.rgb) == 640 * 480 * 3

    state = displays.get("/api/v1/display/state").json()["displays"]
    assert [(s["slot"], s["state"], s["sessions"]) for s in state] == [(d["slot"], "active", 1)]

    left = machine.disconnect(d["slot"])
    assert left["state"] == "lingering" and 25_000 < left["expires_in_ms"] <= 30_000
    assert xvfb.alive(d["pid"])  # kept while lingering

    again = machine.acquire("alice", "640x480@60")
    assert again["slot"] == d["slot"] and again["pid"] == d["pid"] and again["state"] == "active"
    assert again["expires_in_ms"] is None

    machine.disconnect(d["slot"])
    # Countdown ends: the tick tears it down and the server is gone.
    assert machine.expire_due(timezone.now() + dt.timedelta(seconds=5)) == 0
    assert machine.expire_due(timezone.now() + dt.timedelta(seconds=31)) == 1
    assert gone(d["pid"])
    assert displays.get("/api/v1/display/state").json() == {"displays": []}


def test_release_tears_down_kept_never_active(displays):
    put_policy(displays, keep_alive={"mode": "forever"})
    pinned = machine.acquire("bob", "800x600@30")
    active = machine.acquire("carol", "640x480@30")
    assert machine.disconnect(pinned["slot"])["state"] == "pinned"
    released_before = len(events("display.released"))
    r = displays.post("/api/v1/display/release", {"slot": active["slot"]}, format="json")
    assert r.status_code == 200 and r.json() == {"released": 0}
    r = displays.post("/api/v1/display/release", {}, format="json")
    assert r.json() == {"released": 1}
    assert events("display.released")[-1]["count"] == 1
    assert len(events("display.released")) == released_before + 1
    assert gone(pinned["pid"])
    assert xvfb.alive(active["pid"])
    state = displays.get("/api/v1/display/state").json()["displays"]
    assert [s["slot"] for s in state] == [active["slot"]]
    for bad in ({"slot": -1}, {"slot": "1"}, {"slot": True}, {"other": 1}, [1]):
        assert displays.post("/api/v1/display/release", bad, format="json").status_code == 400


def test_policy_changes_apply_from_the_next_acquire(displays):
    put_policy(displays, keep_alive={"mode": "forever"})
    first = machine.acquire("dave", "640x480@60")
    put_policy(displays, keep_alive={"mode": "off"})
    assert machine.disconnect(first["slot"])["state"] == "pinned"  # opened under `forever`
    second = machine.acquire("erin", "640x480@60")
    assert machine.disconnect(second["slot"]) is None  # opened under `off`: torn down
    assert gone(second["pid"])


def test_deliberate_stop_skips_the_linger_and_other_mode_starts_afresh(displays):
    put_policy(displays, keep_alive={"mode": "duration", "seconds": 60})
    d = machine.acquire("frank", "640x480@60")
    assert machine.disconnect(d["slot"], deliberate=True) is None
    assert gone(d["pid"])
    kept = machine.acquire("frank", "640x480@60")
    machine.disconnect(kept["slot"])
    other = machine.acquire("frank", "800x600@60")
    assert other["mode"] == "800x600@60" and other["pid"] != kept["pid"]
    assert gone(kept["pid"])


def test_shared_identity_conflicts(displays):
    put_policy(displays, identity="shared", mode_conflict="reject")
    live = machine.acquire("a", "640x480@60")
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("b", "800x600@60")
    assert err.value.status == 409
    joined = machine.acquire("b", "640x480@60")
    assert joined["slot"] == live["slot"] and joined["sessions"] == 2
    put_policy(displays, identity="shared", mode_conflict="steal")
    stolen = machine.acquire("c", "800x600@60")
    assert stolen["slot"] != live["slot"] or stolen["pid"] != live["pid"]
    assert gone(live["pid"])


def test_countdown_survives_a_restart_and_stop_leaves_no_server(displays):
    put_policy(displays, keep_alive={"mode": "duration", "seconds": 20})
    kept = machine.acquire("gina", "640x480@60")
    machine.disconnect(kept["slot"])
    short = machine.acquire("hank", "640x480@60")  # still active when the host stops
    put_policy(displays, keep_alive={"mode": "duration", "seconds": 10})
    reaper.on_host_stop()
    assert gone(kept["pid"]) and gone(short["pid"])
    assert xvfb.owned_pids() == []
    rows = {s["slot"]: s for s in machine.state()["displays"]}
    assert rows[kept["slot"]]["state"] == "lingering" and not rows[kept["slot"]]["running"]
    assert rows[short["slot"]]["state"] == "lingering"  # its session ended with the host

    restored = reaper.on_host_start()
    assert restored == {"expired": 0, "restored": 2}
    rows = machine.state()["displays"]
    assert all(r["running"] and xvfb.is_ours(r["pid"]) for r in rows)

    from displays.models import VirtualDisplay

    reaper.on_host_stop()
    VirtualDisplay.objects.update(deadline=timezone.now() - dt.timedelta(seconds=1))
    assert reaper.on_host_start() == {"expired": 2, "restored": 0}
    assert machine.state() == {"displays": []} and xvfb.owned_pids() == []


def test_bad_modes_are_refused(displays):
    for mode in ("640x480@0", "100x100@60", "99999x480", "abc", "640x480@999"):
        with pytest.raises(machine.DisplayError):
            machine.acquire("x", mode)
    assert xvfb.owned_pids() == []
