"""`clipboard = text-only` on the native plane, end to end: the player page in real headless
Chromium over WebRTC, the host's session process, and the session's X display, where an
independent X app (tests/support/x11_clip_app.py) copies and pastes as apps do.

Both directions, the 64 KiB bound (the page refuses to send more; the host drops more from
either side), and `off` (the page is told nothing and sends nothing; the host takes nothing).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.native.browserkit import page_wait, self_paired, wait_for
from tests.support.livehost import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

APP = [sys.executable, "-m", "tests.support.x11_clip_app"]
MAX = 64 * 1024
PASTE_JS = """(text) => {
  const dt = new DataTransfer(); dt.setData('text/plain', text);
  document.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true}));
}"""
RAW_CLIP_JS = """(text) => window.nativePlayer.dc.send(JSON.stringify({t: 'clip', text}))"""


def x_paste(x_display: str) -> str | None:
    """What an app of the session gets when it pastes (None: nobody owns CLIPBOARD)."""
    done = subprocess.run([*APP, x_display, "paste"], cwd=ROOT, capture_output=True, timeout=30)
    if done.returncode == 3:
        return None
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout.decode("utf-8")


class XCopy:
    """An app of the session that copied `text` (it owns CLIPBOARD until closed)."""

    def __init__(self, x_display: str, text: str, tmp_path):
        src = tmp_path / f"copy-{time.monotonic_ns()}.txt"
        src.write_bytes(text.encode("utf-8"))
        self.proc = subprocess.Popen(
            [*APP, x_display, "copy", str(src)], cwd=ROOT, stdout=subprocess.PIPE
        )
        assert self.proc.stdout.readline().strip() == b"owned"

    def close(self):
        self.proc.kill()
        self.proc.wait()


def _set_clipboard(host, admin_auth, mode: str) -> None:
    with host.client(auth=admin_auth) as c:
        r = c.post("/api/config", json={"clipboard": mode})
        assert r.status_code == 200, r.text


def _x_display(api, name: str) -> str:
    return wait_for(
        lambda: next(
            (d["x_display"] for d in api.get("/api/v1/display/state").json()["displays"]
             if d["client"] == name and d["state"] == "active"),
            None,
        ),
        what="the session's display",
    )  # fmt: skip


def test_text_both_ways_bounded_and_nothing_when_off(live_host, admin_auth, tmp_path):
    name = "e2e clipboard"
    _set_clipboard(live_host, admin_auth, "text-only")
    try:
        with self_paired(live_host, name) as player:
            page = player.page
            page.context.grant_permissions(
                ["clipboard-read", "clipboard-write"], origin=live_host.url
            )
            player.start()
            page_wait(page, "() => window.nativePlayer.clip.on === true", 15)
            assert "Clipboard shared" in page.inner_text("#clip")
            x_name = _x_display(player.api, name)

            # Browser -> session: the user pastes into the player; an app pastes the text.
            text = "from the browser: héllo ✓\nsecond line\tend"
            page.evaluate(PASTE_JS, text)
            wait_for(lambda: x_paste(x_name) == text, timeout=10, what="the text in X")
            assert "Sent" in page.inner_text("#clip")

            # Session -> browser: an app copies; the page gets it (and the browser clipboard).
            app = XCopy(x_name, "copied in the game ✓", tmp_path)
            try:
                page_wait(page, "() => window.nativePlayer.clip.last === 'copied in the game ✓'",
                          10)  # fmt: skip
                assert "Copied 20 characters" in page.inner_text("#clip")
                browser_clip = page.evaluate("() => navigator.clipboard.readText()")
                assert browser_clip == "copied in the game ✓"
            finally:
                app.close()

            # The bound: exactly 64 KiB crosses; one byte more is refused on both sides.
            full = ("0123456789abcdef" * (MAX // 16))[:MAX]
            page.evaluate(PASTE_JS, full)
            wait_for(lambda: x_paste(x_name) == full, timeout=15, what="64 KiB in X")
            page.evaluate(PASTE_JS, "z" * (MAX + 1))
            assert "over 64 KiB" in page.inner_text("#clip")
            page.evaluate(RAW_CLIP_JS, "w" * (MAX + 1))  # past the page's own check
            page.evaluate(RAW_CLIP_JS, "bell\u0007")  # not printable text
            time.sleep(1.5)
            assert x_paste(x_name) == full
            received = page.evaluate("() => window.nativePlayer.clip.received")
            app = XCopy(x_name, "q" * (MAX + 1), tmp_path)
            try:
                time.sleep(2)
                assert page.evaluate("() => window.nativePlayer.clip.received") == received
            finally:
                app.close()

            # off: the next session is told nothing, sends nothing, and the host takes nothing.
            _set_clipboard(live_host, admin_auth, "off")
            page.click("#stop")
            page_wait(page, "() => window.nativePlayer.state === 'stopped'", 10)
            player.start()
            x_name = _x_display(player.api, name)
            time.sleep(2)  # the clip-mode message would have come with "playing"
            assert page.evaluate("() => window.nativePlayer.clip.on") is False
            app = XCopy(x_name, "before off", tmp_path)
            try:
                assert x_paste(x_name) == "before off"
                sent = page.evaluate("() => window.nativePlayer.clip.sent")
                page.evaluate(PASTE_JS, "must not arrive")
                assert page.evaluate("() => window.nativePlayer.clip.sent") == sent
                page.evaluate(RAW_CLIP_JS, "must not arrive either")
                time.sleep(1.5)
                assert x_paste(x_name) == "before off"
                received = page.evaluate("() => window.nativePlayer.clip.received")
            finally:
                app.close()
            app = XCopy(x_name, "copied while off", tmp_path)
            try:
                time.sleep(2)
                assert page.evaluate("() => window.nativePlayer.clip.received") == received
                assert page.evaluate("() => window.nativePlayer.clip.last") != "copied while off"
            finally:
                app.close()
    finally:
        _set_clipboard(live_host, admin_auth, "off")
