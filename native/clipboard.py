"""The native session's clipboard: text between the player page (the WebRTC data channel) and
the session display's CLIPBOARD (media.x11clip), as host.conf's `clipboard` says.

- `text-only` on an X11 session display: once the session is live the host tells the page
  `{"t": "clip-mode", "on": true, "max_bytes": 65536}`; then `{"t": "clip", "text": ...}` goes
  both ways: the page sends what the user pastes, the host sends what an app copies.
- `text-only` on a sway session: `{"t": "clip-mode", "on": false, "why": ...}` (no Wayland
  clipboard tool is installed), nothing else.
- `off`: no clipboard message either way, and whatever the page sends anyway is dropped.
The compat plane has no clipboard: Moonlight sends none over GameStream.
"""

from __future__ import annotations

import logging
import shutil

from media.x11clip import MAX_BYTES, ClipboardUnavailable, X11Clipboard
from streaming import session_display

log = logging.getLogger("native.clipboard")

# GAP: no clipboard on sway sessions; the Wayland side needs wl-clipboard (or a data-control
# client), not installed on this host.
WAYLAND_WHY = (
    "sway sessions have no clipboard sharing: wl-clipboard is not installed"
    if shutil.which("wl-copy") is None
    else "sway sessions have no clipboard sharing in this build (X11 sessions only)"
)


class SessionClipboard:
    def __init__(self, send, x11=None, why: str = ""):
        self.send = send  # thread-safe: hands a message to the data channel
        self.x11 = x11
        self.why = why
        self.dropped = 0  # page messages refused (off, too large, not text)
        self.told = False

    @classmethod
    def open(cls, mode, display: dict, send) -> SessionClipboard | None:
        """The session's clipboard; None when `clipboard` is off (no messages at all)."""
        if mode != "text-only":
            return None
        if session_display.is_wayland(display):
            log.info("clipboard: %s", WAYLAND_WHY)
            return cls(send, why=WAYLAND_WHY)
        clip = cls(send)
        try:
            clip.x11 = X11Clipboard(display["x_display"], clip._copied)
        except ClipboardUnavailable as exc:
            log.warning("clipboard unavailable: %s", exc)
            clip.why = f"the session display has no clipboard: {exc}"
        return clip

    def hello(self) -> dict:
        """What the page is told once the session is live."""
        if self.x11 is not None:
            return {"t": "clip-mode", "on": True, "max_bytes": MAX_BYTES}
        return {"t": "clip-mode", "on": False, "why": self.why}

    def from_page(self, ev: dict) -> bool:
        """The page's `clip` message: the session display's CLIPBOARD takes its text."""
        if self.x11 is None or not self.x11.set_text(ev.get("text")):
            self.dropped += 1
            return False
        return True

    def _copied(self, text: str) -> None:
        """An app of the session copied `text` (the clipboard thread)."""
        self.send({"t": "clip", "text": text})

    def close(self) -> None:
        if self.x11 is not None:
            self.x11.close()
