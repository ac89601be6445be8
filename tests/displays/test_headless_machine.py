"""headless_mode: the display machine on outputs of the host's shared headless sway (real sway,
run as `nobody` through HOST_COMPOSITOR_USER when the tests run as root), and the settings that
choose it: refused where this build cannot do them, with the reason."""

from __future__ import annotations

import os
import time

import pytest

from common import procs
from displays import capture, headless, machine, sway
from media.framesource import WaylandCapture

pytestmark = pytest.mark.django_db
needs_sway = pytest.mark.skipif(not sway.available(), reason="sway is not installed")


def conf(state, **values) -> None:
    (state / "host.conf").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))


@pytest.fixture
def host_user(monkeypatch):
    if os.geteuid() == 0:
        monkeypatch.setenv(headless.USER_ENV, "nobody")


# -- settings ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "why"),
    [("labwc", "only sway"), ("gamescope", "only sway"), ("krfb", "VNC server")],
)
def test_compositor_backends_this_build_cannot_run_are_refused_with_the_reason(
    admin, state, value, why
):
    r = admin.post("/api/config", {"compositor_backend": value}, format="json")
    assert r.status_code == 400, r.content
    error = r.json()["error"]
    assert "compositor_backend" in error and "not supported on this host" in error and why in error
    assert not (state / "host.conf").exists() or value not in (state / "host.conf").read_text()


def test_cage_is_refused_and_sway_is_a_compositor_backend(admin, state):
    r = admin.post("/api/config", {"linux_use_cage_compositor": True}, format="json")
    assert r.status_code == 400 and "cage" in r.json()["error"], r.content
    conf_file = state / "host.conf"
    assert not conf_file.exists() or "cage" not in conf_file.read_text()
    r = admin.post("/api/config", {"linux_use_cage_compositor": False}, format="json")
    assert r.status_code == 200, r.content
    r = admin.post("/api/config", {"compositor_backend": "labwc"}, format="json")
    assert r.status_code == 400 and "only sway" in r.json()["error"], r.content
    if sway.available():
        r = admin.post("/api/config", {"compositor_backend": "sway"}, format="json")
        assert r.status_code == 200, r.content


def test_headless_mode_contradicting_capture_is_refused(state, host_user):
    conf(state, headless_mode="true", capture="x11")
    sel = capture.select({})
    assert sel.backend == "headless" and "capture = x11" in sel.error
    conf(state, headless_mode="true", capture="xvfb")
    assert "headless_mode" in capture.select({}).error


def test_root_without_a_compositor_user_is_refused_with_sways_reason(state, monkeypatch):
    monkeypatch.delenv(headless.USER_ENV, raising=False)
    monkeypatch.setattr(headless.os, "geteuid", lambda: 0)
    conf(state, headless_mode="true")
    sel = capture.select({})
    assert sway.ROOT_REFUSAL in sel.error and headless.USER_ENV in sel.error
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("alice", "1280x720@60")
    assert err.value.status == 503 and sway.ROOT_REFUSAL in err.value.message
    monkeypatch.setenv(headless.USER_ENV, "root")
    assert sway.ROOT_REFUSAL in capture.select({}).error
    monkeypatch.setenv(headless.USER_ENV, "no-such-user-here")
    assert "no such user" in capture.select({}).error


@needs_sway
@pytest.mark.slow
def test_the_native_plane_gets_an_output_of_the_headless_compositor_too(state, host_user):
    """Native sessions get an output of the headless compositor as compat sessions do (no
    503), and its capture (the encoder child's frame source) works."""
    from streaming import session_display

    conf(state, headless_mode="true")
    try:
        d = machine.acquire("alice", "1280x720@60", plane="native")
        assert (d["backend"], d["owned"], d["mode"]) == ("sway", True, "1280x720@60")
        assert d["output"] and d["wayland_display"] and session_display.is_wayland(d)
        cap = session_display.open_capture(d)
        try:
            assert isinstance(cap, WaylandCapture)
            frame = cap(1280, 720)
        finally:
            cap.close()
        assert [int(v) for v in frame[360, 640, :3]] == [0x77, 0x55, 0x28]  # #285577
        assert session_display.compositor_gone(d) == ""
        machine.disconnect(d["slot"], deliberate=True)
        assert not headless.output_alive(d["output"])
    finally:
        headless.stop()


