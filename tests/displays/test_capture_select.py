"""Capture backend selection (displays/capture.py) and attached displays in the display
machine, in process, against real X servers: a test-owned "operator desktop" (an Xvfb the host
did not start) and display names with nothing behind them."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

from displays import capture, machine, reaper, xvfb
from tests.support.desktop import OperatorDesktop, dead_display
from tests.support.events import emitted

needs_xvfb = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb")


@pytest.fixture(scope="module")
def desktop():
    d = OperatorDesktop(1024, 768)
    yield d
    d.stop()


def conf(state, **values) -> None:
    (state / "host.conf").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))


# -- refused at write time ------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["kms", "nvfbc", "KMS"])
def test_unsupported_capture_values_are_refused_by_both_apis(v1, admin, state, value):
    r = v1.put("/api/v1/host/config", {"audio_video": {"capture_method": value}}, format="json")
    assert r.status_code == 400, r.content
    fields = {f["field"]: f["message"] for f in r.json()["fields"]}
    why = fields["audio_video.capture_method"]
    assert why.startswith("not supported on this host: "), why
    for name in ("capture", "capture_method"):
        r = admin.post("/api/config", {name: value}, format="json")
        assert r.status_code == 400 and "not supported on this host" in r.json()["error"], r.json()
        assert name in r.json()["error"]
    assert not (state / "host.conf").exists() or "kms" not in (state / "host.conf").read_text()


def test_capture_choices_and_garbage(admin, state):
    for value in ("auto", "x11", "wlr", "gnome", "kwin", "portal", "xvfb"):
        r = admin.post("/api/config", {"capture": value, "capture_method": value}, format="json")
        assert r.status_code == 200, r.content
    r = admin.post("/api/config", {"capture": "vnc"}, format="json")
    assert r.status_code == 400
    assert "must be one of auto, x11, wlr, gnome, kwin, portal, xvfb" in r.json()["error"]
    rule = admin.get("/api/config").json()
    assert rule["capture"] == "xvfb"


@pytest.mark.django_db
def test_console_shows_the_refusal_beside_the_key(state, redis_db):
    from django.test import Client

    from access import credentials

    credentials.set_credentials("admin", "s3cret")
    browser = Client()
    assert browser.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 302
    page = browser.get("/config").content.decode()
    assert "not supported on this host: kms, nvfbc" in page  # the rule, up front
    r = browser.post("/config", {"capture": "kms"})  # a crafted form: the select has no kms
    assert r.status_code == 400
    page = r.content.decode()
    row = page[page.index('data-key="capture"') :]
    row = row[: row.index("</div>")]
    assert 'class="field-error"' in row
    assert "not supported on this host: this build has no KMS" in row
    assert not (state / "host.conf").exists() or "capture" not in (state / "host.conf").read_text()


# -- selection ------------------------------------------------------------------------------------
@needs_xvfb
def test_auto_without_a_display_is_the_private_xvfb(state):
    sel = capture.select({})
    assert (sel.requested, sel.source, sel.backend, sel.error) == ("auto", "default", "xvfb", "")
    assert "DISPLAY" in sel.unusable["x11"] and "WAYLAND_DISPLAY" in sel.unusable["wlr"]
    assert "DBUS_SESSION_BUS_ADDRESS is not set" in sel.unusable["gnome"]
    assert sel.unusable["kms"].startswith("this build has no KMS")


@needs_xvfb
def test_auto_with_a_live_display_attaches_to_it(state, desktop):
    sel = capture.select({"DISPLAY": desktop.name})
    assert (sel.backend, sel.x_display, sel.error) == ("x11", desktop.name, "")
    assert sel.region == {"left": 0, "top": 0, "width": 1024, "height": 768}
    assert "x11" not in sel.unusable and "answers" in sel.reason


@needs_xvfb
def test_a_dead_display_falls_back_under_auto_and_fails_when_asked_for(state):
    dead = dead_display()
    sel = capture.select({"DISPLAY": dead})
    assert sel.backend == "xvfb" and not sel.error
    assert f"X display {dead} is not reachable" in sel.unusable["x11"]
    conf(state, capture="x11")
    sel = capture.select({"DISPLAY": dead})
    assert sel.error.startswith(f"capture = x11: DISPLAY X display {dead} is not reachable")
    with pytest.raises(capture.CaptureError) as err:
        capture.require({"DISPLAY": dead})
    assert err.value.status == 503
    sel = capture.select({"DISPLAY": "remote.example:0"})
    assert "not a local X display" in sel.error


@needs_xvfb
def test_output_name_names_the_display_and_the_monitor(state, desktop, monkeypatch):
    conf(state, output_name=desktop.name)
    sel = capture.select({})  # no DISPLAY at all: output_name is enough
    assert (sel.backend, sel.x_display) == ("x11", desktop.name)
    conf(state, output_name=dead_display())
    sel = capture.select({"DISPLAY": desktop.name})
    assert sel.backend == "x11" and "output_name X display" in sel.error  # named: no fallback
    # A name that is not a display names a monitor of DISPLAY; mss calls Xvfb's one "screen".
    conf(state, output_name="screen")
    assert capture.select({"DISPLAY": desktop.name}).region["width"] == 1024
    conf(state, output_name="HDMI-9")
    sel = capture.select({"DISPLAY": desktop.name})
    assert "no monitor named 'HDMI-9'" in sel.error and "screen" in sel.error
    conf(state)
    sel = capture.select({"DISPLAY": desktop.name, "HOST_CAPTURE_MONITOR": "DP-4"})
    assert "no monitor named 'DP-4'" in sel.error


@needs_xvfb
def test_wlr_is_probed_truthfully_and_refused_at_session_start(state, tmp_path):
    from tests.media.test_wayland import FakeCompositor

    assert "not set" in capture.probe_wlr({})[1]
    ok, why = capture.probe_wlr({"WAYLAND_DISPLAY": "wayland-9", "XDG_RUNTIME_DIR": str(tmp_path)})
    assert not ok and "no compositor answers" in why
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(tmp_path / "wayland-1"))
    live.listen(64)  # never accepted: the probe only needs the connect to succeed
    try:
        env = {"WAYLAND_DISPLAY": "wayland-1", "XDG_RUNTIME_DIR": str(tmp_path)}
        ok, why = capture.probe_wlr(env)
        assert not ok and "did not answer its registry" in why  # accepts, never answers
        conf(state, capture="wlr")
        sel = capture.select(env)
        assert sel.backend == "wlr" and "did not answer its registry" in sel.error
    finally:
        live.close()
    # A Wayland compositor that answers but is not wlroots (no screencopy): refused, saying so.
    fake = FakeCompositor(str(tmp_path / "wayland-2"))
    try:
        env = {"WAYLAND_DISPLAY": "wayland-2", "XDG_RUNTIME_DIR": str(tmp_path)}
        assert capture.wlr_screencopy_advertised(str(tmp_path / "wayland-2")) is False
        sel = capture.select(env)
        assert sel.backend == "wlr" and "does not offer zwlr_screencopy_manager_v1" in sel.error
        wlr = next(m for m in capture.methods(env) if m["id"] == "wlr")
        assert wlr["available"] is False and "zwlr_screencopy_manager_v1" in wlr["reason"]
        conf(state, capture="auto")
        assert capture.select(env).backend != "wlr"  # auto passes over it
    finally:
        fake.close()


@needs_xvfb
def test_the_two_names_of_the_setting_must_agree(state, monkeypatch):
    conf(state, capture="xvfb", capture_method="x11")
    sel = capture.select({})
    assert "capture = xvfb, capture_method = x11 disagree" in sel.error
    conf(state, capture="xvfb", capture_method="xvfb")
    assert capture.select({}).backend == "xvfb" and not capture.select({}).error
    conf(state, capture="kms")  # a hand edit the APIs would refuse
    assert "not supported on this host" in capture.select({}).error
    conf(state)
    sel = capture.select({"HOST_CAPTURE_METHOD": "x11"})
    assert sel.source == "HOST_CAPTURE_METHOD" and sel.error.startswith("capture = x11")


# -- the routes -----------------------------------------------------------------------------------
@needs_xvfb
def test_methods_and_preflight_say_which_backend_and_why(v1, state, desktop, monkeypatch):
    monkeypatch.setenv("DISPLAY", desktop.name)
    methods = {m["id"]: m for m in v1.get("/api/v1/capture/methods").json()}
    assert methods["auto"]["resolves_to"] == "x11" and methods["x11"]["selected"] is True
    assert methods["xvfb"]["available"] is True and "selected" not in methods["xvfb"]
    for mid in ("portal", "kwin", "kms", "nvfbc", "wlr", "gnome"):
        assert methods[mid]["available"] is False and methods[mid]["reason"], mid
    checks = {c["id"]: c for c in v1.get("/api/v1/diagnostics/preflight").json()["checks"]}
    cap = checks["capture-backends"]
    assert cap["status"] == "pass" and cap["backend"] == "x11", cap
    assert cap["detail"].startswith(f"using x11 on {desktop.name}: capture = auto")
    assert "wlr: WAYLAND_DISPLAY is not set" in cap["detail"]

    conf(state, capture="x11")
    monkeypatch.setenv("DISPLAY", dead_display())
    checks = {c["id"]: c for c in v1.get("/api/v1/diagnostics/preflight").json()["checks"]}
    cap = checks["capture-backends"]
    assert cap["status"] == "fail" and "capture = x11" in cap["detail"] and cap["remediation"]
    methods = {m["id"]: m for m in v1.get("/api/v1/capture/methods").json()}
    assert methods["x11"]["available"] is False and "not reachable" in methods["x11"]["reason"]
    assert methods["auto"] == {"id": "auto", "label": "Automatic", "available": True,
                               "resolves_to": "xvfb"}  # fmt: skip


# -- the display machine --------------------------------------------------------------------------
@needs_xvfb
@pytest.mark.django_db(transaction=True)
def test_an_attached_display_is_shared_never_owned_and_never_killed(
    v1, state, desktop, monkeypatch, redis_db
):
    monkeypatch.setenv("DISPLAY", desktop.name)
    v1.put("/api/v1/display/settings", {"preset": "custom", "keep_alive": {"mode": "forever"}},
           format="json")  # fmt: skip
    created = len(emitted("display.created"))
    a = machine.acquire("alice", "1280x720@60")
    assert (a["backend"], a["owned"], a["pid"]) == ("x11", False, None)
    assert a["x_display"] == desktop.name
    assert a["region"] == {"left": 0, "top": 0, "width": 1024, "height": 768}
    assert a["running"] and a["mode"] == "1024x768@60" and a["state"] == "active"
    assert emitted("display.created")[-1]["owned"] is False
    b = machine.acquire("bob", "640x480@30")  # another client, another mode: the same desktop
    assert b["slot"] == a["slot"] and b["sessions"] == 2
    assert len(emitted("display.created")) == created + 1
    assert xvfb.owned_pids() == []  # nothing was started
    assert machine.disconnect(a["slot"])["sessions"] == 1
    assert machine.release() == 0  # release never touches it
    reaper.on_host_stop()  # the host stops: the row goes, the server stays
    assert machine.state()["displays"] == [] and desktop.alive()
    machine.acquire("alice", "1280x720@60")
    assert machine.disconnect(machine.state()["displays"][0]["slot"]) is None  # keep_alive: n/a
    assert machine.state()["displays"] == [] and desktop.alive()
    capture.grab(desktop.name)  # and it still answers


@needs_xvfb
@pytest.mark.django_db(transaction=True)
def test_a_display_that_points_at_nothing_is_a_503_and_leaks_nothing(v1, state, monkeypatch):
    conf(state, capture="x11")
    dead = dead_display()
    monkeypatch.setenv("DISPLAY", dead)
    before = set(os.listdir("/proc"))
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("alice", "1280x720@60")
    assert err.value.status == 503 and dead in err.value.message
    assert machine.state()["displays"] == [] and xvfb.owned_pids() == []
    new = set(os.listdir("/proc")) - before
    assert not [p for p in new if p.isdigit() and xvfb.is_ours(int(p))]
    conf(state, capture="wlr")
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("alice", "1280x720@60")
    assert "WAYLAND_DISPLAY is not set" in err.value.message
