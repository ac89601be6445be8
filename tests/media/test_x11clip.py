"""The session display's CLIPBOARD both ways (media/x11clip.py) against a real Xvfb, with an
independent X app (tests/support/x11_clip_app.py) copying and pasting as apps do."""

from __future__ import annotations

import queue
import subprocess
import sys
import time

import pytest

from media.x11clip import MAX_BYTES, X11Clipboard, clean
from tests.support.livehost import ROOT

APP = [sys.executable, "-m", "tests.support.x11_clip_app"]


def paste(display: str) -> str:
    done = subprocess.run([*APP, display, "paste"], cwd=ROOT, capture_output=True, timeout=30)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout.decode("utf-8")


def copy(display: str, text: str, tmp_path) -> subprocess.Popen:
    src = tmp_path / "copied.txt"
    src.write_bytes(text.encode("utf-8"))
    app = subprocess.Popen([*APP, display, "copy", str(src)], cwd=ROOT, stdout=subprocess.PIPE)
    assert app.stdout.readline().strip() == b"owned"
    return app


@pytest.fixture
def clip(xvfb):
    got: queue.Queue = queue.Queue()
    c = X11Clipboard(xvfb, got.put)
    c.got = got
    yield c
    c.close()


def test_host_text_is_what_an_app_pastes(clip, xvfb):
    text = "héllo from the browser\nline two\tend"
    assert clip.set_text(text)
    for _ in range(50):  # the clipboard thread takes ownership within a few ms
        if clip.sent:
            break
        time.sleep(0.02)
    assert paste(xvfb) == text
    big = ("0123456789abcdef" * (MAX_BYTES // 16))[:MAX_BYTES]
    assert clip.set_text(big)
    time.sleep(0.3)
    assert paste(xvfb) == big


def test_an_app_copy_reaches_the_host_at_once(clip, xvfb, tmp_path):
    app = copy(xvfb, "copied in the game ✓", tmp_path)
    try:
        assert clip.got.get(timeout=5) == "copied in the game ✓"
    finally:
        app.kill()
        app.wait()
    # After the host set the clipboard, the app's next copy takes it back and is seen too.
    assert clip.set_text("from host")
    app = copy(xvfb, "second copy", tmp_path)
    try:
        assert clip.got.get(timeout=5) == "second copy"
    finally:
        app.kill()
        app.wait()
    assert clip.received == 2


def test_oversized_and_unprintable_text_never_crosses(clip, xvfb, tmp_path):
    assert clean("x" * MAX_BYTES) and clean("x" * (MAX_BYTES + 1)) is None
    assert clean("é" * (MAX_BYTES // 2 + 1)) is None  # bytes, not characters
    assert clean("bell\x07") is None and clean("nul\x00") is None and clean("") is None
    assert not clip.set_text("x" * (MAX_BYTES + 1)) and not clip.set_text("esc\x1b[2J")
    assert clip.dropped == 2
    app = copy(xvfb, "y" * (MAX_BYTES + 1), tmp_path)
    try:
        with pytest.raises(queue.Empty):
            clip.got.get(timeout=2)
    finally:
        app.kill()
        app.wait()
    app = copy(xvfb, "ok\x1b[31m", tmp_path)
    try:
        with pytest.raises(queue.Empty):
            clip.got.get(timeout=1.5)
    finally:
        app.kill()
        app.wait()
    assert clip.received == 0 and clip.dropped == 4
