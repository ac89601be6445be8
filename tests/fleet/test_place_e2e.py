"""Placement between two real hosts: the session's live host is the fleet host, a second one
started here is its member (joined with the member's management token until fleet tokens
exist). The player's page is played by an HTTP client doing what play.js does; the browser
itself: test_place_browser_e2e.py."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time

import pytest

from fleet import tickets
from fleet.place import MINT_TIMEOUT_S, PLACE_BUDGET_S
from native.ratelimit import PER_IP_PLACE
from native.services import sdp_fingerprint
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.fleet import placing
from tests.fleet.fleetkit import Fleet, fingerprint_of, view
from tests.native.helpers import device_events, fake_fp, last_seq, offer_sdp
from tests.support.livehost import free_base_port, running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def member_host():
    with running_host((ADMIN_USER, ADMIN_PASSWORD)) as host:
        yield host


@pytest.fixture
def fleet(live_host):
    f = Fleet(live_host)
    f.clear()
    yield f
    f.clear()


@pytest.fixture
def joined(fleet, member_host):
    """The member joined to the fleet host; its id."""
    return fleet.add(
        member_host.url,
        fingerprint_of(member_host),
        "den",
        view(),
        token=member_host.mgmt_token,
    )


def real_offer() -> str:
    """An aiortc offer, as a browser's: the member answers it and waits for a DTLS proof that
    never comes (unpairing ends that peer)."""

    async def make() -> str:
        from aiortc import RTCConfiguration, RTCPeerConnection

        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        pc.addTransceiver("video", direction="recvonly")
        pc.addTransceiver("audio", direction="recvonly")
        pc.createDataChannel("input")
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    return asyncio.run(make())


class Page:
    """A player page on one host: its CSRF cookie, and the posts play.js makes."""

    def __init__(self, host, source: str | None = None):
        import httpx

        self.host = host
        transport = None
        if source:
            transport = httpx.HTTPTransport(local_address=source, verify=host.ssl_context())
        self.c = host.client(transport=transport) if transport else host.client()
        r = self.c.get("/play")
        assert r.status_code == 200, r.text
        self.html = r.text
        self.token = self.c.cookies["csrftoken"]

    def post(self, path: str, body: dict, csrf: bool = True):
        headers = {"Content-Type": "application/json", "Referer": f"{self.host.url}/play"}
        if csrf:
            headers["X-CSRFToken"] = self.token
        return self.c.post(path, content=json.dumps(body).encode(), headers=headers)

    def place(self, fp: str, app="desktop", title="Desktop", **extra):
        return self.post(
            "/play/place",
            {"app": app, "title": title, "name": "den tv", "fingerprint": fp, **extra},
        )

    def close(self):
        self.c.close()


def approve_on(host, fp: str) -> None:
    with host.mgmt() as api:
        pending = [p for p in api.get("/api/v1/native/pending").json() if p["fingerprint"] == fp]
        assert pending, "the device is not waiting"
        r = api.post(f"/api/v1/native/pending/{pending[0]['id']}/approve", json={})
        assert r.status_code == 200, r.text


def logs_of(host) -> bytes:
    files = [host.log_path, *sorted(p for p in host.state_dir.rglob("*.log") if p.is_file())]
    return b"".join(p.read_bytes() for p in files if p.exists())


def test_the_fleet_host_places_a_paired_player_on_the_member(live_host, member_host, joined):
    sdp = real_offer()
    fp = sdp_fingerprint(sdp)
    page = Page(live_host)
    member_since = last_seq(member_host)
    try:
        # The fleet host's picker lists the member's titles, with the member's name.
        assert 'data-fleet-app="desktop" data-fleet-title="Desktop">Desktop (den)' in page.html
        # The device is not paired on the fleet host: it waits for its operator, as an offer.
        r = page.place(fp)
        assert r.status_code == 202 and r.json()["status"] == "pending", r.text
        approve_on(live_host, fp)
        r = page.place(fp)
        assert r.status_code == 200, r.text
        placed = r.json()
        assert placed["status"] == "placed" and placed["skipped"] == []
        assert placed["member"] == {"name": "den", "url": member_host.url}
        assert placed["handoff"]["url"] == member_host.url + "/play/fleet"
        ticket = placed["handoff"]["ticket"]
        assert r.headers["Cache-Control"] == "no-store"

        # The browser posts the ticket to the member (a cross-site form POST).
        with member_host.client() as browser:
            r = browser.post(
                "/play/fleet",
                data={"ticket": ticket, "mode": "1280x720", "fps": "30"},
                headers={"Origin": live_host.url, "Sec-Fetch-Site": "same-site"},
            )
            assert r.status_code == 303, r.text
            assert r.headers["Location"] == "/play?app=desktop&mode=1280x720&fps=30"
            cookie = r.headers["Set-Cookie"]
            assert tickets.COOKIE in cookie and "HttpOnly" in cookie and "Secure" in cookie
            assert "SameSite=Lax" in cookie
            cookie_value = browser.cookies[tickets.COOKIE]
            again = browser.post("/play/fleet", data={"ticket": ticket})
            assert again.status_code == 403  # one use
            with live_host.mgmt() as fleet_api:
                fleet_name = fleet_api.get("/api/v1/host").json()["hostname"]
            page_html = browser.get(r.headers["Location"]).text
            assert f"by {fleet_name}." in page_html and "Placed on <strong>" in page_html
            assert 'value="den tv"' in page_html and 'data-autostart="1"' in page_html
            csrf = browser.cookies["csrftoken"]
            headers = {"X-CSRFToken": csrf, "Referer": f"{member_host.url}/play"}
            offer = {"sdp": sdp, "name": "x", "width": 1280, "height": 720, "fps": 30}

            # An offer for another app does not use the approval: it waits as any other.
            r = browser.post(
                "/native/offer", json={**offer, "app": "app:none-such"}, headers=headers
            )
            assert r.status_code == 404, r.text
            # The first offer for the placed app is paired by the approval, once.
            r = browser.post("/native/offer", json={**offer, "app": "desktop"}, headers=headers)
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "paired"
            assert tickets.COOKIE + '=""' in r.headers.get("Set-Cookie", "")
            # A second device with the same (now used) approval is not paired by it.
            stranger = fake_fp()
            r = browser.post(
                "/native/offer",
                json={**offer, "sdp": offer_sdp(stranger), "app": "desktop"},
                headers={**headers, "Cookie": f"csrftoken={csrf}; {tickets.COOKIE}={cookie_value}"},
            )
            assert r.status_code == 202, r.text
        with member_host.mgmt() as api:
            listed = {c["fingerprint"]: c for c in api.get("/api/v1/native/clients").json()}
            assert listed[fp]["name"] == "den tv"
            assert stranger not in listed
            pending = {p["fingerprint"] for p in api.get("/api/v1/native/pending").json()}
            assert stranger in pending and fp not in pending
        kinds = device_events(member_host, member_since, "pairing.*", fp)
        assert kinds == ["pairing.completed"]

        # The ticket is in no URL and no log of either host; the member's token in neither log.
        assert ticket.encode() not in logs_of(member_host) + logs_of(live_host)
        assert member_host.mgmt_token.encode() not in logs_of(live_host)
    finally:
        page.close()
        placing.unpair(member_host, fp)
        placing.unpair(live_host, fp)


def test_failover_to_the_next_member_and_the_reasons_when_none_fits(
    live_host, member_host, fleet, joined
):
    fp = fake_fp()
    page = Page(live_host, source="127.0.0.31")
    gone = f"https://127.0.0.1:{free_base_port()}"
    # A member that takes the connection and never answers: the pinned client's timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        approve_first = page.place(fp)
        assert approve_first.status_code == 202
        approve_on(live_host, fp)
        # Better by the rule (a GPU encoder) and first: one that never answers, one that is
        # down, one whose certificate is not the pinned one, one that refuses the token. The
        # player lands on the member.
        slow_url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        slow = fleet.add(
            slow_url, "00" * 32, "mute", view(gpu=True, max_sessions=4), token="33" * 32
        )
        fleet.add(gone, "00" * 32, "ghost", view(gpu=True), token="11" * 32)
        # "liar": the fleet host's own address pinned to the member's certificate
        fleet.add(
            live_host.url,
            fingerprint_of(member_host),
            "liar",
            view(gpu=True),
            token=member_host.mgmt_token,
        )
        other = fleet.add(
            member_host.url.replace("127.0.0.1", "localhost"),
            fingerprint_of(member_host),
            "revoked",
            view(gpu=True),
            token="22" * 32,
        )
        t0 = time.monotonic()
        r = page.place(fp)
        took = time.monotonic() - t0
        assert r.status_code == 200, r.text
        placed = r.json()
        assert placed["member"]["name"] == "den"
        skipped = placed["skipped"]
        assert [s.split(":")[0] for s in skipped] == ["mute", "ghost", "liar", "revoked"]
        assert "timed out" in skipped[0], skipped
        assert "cannot connect" in skipped[1]
        assert "does not match the pinned fingerprint" in skipped[2]
        assert "refused the ticket (401" in skipped[3]
        assert MINT_TIMEOUT_S <= took < PLACE_BUDGET_S + 2, took
        fleet.set_view(slow, view(sessions=4, max_sessions=4, gpu=True))  # busy from here on

        # With the member busy too, nobody can take it: the reasons, and no secret in them.
        fleet.set_view(joined, view(max_sessions=2, sessions=2))
        fleet.set_view(other, view(max_sessions=2, sessions=2, gpu=True))
        r = page.place(fp)
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert error.startswith("no member with Desktop could take the player: ghost: ")
        assert "liar" in error and "revoked" not in error and "den" not in error
        for secret in (member_host.mgmt_token, "11" * 32, "22" * 32):
            assert secret not in r.text
        assert r.headers.get("Retry-After")

        fleet.clear()
        fleet.add(member_host.url, fingerprint_of(member_host), "den", view(sessions=2))
        r = page.place(fp)
        assert (r.status_code, r.json()["error"]) == (503, "every member with Desktop is busy")
        r = page.place(fp, app="steam:1", title="Quake")
        assert (r.status_code, r.json()["error"]) == (404, "no member has Quake")
        fleet.clear()
        fleet.add(member_host.url, fingerprint_of(member_host), "den", view(), reachable=False)
        r = page.place(fp)
        unreachable = "every member with Desktop is unreachable"
        assert (r.status_code, r.json()["error"]) == (503, unreachable)
    finally:
        silent.close()
        page.close()
        placing.unpair(live_host, fp)


def test_place_is_same_origin_checked_and_limited_per_address(live_host, joined):
    page = Page(live_host, source="127.0.0.32")
    try:
        r = page.post(
            "/play/place",
            {"app": "desktop", "title": "Desktop", "fingerprint": fake_fp()},
            csrf=False,
        )
        assert r.status_code == 403 and r.json()["error"].startswith("CSRF check failed")
        r = page.post("/play/place", {"app": "desktop", "title": "Desktop", "fingerprint": "x"})
        assert r.status_code == 400 and "fingerprint" in r.json()["error"]
        fp = fake_fp()  # one device: its one pending entry, under the per-device limit
        answers = [page.place(fp) for _ in range(2 * PER_IP_PLACE + 1)]
        codes = {r.status_code for r in answers}
        assert codes == {202, 429}, codes  # 41 in at most two windows: one holds more than 20
        limited = next(r for r in answers if r.status_code == 429)
        assert int(limited.headers["Retry-After"]) >= 1
        assert re.search(r"too many placements from this address", limited.json()["error"])
    finally:
        page.close()
        with live_host.mgmt() as api:
            for p in api.get("/api/v1/native/pending").json():
                api.post(f"/api/v1/native/pending/{p['id']}/deny")


def test_the_ticket_route_on_the_member(member_host):
    body = {"app": "desktop", "name": "tv"}
    with member_host.client() as c:
        assert c.post("/api/v1/fleet/tickets", json=body).status_code == 401
        plugin = {"Authorization": f"Bearer {member_host.plugin_token}"}
        assert c.post("/api/v1/fleet/tickets", json=body, headers=plugin).status_code == 403
    with member_host.mgmt() as api:
        r = api.post("/api/v1/fleet/tickets", json=body)
        assert r.status_code == 201 and r.json()["expires_in_secs"] == tickets.TICKET_TTL_S
        assert r.headers["Cache-Control"] == "no-store"
        r = api.post("/api/v1/fleet/tickets", json={**body, "app": "app:none"})
        assert r.status_code == 404
        r = api.post("/api/v1/fleet/tickets", json={**body, "name": ["tv"]})
        assert r.status_code == 400 and set(r.json()) >= {"error"}


def test_a_browser_placed_by_the_fleet_host_plays_on_the_member(live_host, member_host, joined):
    """Headless Chromium opens the fleet host's /play, picks the member's title, is approved
    by the fleet host's operator, lands on the member's /play and plays there: decoded video
    at the asked size. The fleet host's API then lists that session on the member and ends
    it."""
    from playwright.sync_api import sync_playwright

    from tests.native.browserkit import ARGS, CHROMIUM, page_wait, wait_for
    from tests.support.consolepage import shot

    name = "placed browser"
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    fleet_fp = member_fp = None
    try:
        page = browser.new_context(ignore_https_errors=True).new_page()
        page.goto(live_host.url + "/play")
        page.fill("#name", name)
        page.select_option("#app", "fleet:desktop")
        page.select_option("#mode", "1280x720")
        page.select_option("#fps", "30")
        shot(page, "play-fleet-choice")  # the "On other hosts" group, the member's title chosen
        page.click("#start")
        wait_for(lambda: page.evaluate("window.nativePlayer.state") == "pending", what="pending")
        fleet_fp = placing.approve_waiting(live_host, name, wait_for)
        page.wait_for_url(member_host.url + "/play?*", timeout=30_000)
        assert page.url == member_host.url + "/play?app=desktop&mode=1280x720&fps=30"
        assert page.text_content("#placed").startswith("Placed on ")
        page_wait(page, placing.PLAYING_JS, 60)
        shot(page, "play-fleet-placed")  # on the member: where it went, and the picture
        member_fp = placing.playing_on(member_host, name)
        # Another identity per origin: the member paired the member page's own certificate.
        assert member_fp != fleet_fp
        with live_host.mgmt() as api:
            games = api.get("/api/v1/status").json()["games"]
            assert not any(g.get("client") == name for g in games), games
        # The fleet host's operator sees the session on the member and ends it there.
        placing.end_from_the_fleet_host(
            live_host, member_host, joined, name, "Desktop", page, page_wait
        )
    finally:
        browser.close()
        pw.stop()
        placing.unpair(member_host, member_fp)
        placing.unpair(live_host, fleet_fp)


def test_member_sessions_from_the_fleet_host_say_why_not(live_host, member_host, fleet, joined):
    with live_host.mgmt() as api:
        r = api.get(f"/api/v1/fleet/members/{joined}/sessions")
        assert r.status_code == 200 and r.json() == [], r.text
        base = f"/api/v1/fleet/members/{joined}/sessions"
        r = api.delete(f"{base}/deadbeef")
        assert r.status_code == 404 and "no live session deadbeef on den" in r.json()["error"]
        assert api.delete(f"{base}/not-an-id").status_code == 400
        assert api.get("/api/v1/fleet/members/999999/sessions").status_code == 404
        tokenless = fleet.add(
            member_host.url.replace("127.0.0.1", "localhost"),
            fingerprint_of(member_host),
            "bare",
            view(),
        )
        r = api.get(f"/api/v1/fleet/members/{tokenless}/sessions")
        assert r.status_code == 503 and "holds no token for bare" in r.json()["error"]
        gone = f"https://127.0.0.1:{free_base_port()}"
        down = fleet.add(gone, "00" * 32, "gone", view(), token="44" * 32)
        r = api.delete(f"/api/v1/fleet/members/{down}/sessions/deadbeef")
        assert r.status_code == 503 and r.json()["error"].startswith("gone: cannot connect")
        assert "44" * 32 not in r.text and r.headers.get("Retry-After")
    with live_host.client() as c:
        plugin = {"Authorization": f"Bearer {live_host.plugin_token}"}
        path = f"/api/v1/fleet/members/{joined}/sessions"
        assert c.get(path, headers=plugin).status_code == 403
        assert c.get(path).status_code == 401
