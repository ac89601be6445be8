"""The `portal` capture method against real portals (tests/support/portal.py): selection under
`capture = portal` and `auto`, the reasons when the portal is absent, what the display machine
records, what /capture/methods and preflight say about consent, and what a session opens
(streaming/session_display: PortalCapture, and input through the compositor's wlroots
virtual devices when it has them)."""

from __future__ import annotations

import subprocess

import pytest

from displays import capture, machine
from media.portal import screencast as pc
from tests.support.portal import missing_gnome_tools, missing_tools, running_portal

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def sdesk():
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_portal("1280x720") as desk:
        yield desk


@pytest.fixture(scope="module")
def mutter():
    """A live Wayland compositor that is no wlroots one (no screencopy, no virtual pointer),
    as KDE's is to the host: headless mutter, whose bus the tests do not use."""
    from tests.support.gnome import running_gnome

    if missing_gnome_tools():
        pytest.skip("GNOME tools missing (scripts/system-deps.sh installs them)")
    with running_gnome("640x480") as desk:
        yield desk


def conf(state, **values) -> None:
    (state / "host.conf").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))


def sway_env(desk) -> dict:
    return {"DBUS_SESSION_BUS_ADDRESS": desk.bus_address, "XDG_RUNTIME_DIR": str(desk.runtime_dir),
            "WAYLAND_DISPLAY": desk.sway.wayland_socket}  # fmt: skip


def kde_like_env(desk, compositor) -> dict:
    """The portal's bus, and a Wayland session whose compositor has neither wlroots
    screencopy nor mutter's ScreenCast: only the portal can capture it."""
    return {"DBUS_SESSION_BUS_ADDRESS": desk.bus_address,
            "XDG_RUNTIME_DIR": str(compositor.runtime_dir),
            "WAYLAND_DISPLAY": compositor.wayland_display}  # fmt: skip


def test_capture_portal_is_selected_with_the_compositors_input(state, sdesk):
    conf(state, capture="portal")
    sel = capture.select(sway_env(sdesk))
    assert (sel.backend, sel.error) == ("portal", "")
    assert sel.reason == "capture = portal (ScreenCast version 4)"
    assert sel.wayland_socket == sdesk.sway.wayland_socket  # sway has the virtual pointer
    assert "portal" not in sel.unusable


def test_auto_prefers_wlr_and_takes_the_portal_only_when_nothing_else_answers(state, sdesk, mutter):
    sel = capture.select(sway_env(sdesk))
    assert sel.backend == "wlr" and "portal" not in sel.unusable  # screencopy needs no consent
    env = kde_like_env(sdesk, mutter)
    sel = capture.select(env)
    assert (sel.backend, sel.error) == ("portal", ""), (sel.reason, sel.unusable)
    assert sel.reason.startswith(
        "capture = auto, neither wlroots screencopy, KWin nor mutter answers"
    )
    assert "screencopy" in sel.unusable["wlr"] and "Mutter" in sel.unusable["gnome"]
    assert sel.wayland_socket == ""  # mutter has no wlroots virtual pointer: no input there
    methods = {m["id"]: m for m in capture.methods(env)}
    assert methods["auto"]["resolves_to"] == "portal" and methods["portal"]["selected"]
    # Not a Wayland session (X11): the portal is not auto's pick, the X grab needs no consent.
    env.pop("WAYLAND_DISPLAY")
    assert capture.select(env).backend != "portal"


def test_no_portal_says_why(state, tmp_path):
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"],
                           stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        env = {"DBUS_SESSION_BUS_ADDRESS": bus.stdout.readline().decode().strip()}
        conf(state, capture="portal")
        sel = capture.select(env)
        assert sel.backend == "portal" and sel.error.startswith(
            "capture = portal: org.freedesktop.portal.Desktop is not running on the session bus"
        )
        with pytest.raises(capture.CaptureError):
            capture.require(env)
    finally:
        bus.terminate()
        bus.wait(5)
        bus.stdout.close()
    assert capture.select({}).unusable["portal"].startswith("DBUS_SESSION_BUS_ADDRESS is not set")
    conf(state, capture="portal", headless_mode="true")
    assert "headless_mode = true" in capture.select({}).error


def test_methods_and_preflight_say_whether_consent_is_kept_and_how_to_give_it(
    v1, state, sdesk, monkeypatch
):
    for k, v in sway_env(sdesk).items():
        monkeypatch.setenv(k, v)
    conf(state, capture="portal")

    def looks():
        methods = {m["id"]: m for m in v1.get("/api/v1/capture/methods").json()}
        checks = v1.get("/api/v1/diagnostics/preflight").json()["checks"]
        return methods["portal"], {c["id"]: c for c in checks}["capture-backends"]

    portal, check = looks()
    assert portal["available"] and portal["selected"] and portal["consent"]["kept"] is False
    assert portal["consent"]["state"] == "none"
    assert portal["consent"]["detail"].startswith("no consent is kept yet")
    assert check["status"] == "warn" and check["backend"] == "portal"
    assert "portal consent: no consent is kept yet" in check["detail"]
    assert "allow screen sharing" in check["remediation"]

    pc.save_state(outcome="refused", detail="refused")
    portal, check = looks()
    assert portal["consent"]["state"] == "refused" and check["status"] == "warn"
    assert "the last screen-sharing request was refused at the desktop" in check["detail"]

    pc.save_state(restore_token="0b6f3a4e-8a4f-4d5e-9c1d-2f3a4b5c6d7e", outcome="granted")
    portal, check = looks()
    assert portal["consent"]["kept"] is True and check["status"] == "pass"
    assert "consent is kept" in check["detail"]

    (state / pc.STATE_FILE).write_text('{"restore_token": "../../etc/passwd"}')
    assert pc.load_state() == {}  # not a UUID: never sent to the portal
    assert looks()[0]["consent"]["kept"] is False


@pytest.mark.django_db(transaction=True)
def test_a_portal_display_is_attached_and_opens_the_portal_source(
    v1, state, sdesk, monkeypatch, redis_db
):
    from streaming import session_display

    for k, v in sway_env(sdesk).items():
        monkeypatch.setenv(k, v)
    conf(state, capture="portal")
    a = machine.acquire("alice", "1280x720@60")
    path = sdesk.bus_address.split("unix:path=")[1].split(",")[0]
    assert (a["backend"], a["owned"], a["pid"], a["running"]) == ("portal", False, None, True)
    assert a["mode"] == "1280x720@60" and a["wayland_display"] == sdesk.sway.wayland_socket
    b = machine.acquire("bob", "640x480@30")
    assert b["slot"] == a["slot"] and b["sessions"] == 2
    from displays.models import VirtualDisplay

    assert VirtualDisplay.objects.get(slot=a["slot"]).identity_key == f"attached:portal|{path}"
    display = {"backend": "portal", "output": "", "x_display": "",
               "wayland_display": a["wayland_display"]}  # fmt: skip
    assert session_display.input_at_start(display)
    cap = session_display.open_capture(display)
    inp = session_display.session_input(display, "t")
    try:
        assert type(cap).__name__ == "PortalCapture"
        assert inp is not None and inp.output_name == sdesk.output  # sway's virtual devices
    finally:
        inp.close()
        cap.close()
    no_wlr = dict(display, wayland_display=None)
    assert session_display.session_input(no_wlr, "t") is None  # logged: stream only
    machine.disconnect(a["slot"])
    machine.disconnect(a["slot"])
    assert machine.state()["displays"] == []
