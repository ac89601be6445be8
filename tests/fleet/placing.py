"""A browser placed by a fleet host, step by step, as the placement end-to-end tests check it:
the fleet host's operator approves the waiting device, the member plays it, the fleet host
ends the session there."""

from __future__ import annotations

MEMBERS = "/api/v1/fleet/members"
PLAYING_JS = (
    "() => window.nativePlayer.state === 'playing' && "
    "document.getElementById('video').videoWidth === 1280"
)


def approve_waiting(host, name: str, wait_for) -> str:
    """Approve the device `name` waiting on `host`; its fingerprint there."""
    with host.mgmt() as api:
        entry = wait_for(
            lambda: next(
                (p for p in api.get("/api/v1/native/pending").json() if p["name"] == name),
                None,
            ),
            what="the device waiting on the fleet host",
        )
        r = api.post(f"/api/v1/native/pending/{entry['id']}/approve", json={})
        assert r.status_code == 200, r.text
    return entry["fingerprint"]


def playing_on(member, name: str) -> str:
    """The member paired the placed device once and plays for it; its fingerprint there."""
    with member.mgmt() as api:
        clients = [c for c in api.get("/api/v1/native/clients").json() if c["name"] == name]
        assert len(clients) == 1, clients
        games = api.get("/api/v1/status").json()["games"]
        assert any(g.get("client") == name for g in games), games
    return clients[0]["fingerprint"]


def end_from_the_fleet_host(host, member, member_id: int, name: str, title: str, page, page_wait):
    """The fleet host lists the session on the member and ends it: the page hears the end,
    the member no longer lists it."""
    with host.mgmt() as api:
        listed = api.get(f"{MEMBERS}/{member_id}/sessions")
        assert listed.status_code == 200, listed.text
        (session,) = [x for x in listed.json() if x["client"] == name]
        assert (session["plane"], session["app_title"]) == ("native", title), session
        r = api.delete(f"{MEMBERS}/{member_id}/sessions/{session['id']}")
        assert r.status_code == 204, r.text
    page_wait(page, "() => window.nativePlayer.state === 'ended'", 20)
    with member.mgmt() as api:
        sessions = api.get("/api/v1/status").json()["sessions"]
        assert not any(x["id"] == session["id"] for x in sessions), sessions


def unpair(host, fp: str | None) -> None:
    if fp:
        with host.mgmt() as api:
            api.delete(f"/api/v1/native/clients/{fp}")
