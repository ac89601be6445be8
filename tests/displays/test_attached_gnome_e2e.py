"""Attached GNOME end to end with a real Moonlight client (moonlight-python): a test-owned
headless GNOME (tests/support/gnome.py: session bus, PipeWire, mutter with one 1280x720
monitor) with a fullscreen native Wayland client on it (tests/support/wl_app.py), and a host
started inside that session (its bus, runtime dir and Wayland display; no DISPLAY). With
`capture = gnome`, and with `capture = auto` picking gnome, Desktop streams the monitor through
mutter's ScreenCast, the client's key and click reach the Wayland client through mutter's
RemoteDesktop, and the operator's desktop is left running: no display kept, no gst-launch left.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.displays.test_headless_e2e import H, W, bgr, close, stream
from tests.streaming.conftest import pair, wait_for
from tests.support import wl_app
from tests.support.gnome import gst_pipelines, missing_tools, running_gnome
from tests.support.livehost import running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def operator_gnome():
    """The operator's GNOME desktop with the quadrant client fullscreen on Meta-0."""
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_gnome("1280x720") as desk:
        app = wl_app.WaylandApp(str(desk.runtime_dir / desk.wayland_display), fullscreen=True)
        try:
            assert app.wait(lambda: app.size == (W, H), 20), app.size
            yield desk, app
        finally:
            app.close()


@pytest.mark.parametrize(
    ("method", "size"), [("gnome", (W, H)), ("auto", (W, H)), ("gnome", (960, 540))]
)
def test_capture_gnome_streams_the_operators_desktop(operator_gnome, method, size):
    """The host in the operator's session streams mutter's monitor and drives its seat; a
    wrong monitor, lost input, a kept display or a leaked pipeline each fail here. At 960x540
    the 1280x720 monitor is scaled to the client's mode, and its pointer scaled back."""
    desk, app = operator_gnome
    mutter = desk.procs["mutter"]
    state = Path(tempfile.mkdtemp(prefix=f"gnome-e2e-{method}-"))
    (state / "host.conf").write_text(f"ping_timeout = 3000\ncapture = {method}\n")
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
        assert methods["gnome"]["available"] and methods["gnome"].get("selected"), methods
        if method == "auto":
            assert methods["auto"]["resolves_to"] == "gnome", methods["auto"]
        cfg = state / "ml"
        cfg.mkdir()
        pair(host, cfg, pin="8642", name=f"Gnome-{method}")
        app.events.clear()
        w, h = size
        points = [(x * w // 4, y * h // 4) for y in (1, 3) for x in (1, 3)]
        r = stream(host, cfg, "Desktop", (w // 2, h // 2), points, size=size)
        print(f"attached gnome ({method}, {w}x{h}):", json.dumps(r))
        assert r["decoded"] > 30 and r["shape"] == [h, w, 3], r
        for got, want in zip(r["samples_bgr"], wl_app.QUADRANTS, strict=True):
            assert close(got, bgr(want)), (r["samples_bgr"], wl_app.QUADRANTS)
        assert ("key", 30, 1) in app.events, app.events[-20:]
        assert any(e[0] == "button" for e in app.events), app.events[-20:]
        with host.mgmt() as c:
            assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15)
        assert wait_for(lambda: gst_pipelines(desk) == [], 10), gst_pipelines(desk)
    time.sleep(0.5)
    assert mutter.poll() is None  # attached: never owned, never torn down
    assert gst_pipelines(desk) == []
