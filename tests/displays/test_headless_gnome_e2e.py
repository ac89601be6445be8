"""headless_mode on GNOME end to end with a real Moonlight client (moonlight-python): a
test-owned headless GNOME (tests/support/gnome.py) whose own monitor Meta-0 shows a fullscreen
foot of one colour, and a host started inside that session with headless_mode on. A session
gets a virtual monitor of that desktop at the client's mode; the app the session starts
(tests/support/wl_app.py, a native Wayland window going fullscreen once mapped) opens there,
the client decodes its four quadrants (never Meta-0's colour), the client's key reaches it, and
when the session ends the monitor goes (keep-alive off) and nothing of it is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from media.mutter import screencast
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.displays.test_headless_e2e import CLIENT, QUAD_POINTS, H, W, bgr, close, stream
from tests.streaming.conftest import events, pair, wait_for
from tests.support import wl_app
from tests.support.gnome import gst_pipelines, missing_tools, running_gnome
from tests.support.livehost import ROOT, running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

META0 = "118844"  # foot's background on the person's own monitor


def app_events(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


@pytest.fixture(scope="module")
def gnome_host():
    """A headless GNOME whose Meta-0 shows foot's colour, and a host inside that session with
    headless_mode on, keep-alive off, and the quadrant app in its catalog."""
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    state = Path(tempfile.mkdtemp(prefix="gnome-headless-e2e-"))
    log = state / "wl_app.jsonl"
    conf = "ping_timeout = 3000\nheadless_mode = true\nmax_sessions = 2\n"
    (state / "host.conf").write_text(conf)
    (state / "display-settings.json").write_text(json.dumps({"preset": "custom",
        "keep_alive": {"mode": "off"}, "topology": "auto", "mode_conflict": "separate",
        "identity": "per-client", "layout": {"mode": "auto-row"}, "max_displays": 4}))  # fmt: skip
    app_cmd = f"{sys.executable} {ROOT / 'tests/support/wl_app.py'}"
    apps = [{"name": "Quadrants", "cmd": f"{app_cmd} {log}"},
            {"name": "Red", "cmd": f"{app_cmd} {state / 'red.jsonl'} ff0000"},
            {"name": "Blue", "cmd": f"{app_cmd} {state / 'blue.jsonl'} 0000ff"}]  # fmt: skip
    (state / "apps.json").write_text(json.dumps({"apps": apps}))
    with running_gnome("1280x720") as desk:
        desk.foot(META0, ["sleep", "600"])
        env = {
            "DBUS_SESSION_BUS_ADDRESS": desk.bus_address,
            "XDG_RUNTIME_DIR": str(desk.runtime_dir),
            "WAYLAND_DISPLAY": desk.wayland_display,
            "DISPLAY": "",
            "PYTHONPATH": str(ROOT),
        }
        with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state, env=env) as host:
            cfg = state / "ml"
            cfg.mkdir()
            pair(host, cfg, pin="8642", name="Gnome-headless")
            yield desk, host, cfg, log
        time.sleep(0.5)
        assert desk.procs["mutter"].poll() is None  # the person's desktop is never torn down


def connectors(desk) -> list[str]:
    return [c for m in screencast.logical_monitors(desk.bus_address) for c in m["connectors"]]


def test_each_session_gets_a_virtual_monitor_of_the_gnome_desktop(gnome_host, monkeypatch):
    desk, host, cfg, log = gnome_host
    with host.mgmt() as c:
        found = c.get("/api/v1/diagnostics/preflight").json()["checks"]
        checks = {x["id"]: x for x in found}
        heads = {h["id"]: h for h in c.get("/api/v1/compositors/headless").json()}
    assert checks["capture-backends"]["backend"] == "headless", checks["capture-backends"]
    assert "virtual monitor of the GNOME desktop" in checks["capture-backends"]["detail"]
    assert checks["headless-compositor"]["status"] == "pass", checks["headless-compositor"]
    assert heads["mutter"]["available"] is True, heads
    shown: list = []

    def live():
        with host.mgmt() as c:
            shown[:] = c.get("/api/v1/display/state").json()["displays"]
        return shown or None

    watcher = threading.Thread(target=lambda: wait_for(live, timeout=60))
    watcher.start()
    monkeypatch.setenv("STREAM_SAVE", str(host.state_dir / "decoded.png"))  # to look at
    r = stream(host, cfg, "Quadrants", (W // 2, H // 2), QUAD_POINTS, seconds=8)
    watcher.join()
    print("headless gnome:", json.dumps(r), "display:", json.dumps(shown))
    assert shown and shown[0]["backend"] == "mutter" and shown[0]["owned"], shown
    assert shown[0]["output"] != "Meta-0" and shown[0]["mode"] == f"{W}x{H}@60", shown
    assert r["decoded"] > 30 and r["shape"] == [H, W, 3], r
    for got, want in zip(r["samples_bgr"], wl_app.QUADRANTS, strict=True):
        assert close(got, bgr(want)), (r["samples_bgr"], wl_app.QUADRANTS)
    seen = app_events(log)
    assert {"kind": "size", "args": [W, H]} in seen, seen[-10:]
    assert {"kind": "key", "args": [30, 1]} in seen, seen[-20:]
    with host.mgmt() as c:
        assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 20)
    assert wait_for(lambda: connectors(desk) == ["Meta-0"], 10), connectors(desk)
    assert wait_for(lambda: gst_pipelines(desk) == [], 10), gst_pipelines(desk)


def test_a_monitor_that_goes_mid_session_ends_it_with_display_lost(gnome_host):
    """Its keeper dies (as when mutter drops the session): the session ends with the reason,
    the client is told, and the next session gets a new monitor."""
    desk, host, cfg, _ = gnome_host
    args = [sys.executable, CLIENT, str(host.base_port), str(cfg), "640", "360", "30", "15",
            "10", "10"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STREAM_APP": "Quadrants"}
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    try:

        def streaming():
            with host.mgmt() as c:
                return c.get("/api/v1/status").json()["video_streaming"]

        assert wait_for(streaming, timeout=60), "the session never streamed"
        with host.mgmt() as c:
            (shown,) = c.get("/api/v1/display/state").json()["displays"]
        os.kill(shown["pid"], 9)
        seen = events(host, "session.*", lambda ev: any(
            e["kind"] == "session.ended" and e.get("reason") == "display_lost" for e in ev),
            timeout=30)  # fmt: skip
        lost = [e for e in seen if e.get("reason") == "display_lost"]
        assert lost and shown["output"] in lost[-1]["error"], seen
    finally:
        out, _ = proc.communicate(timeout=60)
    told = json.loads(out.strip().splitlines()[-1])
    # Told by the host's termination message (None: it only saw the stream stop). The host
    # sends the graceful code for every end, so the client cannot tell a loss from a quit.
    assert told["termination"] is not None and told["frames"] < 15 * 30, told
    with host.mgmt() as c:
        assert wait_for(lambda: c.get("/api/v1/status").json()["session"] is None, 15)
        assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15)
    assert wait_for(lambda: connectors(desk) == ["Meta-0"], 10), connectors(desk)
    assert wait_for(lambda: gst_pipelines(desk) == [], 10), gst_pipelines(desk)
    r = stream(host, cfg, "Quadrants", (W // 2, H // 2), QUAD_POINTS[:1], seconds=4)
    assert close(r["samples_bgr"][0], bgr(wl_app.QUADRANTS[0])), r


@pytest.mark.exclusive
def test_two_sessions_at_once_each_on_its_own_monitor_at_its_own_mode(gnome_host, tmp_path):
    """Two Moonlight clients at 1280x720 and 1024x576 at once: two virtual monitors at those
    modes, and each client decodes its own app's colour at its own size."""
    from tests.compat.test_concurrent_e2e import Player, close_to

    desk, host, _, _ = gnome_host
    host.marks = tmp_path
    cfg_a, cfg_b = tmp_path / "a", tmp_path / "b"
    pair(host, cfg_a, pin="1111", name="TV")
    pair(host, cfg_b, pin="2222", name="Phone")
    start_at = time.time() + 6
    a = Player(host, cfg_a, "Red", 0x41, start_at, "cancel", max_s=20)
    os.environ["STREAM_MODE"] = "1024x576"
    try:
        b = Player(host, cfg_b, "Blue", 0x42, start_at, "cancel", max_s=20)
    finally:
        del os.environ["STREAM_MODE"]
    try:
        assert a.connected() and b.connected(), (a.proc.poll(), b.proc.poll())
        shown: list = []

        def two_live():
            with host.mgmt() as c:
                shown[:] = c.get("/api/v1/display/state").json()["displays"]
            return len(shown) == 2 and all(d["running"] for d in shown)

        assert wait_for(two_live, 20), shown
        assert sorted((d["backend"], d["mode"]) for d in shown) == [
            ("mutter", "1024x576@60"), ("mutter", "1280x720@60")
        ], shown  # fmt: skip
        sizes = {tuple(m[2:]) for c, m in monitors_now(desk).items() if c != "Meta-0"}
        assert sizes == {(1280, 720), (1024, 576)}, sizes
        time.sleep(4)
        a.stop()
        b.stop()
        ra, rb = a.result(), b.result()
    finally:
        a.kill()
        b.kill()
    print("two gnome sessions:", json.dumps(ra), json.dumps(rb))
    assert ra["shape"] == [720, 1280, 3] and rb["shape"] == [576, 1024, 3], (ra, rb)
    # (the centre shows the pointer: the session put it in the middle of its monitor)
    assert close_to(ra["quarter_rgb"], (255, 0, 0)) and close_to(rb["quarter_rgb"], (0, 0, 255))
    assert ra["frames"] > 60 and rb["frames"] > 60, (ra, rb)
    with host.mgmt() as c:
        assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 20)
    assert wait_for(lambda: connectors(desk) == ["Meta-0"], 10), connectors(desk)


def monitors_now(desk) -> dict[str, tuple]:
    found = screencast.logical_monitors(desk.bus_address)
    return {c: (m["x"], m["y"], m["width"], m["height"]) for m in found for c in m["connectors"]}
