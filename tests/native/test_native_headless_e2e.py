"""Native sessions on a host with `headless_mode = true` (its compositor run as
`nobody` through HOST_COMPOSITOR_USER when the tests run as root), driven by a real aiortc
peer as the player page does (no browser):

* a catalog app (the X11 test app, through Xwayland) is launched onto the session's own output
  of the host's headless sway; the decoded video shows its four colours at their positions;
  a click and a key sent over the data channel reach the app (the output's virtual pointer
  and keyboard); when the device leaves, no app process is left.
* Desktop is the compositor's desktop (its background #285577), never black.
* the compositor killed under a native session ends it with `display_lost`, naming the output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from common import procs
from displays import sway as swaymod
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.displays import test_headless_e2e as hl
from tests.displays.test_headless_e2e import BACKGROUND_BGR, app_pids, bgr, close
from tests.native import test_dtls_proof as dtls
from tests.native.helpers import Knocker, LiveEvents, approved_answer
from tests.native.test_dtls_proof import Device, fingerprint_of, until
from tests.support import wl_app, x11_app
from tests.support.livehost import running_host

# The headless host of the compat e2e (its own instance for this module) and the test peers'
# loopback ICE candidates.
headless_host, x11_lib, loopback_ice = hl.headless_host, hl.x11_lib, dtls.loopback_ice

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(not swaymod.available(), reason="sway is not installed"),
]

W, H, FPS = 1280, 720, 30
QUAD_POINTS = [(x * W // 4, y * H // 4) for y in (1, 3) for x in (1, 3)]  # TL, TR, BL, BR


class Player(Device):
    """The test's native player: keeps the newest decoded frame and the input channel."""

    def __init__(self):
        super().__init__()
        self.last = None
        self.t_first = self.t_last = 0.0

    async def _count(self, track):
        from aiortc.mediastreams import MediaStreamError

        try:
            while True:
                frame = await track.recv()
                self.last = frame
                self.frames += 1
                self.t_last = time.monotonic()
                if self.frames == 1:
                    self.t_first = self.t_last
        except MediaStreamError:
            pass

    def fps(self) -> float:
        span = self.t_last - self.t_first
        return (self.frames - 1) / span if span > 0 else 0.0

    def picture(self):
        return self.last.to_ndarray(format="bgr24")

    def send(self, **ev) -> None:
        self.channel.send(json.dumps(ev))


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (the peer's encoder child)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and procs.alive(int(entry)):
            found.append(int(entry))
    return found


def describe(pids) -> list[str]:
    """The live ones of `pids`, with their command lines (a failure's message)."""
    out = []
    for p in pids:
        if procs.alive(p):
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")[:200]
            except OSError:
                cmd = b"?"
            out.append(f"{p}: {cmd.decode(errors='replace')}")
    return out


def app_key(knocker: Knocker, title: str) -> str:
    if title == "Desktop":
        return "desktop"
    page = knocker.c.get("/play").text
    return re.search(r'<option value="(app:[^"]+)"[^>]*>\s*' + re.escape(title), page).group(1)


async def connect(host, api, knocker: Knocker, player: Player, title: str) -> dict:
    """Offer as the page does; the operator approves the new device; returns the answer."""
    sdp = await player.offer()
    body = {"sdp": sdp, "name": "wl tv", "app": app_key(knocker, title),
            "width": W, "height": H, "fps": FPS}  # fmt: skip
    answer = await approved_answer(knocker, api, body)
    await player.answer(answer["sdp"])
    return {**answer, "fingerprint": fingerprint_of(sdp)}


def peer_pid(api, state_dir) -> int | None:
    """The native session's process, once the session is live (a game row in
    /api/v1/status): the newest child of this host's session manager."""
    games = api.get("/api/v1/status").json()["games"]
    if not any(g["plane"] == "native" for g in games):
        return None
    for p in psutil.process_iter(["cmdline"]):
        if "streaming.sessions.manager" not in " ".join(p.info["cmdline"] or []):
            continue
        with contextlib.suppress(psutil.Error):
            if p.environ().get("HOST_STATE_DIR") == str(state_dir):
                kids = p.children()
                return max(kids, key=lambda c: c.create_time()).pid if kids else None
    return None


def colours_at(picture, points) -> list[list[int]]:
    return [[int(v) for v in picture[y, x]] for x, y in points]


def x11_events(log) -> list[dict]:
    try:
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def test_a_native_session_streams_an_app_on_its_own_output_with_input(
    headless_host, x11_lib, loopback_ice
):
    asyncio.run(_app_with_input(headless_host, x11_lib))


async def _app_with_input(host, lib):
    api, knocker, player = host.mgmt(), Knocker(host), Player()
    host.app_log.unlink(missing_ok=True)
    fp = None
    try:
        answer = await connect(host, api, knocker, player, "X11 App")
        fp = answer["fingerprint"]
        await until(lambda: player.frames > 30, 90, "the first frames")
        shown = api.get("/api/v1/display/state").json()["displays"]
        active = [d for d in shown if d["state"] == "active"]
        assert [(d["backend"], d["owned"], d["mode"]) for d in active] == [
            ("sway", True, f"{W}x{H}@{FPS}")
        ], shown
        pid = await until(
            lambda: peer_pid(api, host.state_dir), 20, "the session in /api/v1/status"
        )
        # its encoder child (and sound capture); not the host's shared compositor, which the
        # first session to need it may have started and which outlives sessions
        shared = {d["pid"] for d in api.get("/api/v1/display/state").json()["displays"]}
        encoder = [p for p in children(pid) if p not in shared]
        assert encoder, "the peer has no encoder child"

        # The decoded video is the app's four quadrants at their positions.
        want = [bgr(c) for c in x11_app.QUADRANTS]

        def painted():
            got = colours_at(player.picture(), QUAD_POINTS)
            return all(close(g, w) for g, w in zip(got, want, strict=True)) and got

        got = await until(painted, 30, must=False)
        assert got, (colours_at(player.picture(), QUAD_POINTS), want)
        assert player.picture().shape == (H, W, 3)

        # fps over a few seconds of steady streaming (printed for the report)
        n0, t0 = player.frames, time.monotonic()
        await asyncio.sleep(5)
        fps = (player.frames - n0) / (time.monotonic() - t0)
        print(f"\nnative headless {W}x{H}@{FPS}: {fps:.1f} fps received and decoded")
        assert fps > 5, fps

        # A click and a key over the data channel reach the app (through Xwayland).
        move = (W // 2 + 100, H // 2 + 50)
        player.send(t="m", x=move[0], y=move[1], w=W, h=H)
        await asyncio.sleep(0.3)
        player.send(t="b", b=1, d=1)
        player.send(t="b", b=1, d=0)
        player.send(t="k", vk=65, d=1)
        player.send(t="k", vk=65, d=0)

        def clicked():
            seen = x11_events(host.app_log)
            key = any(e["kind"] == "key" and e["down"] and e["keycode"] == 38 for e in seen)
            clicks = [e for e in seen if e["kind"] == "button" and e["down"] and e["button"] == 1]
            return key and clicks and clicks[0]

        click = await until(clicked, 20, must=False)
        assert click, x11_events(host.app_log)[-20:]
        assert abs(click["x"] - move[0]) <= 2 and abs(click["y"] - move[1]) <= 2, click
        player.send(t="stop")  # the player pressed Stop: a deliberate end closes the app
        await until(lambda: not procs.alive(pid), 30, must=False)
    finally:
        await player.close()
        knocker.close()
    # The device left: the peer, its encoder child and the app are gone.
    await until(lambda: app_pids(f"{lib}/x11_app.py") == [], 30, must=False)
    assert app_pids(f"{lib}/x11_app.py") == []
    gone = await until(
        lambda: not procs.alive(pid) and not any(map(procs.alive, encoder)),
        30,
        must=False,
    )
    assert gone, describe([pid, *encoder])
    if fp:
        api.delete(f"/api/v1/native/clients/{fp}")
    api.close()


def test_native_desktop_on_headless_is_the_compositors_desktop(headless_host, loopback_ice):
    asyncio.run(_desktop(headless_host))


async def _desktop(host):
    api, knocker, player = host.mgmt(), Knocker(host), Player()
    fp = None
    try:
        fp = (await connect(host, api, knocker, player, "Desktop"))["fingerprint"]
        await until(lambda: player.frames > 10, 90, "the first frames")
        player.send(t="m", x=10, y=10, w=W, h=H)  # the pointer (sway draws it) out of the way
        points = [(W // 2, H // 2), (200, 200), (1200, 700)]

        def background():
            got = colours_at(player.picture(), points)
            return all(close(g, BACKGROUND_BGR) for g in got) and got

        assert await until(background, 20, must=False), colours_at(player.picture(), points)
    finally:
        await player.close()
        knocker.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        api.close()


def test_a_compositor_that_dies_under_a_native_session_ends_it_with_display_lost(
    headless_host, x11_lib, loopback_ice
):
    asyncio.run(_display_lost(headless_host, x11_lib))


async def _display_lost(host, lib):
    api, knocker, player = host.mgmt(), Knocker(host), Player()
    events = LiveEvents(host, "session.*")
    fp = None
    try:
        answer = await connect(host, api, knocker, player, "X11 App")
        fp = answer["fingerprint"]
        await until(lambda: player.frames > 10, 90, "the first frames")
        pid = await until(
            lambda: peer_pid(api, host.state_dir), 20, "the session in /api/v1/status"
        )
        # its encoder child (and sound capture); not the host's shared compositor, which the
        # first session to need it may have started and which outlives sessions
        shared = {d["pid"] for d in api.get("/api/v1/display/state").json()["displays"]}
        encoder = [p for p in children(pid) if p not in shared]
        (shown,) = [
            d for d in api.get("/api/v1/display/state").json()["displays"] if d["state"] == "active"
        ]
        os.kill(shown["pid"], 9)  # the compositor crashes under the session

        def lost(seen):
            return [e for e in seen if e["kind"] == "session.ended"]

        ended = await asyncio.to_thread(events.wait, lost, 40, "session.ended")
        assert ended[-1].get("reason") == "display_lost", ended
        assert shown["output"] in ended[-1]["error"], ended
        # nothing of the session is left: the peer, its encoder child, the app
        gone = await until(
            lambda: not procs.alive(pid) and not any(map(procs.alive, encoder)),
            30,
            must=False,
        )
        assert gone, (pid, describe([pid, *encoder]))
        await until(lambda: app_pids(f"{lib}/x11_app.py") == [], 30, must=False)
        assert app_pids(f"{lib}/x11_app.py") == []
    finally:
        events.close()
        await player.close()
        knocker.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        api.close()


# -- attached wlr -----------------------------------------------------------------------------
operator_sway = hl.operator_sway  # a test-owned sway (run as nobody) with a Wayland client


def test_native_capture_wlr_streams_the_operators_compositor(operator_sway, loopback_ice):
    comp, app = operator_sway
    state = Path(tempfile.mkdtemp(prefix="native-wlr-e2e-"))
    (state / "host.conf").write_text("capture = wlr\n")
    (state / "apps.json").write_text(json.dumps({"apps": [{"name": "Desktop"}]}))
    env = {"WAYLAND_DISPLAY": comp.wayland_socket, "DISPLAY": ""}
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state, env=env) as host:
        asyncio.run(_wlr_desktop(host, app))
        with host.mgmt() as c:
            assert hl.wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15)
    assert comp.alive()  # attached: never owned, never torn down


async def _wlr_desktop(host, app):
    api, knocker, player = host.mgmt(), Knocker(host), Player()
    fp = None
    try:
        fp = (await connect(host, api, knocker, player, "Desktop"))["fingerprint"]
        await until(lambda: player.frames > 30, 90, "the first frames")
        want = [bgr(c) for c in wl_app.QUADRANTS]

        def shown():
            got = colours_at(player.picture(), QUAD_POINTS)
            return all(close(g, w) for g, w in zip(got, want, strict=True)) and got

        assert await until(shown, 20, must=False), (colours_at(player.picture(), QUAD_POINTS), want)
        app.events.clear()
        player.send(t="m", x=W // 2, y=H // 2, w=W, h=H)
        await asyncio.sleep(0.3)
        player.send(t="b", b=1, d=1)
        player.send(t="b", b=1, d=0)
        player.send(t="k", vk=65, d=1)
        player.send(t="k", vk=65, d=0)

        def arrived():
            return ("key", 30, 1) in app.events and any(e[0] == "button" for e in app.events)

        assert await until(arrived, 20, must=False), app.events[-20:]
        player.send(t="stop")
        await until(lambda: not api.get("/api/v1/status").json()["active_sessions"], 30)
    finally:
        await player.close()
        knocker.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        api.close()