# -- the machine on a real headless sway -------------------------------------------------------
@needs_sway
@pytest.mark.slow
def test_displays_are_outputs_at_the_client_mode_placed_and_retired(state, host_user):
    conf(state, headless_mode="true")
    try:
        a = machine.acquire("alice", "1280x720@60")
        b = machine.acquire("bob", "800x600@30")
        assert (a["backend"], a["owned"], a["mode"]) == ("sway", True, "1280x720@60")
        assert a["output"] and b["output"] and a["output"] != b["output"]
        assert a["running"] and b["running"]
        comp = headless.current()
        try:
            outs = {o["name"]: o for o in comp.outputs()}
            # the output repaints a little faster than the stream's 60 (sway.repaint_rate)
            assert outs[a["output"]]["current_mode"] == {"width": 1280, "height": 720,
                                                          "refresh": 71000}  # fmt: skip
            assert outs[b["output"]]["current_mode"]["width"] == 800
            # placed per the layout: a row, left to right, apart (default topology: exclusive)
            assert outs[a["output"]]["rect"]["x"] == a["x"] == 0
            assert outs[b["output"]]["rect"]["x"] == b["x"] == 1280 + sway.PARK_GAP
        finally:
            comp.detach()
        # /display/monitors lists both outputs as the host's own (managed)
        from displays import monitors

        listed = monitors.monitors(sysfs="/nonexistent", display="", wayland="", pin="")
        managed = {m["connector"]: m for m in listed["monitors"] if m["managed"]}
        assert managed[a["output"]]["mode"] == "1280x720"
        assert managed[b["output"]]["x"] == 1280 + sway.PARK_GAP
        # the desktop is the compositor's background, not black
        cap = WaylandCapture(a["wayland_display"], a["output"])
        frame = cap(1280, 720)
        cap.close()
        assert frame.shape == (720, 1280, 4) and int(frame[:, :, :3].max()) > 0
        b_g_r = [int(v) for v in frame[360, 640, :3]]
        assert b_g_r == [0x77, 0x55, 0x28], b_g_r  # DEFAULT_BACKGROUND #285577
        # a deliberate stop: its output is retired at once, the other stays
        assert machine.disconnect(b["slot"], deliberate=True) is None
        assert not headless.output_alive(b["output"])
        assert headless.output_alive(a["output"])
        # a retired output is re-used by the next display, at the new mode
        c = machine.acquire("carol", "1024x768@60")
        assert c["output"] == b["output"] and c["running"]
        # the client left (not deliberate): the output lingers per keep_alive, release ends it
        kept = machine.disconnect(c["slot"])
        assert kept["state"] == "lingering" and headless.output_alive(c["output"])
        assert machine.release(c["slot"]) == 1 and not headless.output_alive(c["output"])
        machine.disconnect(a["slot"], deliberate=True)
        assert machine.state()["displays"] == []
        st = headless.status()
        assert st["running"] and st["outputs"] == []
    finally:
        pid = (headless._read() or {}).get("pid")
        headless.stop()
    assert headless.current() is None
    assert sway.owned_pids(headless.owner() + ":", prefix=True) == []
    assert pid is None or not procs.alive(pid)


@needs_sway
def test_topology_places_outputs_apart_side_by_side_or_focused(v1, state, host_user):
    """exclusive (and auto): an output nothing crosses into; extend: one desktop with its
    neighbour; primary: extend, and the new output is the focused one."""
    conf(state, headless_mode="true")

    def policy(topology):
        r = v1.put("/api/v1/display/settings", {"preset": "custom", "topology": topology},
                   format="json")  # fmt: skip
        assert r.status_code == 200, r.content

    try:
        policy("auto")
        a = machine.acquire("alice", "1280x720@60")
        b = machine.acquire("bob", "800x600@60")
        assert (a["topology"], b["topology"]) == ("exclusive", "exclusive")
        policy("extend")
        c = machine.acquire("carol", "640x480@60")
        policy("primary")
        d = machine.acquire("dave", "640x480@60")
        comp = headless.current()
        try:
            rect = {o["name"]: o["rect"] for o in comp.outputs()}
            focused = [o["name"] for o in comp.outputs() if o.get("focused")]
        finally:
            comp.detach()
        gap = sway.PARK_GAP
        assert rect[a["output"]]["x"] == 0
        assert rect[b["output"]]["x"] == 1280 + gap  # exclusive: apart
        assert rect[c["output"]]["x"] == 1280 + gap + 800 + gap  # next to an exclusive one
        assert rect[d["output"]]["x"] == rect[c["output"]]["x"] + 640  # extend: touching
        assert (c["topology"], d["topology"]) == ("extend", "primary")
        assert focused == [d["output"]]
    finally:
        headless.stop()


