"""streaming/session_display.py, the backend choices both planes share, and the native encoder
child's frame source on a display that is gone (real processes, no mocks)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from media.framesource import DisplayCapture, WaylandCapture
from streaming import session_display

XVFB = {"backend": "xvfb", "x_display": ":99", "region": None, "wayland_display": None,
        "output": None, "pid": 1}  # fmt: skip
SWAY = {"backend": "sway", "x_display": ":5", "region": None, "wayland_display": "/run/x/wl",
        "output": "HEADLESS-2", "pid": None}  # fmt: skip


def test_the_frame_source_follows_the_backend():
    x = session_display.open_capture(XVFB)
    wl = session_display.open_capture(SWAY)
    assert isinstance(x, DisplayCapture) and x.x_display == ":99"
    assert isinstance(wl, WaylandCapture) and (wl.wayland_socket, wl.output) == (
        "/run/x/wl",
        "HEADLESS-2",
    )
    assert "HEADLESS-2" in wl.what


def test_the_apps_x_display(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":7")
    assert session_display.app_x_display(XVFB) == ":99"
    assert session_display.app_x_display(SWAY) == ":5"  # the headless sway's own Xwayland
    wlr = {**SWAY, "backend": "wlr", "x_display": None}
    assert session_display.app_x_display(wlr) == ":7"  # the operator compositor's Xwayland


def test_a_dead_compositor_is_named():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        alive = {**SWAY, "pid": proc.pid}
        assert session_display.compositor_gone(alive) == ""
    finally:
        proc.kill()
        proc.wait()
    why = session_display.compositor_gone(alive)
    assert "HEADLESS-2" in why and "gone" in why
    assert session_display.compositor_gone({**XVFB, "pid": proc.pid}) == ""  # X: the grabs say


@pytest.mark.slow
def test_the_native_encoder_reports_a_display_that_is_gone():
    """The encoder child on a display nobody answers: `lost` is set after every grab failed
    for framesource.LOST_AFTER_S and the child exits (the peer then ends with display_lost)."""
    from native.media import EncoderProcess

    gone = {**XVFB, "x_display": f":{900 + os.getpid() % 90}"}
    enc = EncoderProcess(gone, 320, 240, 10, 500)
    try:
        deadline = time.monotonic() + 60
        while not enc.lost.is_set() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert enc.lost.is_set()
        enc.proc.join(20)
        assert not enc.proc.is_alive()
    finally:
        enc.close()
