"""Wlroots sessions end to end with a real Moonlight client (moonlight-python):

* headless mode: a host with `headless_mode = true` (run as root, so its compositor runs as
  `nobody` through HOST_COMPOSITOR_USER) launches a catalog app (the X11 test app, through
  Xwayland) on its own output of the host's headless sway at 1280x720@60: the client decodes
  the app's colours at their positions, its key and click reach the app; when the session ends
  the output is retired and no app process is left; at host stop no sway or Xwayland is left.
  Desktop on that host is the compositor's desktop (its background), never black.
* attached wlr: a test-owned sway (run as nobody) with a Wayland client on it, and a host
  started with WAYLAND_DISPLAY pointing at its socket and `capture = wlr`: Desktop streams it,
  input reaches the client, and the operator's compositor is left running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from common import procs
from displays import sway as swaymod
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import events, owned_processes, pair, wait_for
from tests.support import wl_app, x11_app
from tests.support.livehost import ROOT, running_host

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(not swaymod.available(), reason="sway is not installed"),
]

CLIENT = str(ROOT / "tests/support/attached_client.py")
W, H, FPS = 1280, 720, 60
NOBODY = (65534, 65534)
QUAD_POINTS = [(x * W // 4, y * H // 4) for y in (1, 3) for x in (1, 3)]  # TL, TR, BL, BR
BACKGROUND_BGR = [0x77, 0x55, 0x28]  # headless.DEFAULT_BACKGROUND, #285577


def close(got, want, tol=24) -> bool:
    return max(abs(a - b) for a, b in zip(got, want, strict=True)) <= tol


def bgr(rgb) -> list[int]:
    return list(reversed(rgb))


def stream(host, cfg, app: str, move, samples, seconds=6, size=(W, H)) -> dict:
    args = [sys.executable, CLIENT, str(host.base_port), str(cfg), str(size[0]), str(size[1]),
            str(FPS),
            str(seconds), str(move[0]), str(move[1]),
            *(f"{x},{y}" for x, y in samples)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STREAM_APP": app}
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def app_pids(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (the test app's private path)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd and procs.alive(int(entry)):
            found.append(int(entry))
    return found


def compositor_processes(state_dir: Path) -> list[str]:
    return [p for p in owned_processes(state_dir) if "sway" in p or "Xwayland" in p]


# -- headless mode --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def x11_lib():
    """x11_app.py with python-xlib, where `nobody` can read it; its event log dir writable."""
    lib = x11_app.install(Path(tempfile.mkdtemp(prefix="headless-app-")))
    yield lib
    shutil.rmtree(lib, ignore_errors=True)


@pytest.fixture(scope="module")
def headless_host(x11_lib):
    state = Path(tempfile.mkdtemp(prefix="headless-e2e-"))
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    log = x11_lib / "logs" / "x11.jsonl"
    apps = {"apps": [
        {"name": "Desktop"},
        {"name": "X11 App", "cmd": f"{python} {x11_lib}/x11_app.py {log}",
         "env": {"PYTHONPATH": str(x11_lib)}},
        {"name": "Never Maps",
         "cmd": f"{python} -c 'import time; time.sleep(600)' {x11_lib}/never"},
    ]}  # fmt: skip
    (state / "host.conf").write_text("ping_timeout = 3000\nheadless_mode = true\n")
    (state / "apps.json").write_text(json.dumps(apps))
    env = {"HOST_COMPOSITOR_USER": "nobody", "HOST_APP_MAP_TIMEOUT_S": "8"}
    env.update({"DISPLAY": "", "WAYLAND_DISPLAY": ""})
    host = None
    try:
        with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state, env=env) as host:
            host.app_log = log
            yield host
    finally:
        # At host stop: no sway, no Xwayland, no app of this host is left.
        assert wait_for(lambda: not compositor_processes(state), 15), compositor_processes(state)
        assert app_pids(str(x11_lib)) == []


@pytest.fixture(scope="module")
def headless_ml(headless_host, tmp_path_factory):
    cfg = tmp_path_factory.mktemp("ml-headless")
    return cfg, pair(headless_host, cfg, pin="1357", name="Headless")


def _x11_events(log: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def test_an_x11_app_runs_on_its_own_output_and_is_streamed_with_input(
    headless_host, headless_ml, x11_lib
):
    host, (cfg, _) = headless_host, headless_ml
    with host.mgmt() as c:
        checks = {x["id"]: x for x in c.get("/api/v1/diagnostics/preflight").json()["checks"]}
    assert checks["capture-backends"]["backend"] == "headless", checks["capture-backends"]
    assert checks["headless-compositor"]["status"] == "pass", checks["headless-compositor"]

    shown: list = []

    def live_display():
        with host.mgmt() as c:
            shown[:] = c.get("/api/v1/display/state").json()["displays"]
        return shown or None

    move = (W // 2 + 100, H // 2 + 50)
    host.app_log.unlink(missing_ok=True)
    import threading

    watcher = threading.Thread(target=lambda: wait_for(live_display, timeout=60))
    watcher.start()
    r = stream(host, cfg, "X11 App", move, QUAD_POINTS)
    watcher.join()
    print("headless x11:", json.dumps(r), "display:", json.dumps(shown))
    assert shown and shown[0]["backend"] == "sway" and shown[0]["owned"] is True, shown
    assert shown[0]["output"] and shown[0]["mode"] == "1280x720@60", shown

    # What the client decoded is the app's four quadrants at their positions.
    assert r["decoded"] > 30 and r["shape"] == [H, W, 3], r
    for got, want in zip(r["samples_bgr"], x11_app.QUADRANTS, strict=True):
        assert close(got, bgr(want)), (r["samples_bgr"], x11_app.QUADRANTS)

    # The key and the click reached the app (through Xwayland): 'A' is evdev 30, X keycode 38.
    seen = _x11_events(host.app_log)
    assert any(e["kind"] == "key" and e["down"] and e["keycode"] == 38 for e in seen), seen[-20:]
    clicks = [e for e in seen if e["kind"] == "button" and e["down"] and e["button"] == 1]
    assert clicks and abs(clicks[0]["x"] - move[0]) <= 2 and abs(clicks[0]["y"] - move[1]) <= 2

    # After the session (a client quit): no app process is left; the output lingers per the
    # default keep_alive (10 s) and the supervisor's countdown retires it, without a release.
    seen = events(host, "session.*,display.*",
                  lambda ev: any(e["kind"] == "session.ended" for e in ev))  # fmt: skip
    assert any(e["kind"] == "session.ended" for e in seen), seen
    assert wait_for(lambda: app_pids(f"{x11_lib}/x11_app.py") == [], 15)
    with host.mgmt() as c:
        states = [d["state"] for d in c.get("/api/v1/display/state").json()["displays"]]
        assert states in (["lingering"], []), states
        assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 40)
    from media.wayland.client import Display

    with Display(shown[0]["wayland_display"]) as d:
        live = {o.name: o for o in d.outputs()}
    out = live.get(shown[0]["output"])
    assert out is None or out.y >= 4320 or (out.width, out.height) == (640, 360), out


def test_desktop_on_headless_is_the_compositors_desktop(headless_host, headless_ml):
    host, (cfg, _) = headless_host, headless_ml
    r = stream(
        host, cfg, "Desktop", (10, 10), [(W // 2, H // 2), (200, 200), (1200, 700)], seconds=4
    )
    print("desktop:", json.dumps(r))
    assert r["decoded"] > 10, r
    for got in r["samples_bgr"]:  # (away from the pointer at 10,10: sway draws it)
        assert close(got, BACKGROUND_BGR), r  # sway's background, not a black frame
    with host.mgmt() as c:
        assert wait_for(lambda: c.get("/api/v1/status").json()["session"] is None, 15)
        assert c.post("/api/v1/display/release", json={}).status_code == 200


def test_an_app_that_never_maps_a_window_fails_the_launch_and_leaves_nothing(
    headless_host, headless_ml, x11_lib
):
    host, (_, client) = headless_host, headless_ml
    app = next(a.id for a in client.apps() if a.name == "Never Maps")
    keys = "rikey=000102030405060708090a0b0c0d0e0f&rikeyid=7&localAudioPlayMode=0"
    from moonlight_python.http_client import NvHTTP

    http = NvHTTP("127.0.0.1", client.identity, http_port=host.base_port,
                  https_port=host.base_port - 5)  # fmt: skip
    # a launch timeout as clients use for /launch (the default 5 s is for quick requests)
    xml = http.open_https("launch", f"appid={app}&mode=1280x720x60&{keys}", timeout=60)
    assert 'status_code="500"' in xml and "mapped no window" in xml, xml
    assert wait_for(lambda: app_pids(f"{x11_lib}/never") == [], 15)
    with host.mgmt() as c:
        assert wait_for(lambda: c.get("/api/v1/status").json()["session"] is None, 15)
        assert c.post("/api/v1/display/release", json={}).status_code == 200
        assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15)


def test_a_compositor_that_dies_mid_session_ends_it_with_display_lost(
    headless_host, headless_ml, x11_lib
):
    host, (cfg, _) = headless_host, headless_ml
    args = [sys.executable, CLIENT, str(host.base_port), str(cfg), "640", "360", "30", "15",
            "10", "10"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STREAM_APP": "X11 App"}
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    try:

        def streaming():
            with host.mgmt() as c:
                return c.get("/api/v1/status").json()["video_streaming"]

        assert wait_for(streaming, timeout=60), "the session never streamed"
        with host.mgmt() as c:
            (shown,) = c.get("/api/v1/display/state").json()["displays"]
        os.kill(shown["pid"], 9)  # the compositor crashes under the session
        seen = events(host, "session.*", lambda ev: any(
            e["kind"] == "session.ended" and e.get("reason") == "display_lost" for e in ev),
            timeout=30)  # fmt: skip
        lost = [e for e in seen if e.get("reason") == "display_lost"]
        assert lost and shown["output"] in lost[-1]["error"], seen
    finally:
        proc.communicate(timeout=60)
    with host.mgmt() as c:
        assert wait_for(lambda: c.get("/api/v1/status").json()["session"] is None, 15)
        assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15)
    # nothing of the dead compositor is left: no Xwayland, no app
    assert wait_for(lambda: not compositor_processes(host.state_dir), 15), compositor_processes(
        host.state_dir
    )
    assert wait_for(lambda: app_pids(f"{x11_lib}/x11_app.py") == [], 15)
    # and the next session gets a fresh compositor
    r = stream(host, cfg, "Desktop", (10, 10), [(W // 2, H // 2)], seconds=3)
    assert close(r["samples_bgr"][0], BACKGROUND_BGR), r
    with host.mgmt() as c:
        assert c.post("/api/v1/display/release", json={}).status_code == 200


# -- attached wlr -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def operator_sway():
    comp = swaymod.SwayCompositor(run_as=NOBODY if os.geteuid() == 0 else None)
    comp.start()
    out = comp.outputs()[0]["name"]
    comp.configure_output(out, 1280, 720, 60)
    comp.focus_output(out)
    app = wl_app.WaylandApp(comp.wayland_socket)
    try:
        deadline = time.monotonic() + 30
        while app.size != (1280, 720) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.size == (1280, 720), app.size
        yield comp, app
    finally:
        app.close()
        comp.stop()


def test_capture_wlr_streams_the_operators_compositor(operator_sway):
    comp, app = operator_sway
    state = Path(tempfile.mkdtemp(prefix="wlr-e2e-"))
    (state / "host.conf").write_text("ping_timeout = 3000\ncapture = wlr\n")
    (state / "apps.json").write_text(json.dumps({"apps": [{"name": "Desktop"}]}))
    env = {"WAYLAND_DISPLAY": comp.wayland_socket, "DISPLAY": ""}
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state, env=env) as host:
        with host.mgmt() as c:
            methods = {m["id"]: m for m in c.get("/api/v1/capture/methods").json()}
        assert methods["wlr"]["available"] and methods["wlr"].get("selected"), methods
        cfg = state / "ml"
        cfg.mkdir()
        pair(host, cfg, pin="9753", name="Wlr")
        app.events.clear()
        r = stream(host, cfg, "Desktop", (W // 2, H // 2), QUAD_POINTS)
        print("attached wlr:", json.dumps(r))
        assert r["decoded"] > 30 and r["shape"] == [H, W, 3], r
        for got, want in zip(r["samples_bgr"], wl_app.QUADRANTS, strict=True):
            assert close(got, bgr(want)), (r["samples_bgr"], wl_app.QUADRANTS)
        assert ("key", 30, 1) in app.events, app.events[-20:]
        assert any(e[0] == "button" for e in app.events), app.events[-20:]
        with host.mgmt() as c:
            assert wait_for(lambda: c.get("/api/v1/display/state").json()["displays"] == [], 15)
    assert comp.alive()  # attached: never owned, never torn down
