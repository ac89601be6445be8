"""What a native session's clipboard says and takes for each `clipboard` value and display kind
(no browser: the data-channel messages as native/clipboard.py builds them)."""

from __future__ import annotations

import queue
import time

from native.clipboard import WAYLAND_WHY, SessionClipboard
from tests.media.conftest import xvfb  # noqa: F401 - fixture
from tests.media.test_x11clip import copy, paste


def test_off_is_no_clipboard_at_all():
    assert SessionClipboard.open("off", {"x_display": ":99"}, print) is None
    assert SessionClipboard.open(None, {"x_display": ":99"}, print) is None


def test_a_sway_session_says_why_and_takes_nothing():
    sent = []
    clip = SessionClipboard.open("text-only", {"wayland_display": "wayland-1"}, sent.append)
    assert clip.hello() == {"t": "clip-mode", "on": False, "why": WAYLAND_WHY}
    assert "wl-clipboard" in WAYLAND_WHY or "X11 sessions only" in WAYLAND_WHY
    assert clip.from_page({"t": "clip", "text": "hi"}) is False and clip.dropped == 1
    clip.close()
    assert sent == []


def test_an_unreachable_display_says_so():
    clip = SessionClipboard.open("text-only", {"x_display": ":4242"}, print)
    hello = clip.hello()
    assert hello["on"] is False and "cannot open display :4242" in hello["why"]


def test_an_x11_session_moves_text_both_ways(xvfb, tmp_path):  # noqa: F811
    got: queue.Queue = queue.Queue()
    clip = SessionClipboard.open("text-only", {"x_display": xvfb}, got.put)
    try:
        assert clip.hello() == {"t": "clip-mode", "on": True, "max_bytes": 65536}
        assert clip.from_page({"t": "clip", "text": "to the app"})
        for _ in range(100):
            if clip.x11.sent:
                break
            time.sleep(0.02)
        assert paste(xvfb) == "to the app"
        assert not clip.from_page({"t": "clip", "text": ["not", "text"]})
        app = copy(xvfb, "to the page", tmp_path)
        try:
            assert got.get(timeout=5) == {"t": "clip", "text": "to the page"}
        finally:
            app.kill()
            app.wait()
    finally:
        clip.close()
