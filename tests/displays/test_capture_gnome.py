"""The `gnome` capture method against a real headless GNOME (tests/support/gnome.py: its own
session bus, PipeWire and mutter): selection under `auto` and `capture = gnome`, the monitor
named by output_name, the reasons when mutter is absent, and what a session then opens
(streaming/session_display: MutterCapture and MutterInput)."""

from __future__ import annotations

import subprocess
import time

import pytest

from displays import capture
from tests.support.gnome import missing_tools, running_gnome

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def gnome():
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_gnome("1280x720") as desk:
        yield desk


def conf(state, **values) -> None:
    (state / "host.conf").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))


def bus_env(desk, **more) -> dict:
    env = {"DBUS_SESSION_BUS_ADDRESS": desk.bus_address, "XDG_RUNTIME_DIR": str(desk.runtime_dir)}
    env.update(more)
    return env


def test_auto_picks_gnome_on_the_gnome_bus_before_x11(state, gnome):
    from tests.support.desktop import OperatorDesktop

    mons = capture.probe_gnome(bus_env(gnome))[0]
    assert [(m.connector, m.primary) for m in mons] == [("Meta-0", True)]
    # A GNOME Wayland session also has DISPLAY (its Xwayland): that root is never the desktop.
    xwayland = OperatorDesktop(640, 480)
    try:
        sel = capture.select(bus_env(gnome, DISPLAY=xwayland.name))
    finally:
        xwayland.stop()
    assert (sel.backend, sel.output, sel.error) == ("gnome", "Meta-0", "")
    assert sel.region == {"left": 0, "top": 0, "width": 1280, "height": 720}
    assert "mutter's ScreenCast is on the session bus" in sel.reason
    assert "gnome" not in sel.unusable
    methods = {m["id"]: m for m in capture.methods(bus_env(gnome))}
    assert methods["auto"]["resolves_to"] == "gnome" and methods["gnome"]["selected"] is True


def test_capture_gnome_and_a_named_monitor(state, gnome):
    conf(state, capture="gnome")
    sel = capture.select(bus_env(gnome))
    assert (sel.backend, sel.output, sel.error) == ("gnome", "Meta-0", "")
    assert sel.reason == "capture = gnome (monitor Meta-0)"
    conf(state, capture="gnome", output_name="meta-0")  # connectors match without case
    assert capture.select(bus_env(gnome)).output == "Meta-0"
    conf(state, capture="auto", output_name="DP-7")
    sel = capture.select(bus_env(gnome))
    assert sel.backend == "gnome" and sel.error == (
        "capture = auto: no monitor named 'DP-7' on the GNOME desktop (monitors: Meta-0)"
    )  # named: auto does not fall back to something else


def test_a_bus_without_mutter_says_why(state, tmp_path):
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"],
                           stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        address = bus.stdout.readline().decode().strip()
        env = {"DBUS_SESSION_BUS_ADDRESS": address}
        sel = capture.select(env)
        assert sel.backend == "xvfb" or sel.error
        assert sel.unusable["gnome"].startswith("org.gnome.Mutter.ScreenCast is not on the")
        conf(state, capture="gnome")
        sel = capture.select(env)
        assert sel.backend == "gnome" and sel.error.startswith(
            "capture = gnome: org.gnome.Mutter.ScreenCast is not on the session bus"
        )
        with pytest.raises(capture.CaptureError):
            capture.require(env)
    finally:
        bus.terminate()
        bus.wait(5)
        bus.stdout.close()
    sel = capture.select({"DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/gone"})
    assert "cannot connect to the D-Bus session bus" in sel.unusable["gnome"]


def test_missing_gstreamer_is_the_reason(state, gnome, monkeypatch, tmp_path):
    """Without gst-launch-1.0 on PATH the frames cannot be read: gnome is not usable."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert capture.gst_missing().startswith("gst-launch-1.0 is not installed")
    assert capture.select(bus_env(gnome)).unusable["gnome"].startswith("gst-launch-1.0")


def test_a_session_display_streams_and_drives_the_monitor(gnome, monkeypatch):
    """What open_capture and session_input give a `gnome` display (the host's own bus)."""
    from streaming import session_display

    for k, v in bus_env(gnome).items():
        monkeypatch.setenv(k, v)
    display = {"backend": "gnome", "output": "Meta-0", "x_display": "", "wayland_display": None}
    assert session_display.input_at_start(display)
    cap = session_display.open_capture(display)
    inp = session_display.session_input(display, "t")
    try:
        frame = cap(640, 360)
        assert frame.shape == (360, 640, 4) and cap.failures == 0
        assert (inp.width, inp.height) == (1280, 720)
        assert inp.move_absolute(10, 10, 640, 360) and inp.pointer() == (20, 20)
        time.sleep(0.1)
    finally:
        inp.close()
        cap.close()
