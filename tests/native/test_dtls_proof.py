"""An offer that claims a paired device's fingerprint changes nothing until DTLS proves it.

The identity is the SHA-256 fingerprint in the offer's `a=fingerprint` line, which anyone on
the network can copy from a paired device. Both devices here are programs (aiortc peers, each
with its own DTLS certificate) talking to the live host as a browser does: the real one is
approved and plays; a stranger then sends an offer carrying the real device's fingerprint and
its own certificate, for an app with a prep step and a command that leave marks. The real
device must keep playing (frames still arriving, the same session), and no prep step, no
launch, no display and no session event may come of the stranger's offer.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time

import pytest

from tests.native.helpers import Knocker, LiveEvents, approved_answer, catalog_app

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

APP = "Native Stolen Check"
REFUSED = b"did not prove the offered fingerprint"
MODE = {"width": 1280, "height": 720, "fps": 30}


@pytest.fixture
def marker_app(live_host, admin_auth, tmp_path):
    """A catalog app whose prep step and command each leave a file when they run."""
    marks = tmp_path / "marks"
    marks.mkdir()
    cmd = f"sh -c 'touch {marks}/launched; exec sleep 60'"
    with catalog_app(live_host, admin_auth, APP, cmd, marks):
        yield marks


@pytest.fixture
def loopback_ice(monkeypatch):
    """aioice leaves 127.0.0.1 out of its candidates; the host's peer adds it for a loopback
    browser, so the test's peers must offer it too."""
    from aioice import ice

    original = ice.get_host_addresses

    def with_loopback(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        return (["127.0.0.1"] if use_ipv4 else []) + original(use_ipv4, use_ipv6)

    monkeypatch.setattr(ice, "get_host_addresses", with_loopback)


class Device:
    """A native player as a program: its own DTLS certificate, H.264 video and audio to
    receive, the `input` data channel; counts the video frames it decodes."""

    def __init__(self):
        from aiortc import RTCConfiguration, RTCPeerConnection
        from aiortc.rtcrtpreceiver import RTCRtpReceiver

        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        video = self.pc.addTransceiver("video", direction="recvonly")
        video.setCodecPreferences(
            [
                c
                for c in RTCRtpReceiver.getCapabilities("video").codecs
                if c.mimeType == "video/H264"
            ]
        )
        self.pc.addTransceiver("audio", direction="recvonly")
        self.channel = self.pc.createDataChannel("input")
        self.frames = 0
        self.tasks: list[asyncio.Task] = []

        @self.pc.on("track")
        def on_track(track):
            if track.kind == "video":
                self.tasks.append(asyncio.ensure_future(self._count(track)))

    async def _count(self, track):
        from aiortc.mediastreams import MediaStreamError

        try:
            while True:
                await track.recv()
                self.frames += 1
        except MediaStreamError:
            pass

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return self.pc.localDescription.sdp

    async def answer(self, sdp: str) -> None:
        from aiortc import RTCSessionDescription

        await self.pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await self.pc.close()


FP_LINE = re.compile(r"^a=fingerprint:sha-256 ([0-9A-F:]{95})\r?$", re.M | re.I)


def fingerprint_of(sdp: str) -> str:
    return FP_LINE.search(sdp).group(1).replace(":", "").lower()


def steal(sdp: str, victim_fp: str) -> str:
    """The stranger's own offer with the victim's fingerprint in every a=fingerprint line."""
    colons = ":".join(victim_fp[i : i + 2] for i in range(0, 64, 2)).upper()
    return FP_LINE.sub(f"a=fingerprint:sha-256 {colons}", sdp)


def app_key(knocker: Knocker) -> str:
    page = knocker.c.get("/play").text
    return re.search(r'<option value="(app:[^"]+)"[^>]*>\s*' + re.escape(APP), page).group(1)


async def until(check, timeout: float, what: str = "", must: bool = True):
    """`check()` once it is truthy; after `timeout`: fail (`must`), else its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := check()):
        if loop.time() > deadline:
            if must:
                raise AssertionError(f"timed out waiting for {what}")
            return value
        await asyncio.sleep(0.1)
    return value


def active_displays(api) -> list[tuple]:
    """(slot, client, Xvfb pid) of the displays in use (other tests' may linger and expire)."""
    rows = api.get("/api/v1/display/state").json()["displays"]
    return [(d["slot"], d["client"], d["pid"]) for d in rows if d["state"] == "active"]


def native_games(api) -> list[tuple]:
    """(session id, client, title) of every native session's game row in /api/v1/status."""
    games = api.get("/api/v1/status").json()["games"]
    return [(g["session_id"], g["client"], g["title"]) for g in games if g["plane"] == "native"]


def test_stolen_fingerprint_takes_nothing_over(live_host, marker_app, loopback_ice):
    asyncio.run(_stolen_fingerprint(live_host, marker_app))


async def _stolen_fingerprint(live_host, marks):
    api = live_host.mgmt()
    knocker = Knocker(live_host)
    real, stranger = Device(), Device()
    fp = None
    events = None
    try:
        # The real device asks, the operator approves it, it plays Desktop.
        sdp = await real.offer()
        fp = fingerprint_of(sdp)
        body = {"sdp": sdp, "name": "real tv", "app": "desktop", **MODE}
        await real.answer((await approved_answer(knocker, api, body))["sdp"])
        await until(lambda: real.frames > 10, 30, "the real device's first frames")
        playing = await until(lambda: native_games(api), 10, "the real session listed")
        assert [(c, t) for _sid, c, t in playing] == [("real tv", "Desktop")], playing
        displays = active_displays(api)
        assert [client for _slot, client, _pid in displays] == ["real tv"], displays
        events = LiveEvents(live_host, "session.*,client.*,stream.*,game.*")

        peer_log = live_host.state_dir / "logs" / "native-peer.log"
        logged = peer_log.stat().st_size
        # The stranger: its own certificate, the real device's fingerprint in its offer.
        own = await stranger.offer()
        assert fingerprint_of(own) != fp
        forged = {"sdp": steal(own, fp), "name": "real tv", "app": app_key(knocker), **MODE}
        r = await asyncio.to_thread(knocker.post, forged)
        # It gets an answer (nothing is known until DTLS), but nothing has started for it.
        assert r.status_code == 200, r.text
        t0 = time.monotonic()
        await stranger.answer(r.json()["sdp"])
        refused = await until(lambda: REFUSED in peer_log.read_bytes()[logged:], 20, must=False)
        print(f"\nthe host refused the stranger: {refused}, {time.monotonic() - t0:.1f} s after")
        before = real.frames
        await asyncio.sleep(3)

        assert real.pc.connectionState == "connected"
        assert real.frames > before + 30, (before, real.frames)  # still playing, ~30 fps
        assert native_games(api) == playing  # the same session (its peer's pid)
        assert active_displays(api) == displays  # none acquired for the stranger
        assert sorted(p.name for p in marks.iterdir()) == []  # no prep step, no launch
        happened = [e["kind"] for e in events.drain(1.0)]
        assert happened == [], happened
        assert refused, "the host's peer never said it refused the stranger's certificate"
    finally:
        if events is not None:
            events.close()
        await stranger.close()
        await real.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        knocker.close()
        api.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_unproven_offers_are_bounded(live_host, loopback_ice):
    """Offers that claim a paired fingerprint but never do DTLS each hold a peer process until
    the connect timeout: at most 2 per device (429 after), and unpairing ends them."""
    asyncio.run(_unproven(live_host))


async def _unproven(live_host):
    from tests.native.helpers import fake_fp

    api = live_host.mgmt()
    knocker = Knocker(live_host, source="127.0.0.7")
    fp = fake_fp()
    strangers = [Device() for _ in range(3)]
    try:
        pending = await asyncio.to_thread(knocker.knock, fp)
        r = api.post(f"/api/v1/native/pending/{pending.json()['id']}/approve")
        assert r.status_code == 200, r.text
        answers = []
        for dev in strangers:
            forged = {"sdp": steal(await dev.offer(), fp), "name": "x", "app": "desktop", **MODE}
            answers.append(await asyncio.to_thread(knocker.post, forged))
        assert [a.status_code for a in answers] == [200, 200, 429], [a.text for a in answers]
        assert answers[2].json() == {
            "error": "this device is already connecting; try again in a few seconds"
        }
        assert api.get("/api/v1/status").json()["active_sessions"] == 0
        # Unpairing ends the waiting peers at once (not after the 30 s connect timeout): paired
        # again, the same fingerprint gets a peer again.
        assert api.delete(f"/api/v1/native/clients/{fp}").status_code == 204
        pending = await asyncio.to_thread(knocker.knock, fp)
        assert pending.status_code == 202, pending.text
        assert api.post(f"/api/v1/native/pending/{pending.json()['id']}/approve").status_code == 200
        again = Device()
        strangers.append(again)
        forged = {"sdp": steal(await again.offer(), fp), "name": "x", "app": "desktop", **MODE}
        r = await until(
            lambda: (a := knocker.post(forged)).status_code == 200 and a, 10, must=False
        )
        assert r, "the unpaired device's waiting peers still count"
    finally:
        for dev in strangers:
            await dev.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        knocker.close()
        api.close()
