"""Attached X11 capture, end to end: a test-owned "operator desktop" (an Xvfb the
host did not start, 1600x900, with windows of known colours), and a host started with DISPLAY
pointing at it and `capture = x11`. A real Moonlight client (moonlight-python) streams Desktop
at 1280x720@60: it must decode that desktop, scaled, with the colours where they were drawn;
its mouse, keyboard and click must reach that display; apps run on it; after every session the
operator's server is still alive and the host owns no X server. A DISPLAY that points at
nothing is refused at launch with the reason, in the /launch answer and in session.ended."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import events, owned_processes, pair, probe_apps, wait_for
from tests.support import desktop as od
from tests.support.livehost import ROOT, running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLIENT = str(ROOT / "tests/support/attached_client.py")
KEYS = "rikey=000102030405060708090a0b0c0d0e0f&rikeyid=7&localAudioPlayMode=0"
W, H, FPS = 1280, 720, 60
SX, SY = W / od.WIDTH, H / od.HEIGHT  # desktop -> client pixels (0.8 both ways)
CONF = "ping_timeout = 3000\ncapture = x11\n"


def to_client(x: float, y: float) -> tuple[int, int]:
    return int(x * SX), int(y * SY)


def centre(box) -> tuple[float, float]:
    x, y, w, h = box
    return x + w / 2, y + h / 2


def bgr(rgb) -> list[int]:
    return list(reversed(rgb))


def close(got, want, tol=20) -> bool:
    return max(abs(a - b) for a, b in zip(got, want, strict=True)) <= tol


@pytest.fixture(scope="module")
def desktop():
    d = od.OperatorDesktop()
    d.draw()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def attached_host(desktop):
    state = Path(tempfile.mkdtemp(prefix="attached-e2e-"))
    marks = state / "marks"
    marks.mkdir()
    (state / "host.conf").write_text(CONF)
    (state / "apps.json").write_text(json.dumps(probe_apps(marks)))
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state,
                      env={"DISPLAY": desktop.name}) as host:  # fmt: skip
        host.marks = marks
        yield host


@pytest.fixture(scope="module")
def ml(attached_host, tmp_path_factory):
    cfg = tmp_path_factory.mktemp("ml")
    return cfg, pair(attached_host, cfg, pin="8642", name="Operator")


def status_of(xml: str) -> int:
    return int(re.search(r'status_code="(\d+)"', xml).group(1))


def test_desktop_streams_the_operator_desktop_with_input_and_leaves_it_running(
    attached_host, ml, desktop
):
    host, (cfg, _) = attached_host, ml
    with host.mgmt() as c:
        methods = {m["id"]: m for m in c.get("/api/v1/capture/methods").json()}
        checks = {x["id"]: x for x in c.get("/api/v1/diagnostics/preflight").json()["checks"]}
    assert methods["x11"]["available"] and methods["x11"].get("selected"), methods
    assert checks["capture-backends"]["backend"] == "x11", checks["capture-backends"]
    assert desktop.name in checks["capture-backends"]["detail"]

    green, blue = centre(od.GREEN_BOX), centre(od.BLUE_BOX)
    move = to_client(*green)
    samples = [to_client(*green), to_client(*blue), to_client(100, 60)]
    desktop.events.clear()
    args = [sys.executable, CLIENT, str(host.base_port), str(cfg), str(W), str(H), str(FPS), "5",
            str(move[0]), str(move[1]), *(f"{x},{y}" for x, y in samples)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip

    def live_display():
        with host.mgmt() as c:
            shown = c.get("/api/v1/display/state").json()["displays"]
        return shown or None

    shown = wait_for(live_display, timeout=40)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    r = json.loads(out.strip().splitlines()[-1])
    print("attached:", json.dumps(r), "display:", json.dumps(shown))

    # The session ran on the operator's display, recorded as not owned, captured whole.
    assert shown and len(shown) == 1, shown
    (d,) = shown
    assert (d["backend"], d["owned"], d["x_display"], d["pid"]) == (
        "x11", False, desktop.name, None)  # fmt: skip
    assert d["region"] == {"left": 0, "top": 0, "width": od.WIDTH, "height": od.HEIGHT}
    # What the client decoded is that desktop, scaled from 1600x900 to 1280x720.
    assert r["decoded"] > 30 and r["shape"] == [H, W, 3], r
    got_green, got_blue, got_bg = r["samples_bgr"]
    assert close(got_green, bgr(od.GREEN_RGB)), r
    assert close(got_blue, bgr(od.BLUE_RGB)), r
    assert close(got_bg, bgr(od.BACKGROUND_RGB)), r
    assert r["serverinfo_after"] == 0

    # Input reached the operator's display, at the desktop position of the client's pixel.
    from Xlib import X

    want = (int(move[0] * od.WIDTH // W), int(move[1] * od.HEIGHT // H))
    kc_a = desktop.keycode("a")
    seen = list(desktop.events)
    assert (X.MotionNotify, 0, *want) in seen, seen[-20:]
    assert any(e[0] == X.KeyPress and e[1] == kc_a for e in seen), seen[-20:]
    assert any(e[0] == X.KeyRelease and e[1] == kc_a for e in seen), seen[-20:]
    assert any(e[0] == X.ButtonPress and e[1] == 1 for e in seen), seen[-20:]

    # Events: the attached display, never a started one; the session ended normally.
    seen = events(host, "display.*,session.*",
                  lambda ev: any(e["kind"] == "session.ended" for e in ev))  # fmt: skip
    created = [e for e in seen if e["kind"] == "display.created"]
    assert created and all(e["backend"] == "x11" and e["owned"] is False for e in created)
    assert any(e["kind"] == "session.ended" for e in seen)

    # Afterwards: the operator's server lives, no row is kept, the host started no X server.
    assert desktop.alive()
    with host.mgmt() as c:
        assert c.get("/api/v1/display/state").json()["displays"] == []
    assert wait_for(lambda: not owned_processes(host.state_dir), 10), owned_processes(
        host.state_dir
    )
    from displays.capture import grab

    assert grab(desktop.name).size == (od.WIDTH, od.HEIGHT)  # and it still answers


def test_apps_run_on_the_operator_display(attached_host, ml, desktop):
    host, (_, client) = attached_host, ml
    probe = next(a.id for a in client.apps() if a.name == "Probe")
    env_file = host.marks / "app-env.json"
    env_file.unlink(missing_ok=True)
    xml = client.https("launch", f"appid={probe}&mode=1280x720x60&{KEYS}")
    assert status_of(xml) == 200, xml
    try:
        assert wait_for(env_file.exists, 15)
        env = json.loads(wait_for(lambda: env_file.read_text() or None, 5))
        assert env["DISPLAY"] == desktop.name
        assert "WAYLAND_DISPLAY" not in env
    finally:
        with host.mgmt() as c:
            assert c.delete("/api/v1/session").status_code == 204
    assert wait_for(lambda: not owned_processes(host.state_dir), 10)
    assert desktop.alive()


def test_a_display_that_points_at_nothing_is_refused_with_the_reason(attached_host, ml, desktop):
    host, (_, client) = attached_host, ml
    dead = od.dead_display()
    conf = host.state_dir / "host.conf"
    conf.write_text(CONF + f"output_name = {dead}\n")  # read at each launch
    try:
        with host.mgmt() as c:
            x11 = next(m for m in c.get("/api/v1/capture/methods").json() if m["id"] == "x11")
        assert x11["available"] is False and dead in x11["reason"]
        app = next(a.id for a in client.apps() if a.name == "Desktop")
        xml = client.https("launch", f"appid={app}&mode=1280x720x60&{KEYS}")
        assert status_of(xml) == 503, xml
        assert "capture = x11" in xml and dead in xml and "not reachable" in xml, xml
        seen = events(
            host,
            "session.*",
            lambda ev: any(
                e["kind"] == "session.ended" and e.get("reason") == "launch_failed" for e in ev
            ),
        )
        failed = [e for e in seen if e["kind"] == "session.ended"
                  and e.get("reason") == "launch_failed"]  # fmt: skip
        assert failed and dead in failed[-1]["error"], seen
        with host.mgmt() as c:
            assert c.get("/api/v1/display/state").json()["displays"] == []
            assert c.get("/api/v1/status").json()["session"] is None
        assert owned_processes(host.state_dir) == []
        assert desktop.alive()
    finally:
        conf.write_text(CONF)


def test_a_desktop_that_goes_away_mid_session_ends_it_with_the_reason(attached_host, ml):
    host, (cfg, _) = attached_host, ml
    gone = od.OperatorDesktop(800, 600)  # a second desktop, only for this session
    conf = host.state_dir / "host.conf"
    conf.write_text(CONF + f"output_name = {gone.name}\n")
    try:
        args = [sys.executable, CLIENT, str(host.base_port), str(cfg), "640", "360", "30", "12",
                "10", "10"]  # fmt: skip
        proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip

        def streaming():
            with host.mgmt() as c:
                return c.get("/api/v1/status").json()["video_streaming"]

        assert wait_for(streaming, timeout=40), "the session never streamed"
        gone.stop()  # the operator logs out: the X server goes away under the session
        seen = events(host, "session.*", lambda ev: any(
            e["kind"] == "session.ended" and e.get("reason") == "display_lost" for e in ev),
            timeout=30)  # fmt: skip
        lost = [e for e in seen if e.get("reason") == "display_lost"]
        assert lost and gone.name in lost[-1]["error"], seen
        proc.communicate(timeout=60)  # the client learns of it; how it reports that is its own
        with host.mgmt() as c:
            assert c.get("/api/v1/display/state").json()["displays"] == []
            assert c.get("/api/v1/status").json()["session"] is None
        assert owned_processes(host.state_dir) == []
    finally:
        gone.stop()
        conf.write_text(CONF)
