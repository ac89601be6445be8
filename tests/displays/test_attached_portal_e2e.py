"""Attached `portal` capture end to end with a real Moonlight client (moonlight-python): a
test-owned headless GNOME with xdg-desktop-portal-gnome and the front end in its session
(tests/support/portal.py), a fullscreen native Wayland client on it, and a host started
inside that session with `capture = portal`.

The person consents once, before the host runs: a first portal session (made here as the
host would, with the host's state directory) shows the real dialog, which `Person` answers
with "Remember this selection" on. The host then streams with nobody at the desktop: its
session sends the kept token, no dialog is shown (one would go unanswered and the stream
would show nothing), and the client decodes the test app's colours. GNOME's portal has no
wlroots virtual devices, and the RemoteDesktop portal is not used yet: this session streams
without input, as the host logs.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.displays.test_headless_e2e import QUAD_POINTS, H, W, bgr, close, stream
from tests.streaming.conftest import pair, wait_for
from tests.support import wl_app
from tests.support.gnome import gst_pipelines
from tests.support.livehost import running_host
from tests.support.portal import Person, missing_gnome_tools, running_gnome_portal

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_capture_portal_streams_unattended_after_one_consent(monkeypatch):
    missing = missing_gnome_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    state = Path(tempfile.mkdtemp(prefix="portal-e2e-"))
    with running_gnome_portal("1280x720") as desk:
        app = wl_app.WaylandApp(str(desk.runtime_dir / desk.wayland_display), fullscreen=True)
        person = Person(desk)
        try:
            assert app.wait(lambda: app.size == (W, H), 20), app.size
            token = consent_once(desk, person, state, monkeypatch)
            (state / "host.conf").write_text("ping_timeout = 3000\ncapture = portal\n")
            (state / "apps.json").write_text(json.dumps({"apps": [{"name": "Desktop"}]}))
            env = {
                "DBUS_SESSION_BUS_ADDRESS": desk.bus_address,
                "XDG_RUNTIME_DIR": str(desk.runtime_dir),
                "WAYLAND_DISPLAY": desk.wayland_display,
                "DISPLAY": "",
            }
            with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state, env=env) as host:
                with host.mgmt() as c:
                    methods = {m["id"]: m for m in c.get("/api/v1/capture/methods").json()}
                assert methods["portal"]["selected"], methods["portal"]
                assert methods["portal"]["consent"]["kept"] is True, methods["portal"]
                cfg = state / "ml"
                cfg.mkdir()
                pair(host, cfg, pin="8642", name="Portal")
                r = stream(host, cfg, "Desktop", (W // 2, H // 2), QUAD_POINTS)
                print("attached portal:", json.dumps(r))
                assert r["decoded"] > 30 and r["shape"] == [H, W, 3], r
                for got, want in zip(r["samples_bgr"], wl_app.QUADRANTS, strict=True):
                    assert close(got, bgr(want)), (r["samples_bgr"], wl_app.QUADRANTS)
                assert not person.dialog_shown()
                with host.mgmt() as c:
                    assert wait_for(
                        lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15
                    )
                assert wait_for(lambda: own_pipelines(desk, person) == [], 10)
            kept = json.loads((state / "portal-screencast.json").read_text())
            assert kept["restore_token"] == token and kept["outcome"] == "granted"
        finally:
            person.close()
            app.close()
    time.sleep(0.2)


def consent_once(desk, person, state: Path, monkeypatch) -> str:
    """The person's one answer: a portal session with the host's state dir, its dialog
    answered with Share; the restore token is kept there."""
    import threading

    from media.portal.screencast import PortalScreenCast

    monkeypatch.setenv("HOST_STATE_DIR", str(state))
    out: dict = {}

    def ask():
        cast = PortalScreenCast(bus_address=desk.bus_address, consent_timeout=20)
        cast.remember()
        out["token"] = cast.restore_token
        cast.close()

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    assert person.wait_dialog()
    person.share()
    t.join(25)
    assert out.get("token"), out
    monkeypatch.delenv("HOST_STATE_DIR")
    return out["token"]


def own_pipelines(desk, person) -> list[int]:
    """This desktop's gst-launch processes other than the person's own view."""
    eyes = person.eyes._frames
    mine = {eyes.proc.pid} if eyes is not None else set()
    return [p for p in gst_pipelines(desk) if p not in mine]