@needs_sway
@pytest.mark.slow
def test_a_dead_compositor_is_noticed_and_a_new_one_started(state, host_user):
    conf(state, headless_mode="true")
    try:
        a = machine.acquire("alice", "640x480@60")
        record = headless._read()
        os.kill(record["pid"], 9)
        deadline = time.monotonic() + 15
        while procs.alive(record["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        cap = WaylandCapture(a["wayland_display"], a["output"])
        cap(640, 480)
        cap.failing_since -= 10  # as if it had kept failing for 10 s
        assert cap.lost() and "stopped" not in cap.what
        cap.close()
        assert machine.state()["displays"][0]["running"] is False
        machine.disconnect(a["slot"], deliberate=True)  # gone with its compositor: a no-op
        b = machine.acquire("bob", "640x480@60")  # a fresh compositor, swept the old one's
        assert b["running"] and headless._read()["pid"] != record["pid"]
        assert sway.owned_pids(record["token"]) == []
        machine.disconnect(b["slot"], deliberate=True)
    finally:
        headless.stop()
    assert sway.owned_pids(headless.owner() + ":", prefix=True) == []


# -- capture = wlr: the operator's compositor ---------------------------------------------------
@pytest.fixture(scope="module")
def operator_sway():
    comp = sway.SwayCompositor(run_as=(65534, 65534) if os.geteuid() == 0 else None)
    comp.start()
    yield comp
    comp.stop()


@needs_sway
@pytest.mark.slow
def test_capture_wlr_attaches_to_the_named_or_first_output_and_refuses_a_missing_one(
    state, operator_sway
):
    env = {"WAYLAND_DISPLAY": operator_sway.wayland_socket}
    first = operator_sway.outputs()[0]["name"]
    assert capture.wlr_screencopy_advertised(operator_sway.wayland_socket) is True
    conf(state, capture="wlr")
    sel = capture.select(env)
    assert (sel.backend, sel.error, sel.output) == ("wlr", "", first)
    conf(state, capture="auto")
    assert capture.select(env).backend == "wlr"  # a wlroots session is preferred before x11
    conf(state, capture="wlr", output_name="DP-9")
    sel = capture.select(env)
    assert "no output named 'DP-9'" in sel.error and first in sel.error
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("alice", "1280x720@60", plane="compat")
    assert err.value.status == 503  # the host's own env has no WAYLAND_DISPLAY here
    conf(state, capture="wlr", output_name=first)
    assert capture.select(env).output == first
    wlr = next(m for m in capture.methods(env) if m["id"] == "wlr")
    assert wlr["available"] and wlr.get("selected"), wlr


@needs_sway
@pytest.mark.slow
def test_an_attached_wlr_output_is_never_owned_or_torn_down(state, operator_sway, monkeypatch):
    monkeypatch.setenv("WAYLAND_DISPLAY", operator_sway.wayland_socket)
    conf(state, capture="wlr")
    a = machine.acquire("alice", "1280x720@60")
    b = machine.acquire("bob", "800x600@60")
    assert a["slot"] == b["slot"] and b["sessions"] == 2  # one row, shared
    assert (a["backend"], a["owned"], a["pid"]) == ("wlr", False, None)
    assert a["output"] == operator_sway.outputs()[0]["name"] and a["running"]
    assert machine.disconnect(a["slot"])["sessions"] == 1
    assert machine.disconnect(a["slot"]) is None
    assert machine.state()["displays"] == [] and operator_sway.alive()
    assert operator_sway.output(a["output"])["active"]  # left exactly as it was


@needs_sway
@pytest.mark.slow
def test_headless_defaults_fill_the_mode_a_request_leaves_out(state, host_user):
    conf(state, headless_mode="true", headless_width="1024", headless_height="768",
         headless_refresh="30")  # fmt: skip
    try:
        a = machine.acquire("alice", "")
        assert a["mode"] == "1024x768@30" and a["running"]
        b = machine.acquire("bob", "800x600")
        assert b["mode"] == "800x600@30"
        c = machine.acquire("carol", "640x480@60")
        assert c["mode"] == "640x480@60"  # the client's own mode wins
    finally:
        headless.stop()
    conf(state, headless_mode="true")
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("dave", "")
    assert err.value.status == 400 and "headless_width" in err.value.message


@needs_sway
@pytest.mark.slow
def test_host_stop_leaves_no_compositor_and_host_start_restores_kept_outputs(state, host_user):
    from displays import reaper
    from displays.models import VirtualDisplay

    conf(state, headless_mode="true")
    try:
        a = machine.acquire("alice", "800x600@60")
        b = machine.acquire("bob", "640x480@60")
        VirtualDisplay.objects.filter(slot=a["slot"]).update(
            policy={**VirtualDisplay.objects.get(slot=a["slot"]).policy,
                    "keep_alive": {"mode": "forever"}})  # fmt: skip
        VirtualDisplay.objects.filter(slot=b["slot"]).update(
            policy={**VirtualDisplay.objects.get(slot=b["slot"]).policy,
                    "keep_alive": {"mode": "off"}})  # fmt: skip
        old = headless._read()
        reaper.on_host_stop()
        assert headless._read() is None and not procs.alive(old["pid"])
        assert sway.owned_pids(headless.owner() + ":", prefix=True) == []
        (kept,) = machine.state()["displays"]  # bob's went (keep_alive off)
        assert kept["state"] == "pinned" and kept["running"] is False
        reaper.on_host_start()
        (kept,) = machine.state()["displays"]
        assert kept["running"] and kept["output"] and kept["mode"] == "800x600@60"
        assert headless._read()["pid"] != old["pid"]
        assert machine.release() == 1 and not headless.output_alive(kept["output"])
    finally:
        headless.stop()
    assert sway.owned_pids(headless.owner() + ":", prefix=True) == []


def test_preflight_says_which_backend_and_why_the_headless_compositor_cannot_run(
    state, monkeypatch
):
    from streaming import preflight

    monkeypatch.delenv(headless.USER_ENV, raising=False)
    monkeypatch.setattr(headless.os, "geteuid", lambda: 0)
    conf(state, headless_mode="true")
    checks = {c["id"]: c for c in preflight.capture()}
    cap, comp = checks["capture-backends"], checks["headless-compositor"]
    assert cap["status"] == "fail" and cap["backend"] == "headless", cap
    assert comp["status"] == "fail" and sway.ROOT_REFUSAL in comp["detail"], comp
    assert "HOST_COMPOSITOR_USER" in comp["remediation"]
    conf(state, headless_mode="false")
    assert {c["id"]: c for c in preflight.capture()}["headless-compositor"]["status"] == "warn"
    if sway.available():
        monkeypatch.setenv(headless.USER_ENV, "nobody")
        conf(state, headless_mode="true")
        checks = {c["id"]: c for c in preflight.capture()}
        assert checks["capture-backends"]["status"] == "pass", checks["capture-backends"]
        comp = checks["headless-compositor"]
        assert comp["status"] == "pass" and "starts as nobody" in comp["detail"], comp


def test_repaint_rate_leaves_the_compositor_room_to_render_each_frame():
    """wlroots' headless timer waits `1000 // Hz` ms after each commit: the asked rate must
    make that wait two milliseconds shorter than the stream's frame interval."""
    for fps in (30, 60, 90, 120, 144, 240):
        hz = sway.repaint_rate(fps)
        assert hz >= fps
        assert 1000 // hz <= 1000 / fps - 2, (fps, hz)
        assert 1000 // hz >= 1000 // fps - 3, (fps, hz)  # not needlessly fast
