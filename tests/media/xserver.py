"""A real Xvfb for input tests, and a tiny X client that reads back what arrives."""

from __future__ import annotations

import os
import select
import subprocess
import time

from Xlib import XK, X, display


def start_xvfb(width: int = 1280, height: int = 720, timeout: float = 10.0):
    """(process, ":N"): Xvfb picks a free display and writes its number to our pipe.

    -noreset: without it Xvfb resets when its last client leaves, and a client connecting
    during the reset is dropped (seen here as "Connection reset by peer").
    """
    r, w = os.pipe()
    proc = subprocess.Popen(
        [
            "Xvfb",
            "-screen",
            "0",
            f"{width}x{height}x24",
            "-nolisten",
            "tcp",
            "-noreset",
            "-displayfd",
            str(w),
        ],
        pass_fds=(w,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(w)
    data = b""
    deadline = time.monotonic() + timeout
    # Read up to the newline: the number and "\n" are separate writes, and Xvfb dies if the
    # reader closes in between.
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            proc.kill()
            raise RuntimeError("Xvfb did not report a display")
        chunk = os.read(r, 64)
        if not chunk:
            proc.kill()
            raise RuntimeError("Xvfb exited before reporting a display")
        data += chunk
    os.close(r)
    return proc, ":" + data.decode().strip()


XK.load_keysym_group("xf86")
_NAMES: dict[int, str] = {}
for _n in dir(XK):
    if _n.startswith("XK_"):
        _NAMES.setdefault(getattr(XK, _n), _n[3:])


def keysym_name(sym: int) -> str:
    return _NAMES.get(sym, hex(sym))


_SPECIAL_CHARS = {XK.XK_Return: "\n", XK.XK_Tab: "\t", XK.XK_BackSpace: "\b"}


def keysym_char(sym: int) -> str | None:
    """The character a keysym types (None for modifiers and other function keys)."""
    if sym in _SPECIAL_CHARS:
        return _SPECIAL_CHARS[sym]
    if 0x20 <= sym < 0x7F or 0xA0 <= sym < 0x100:
        return chr(sym)
    if sym & 0xFF000000 == 0x01000000:
        return chr(sym & 0xFFFFFF)
    return None


class Watcher:
    """A full-screen window with input focus that records key and button events."""

    MASK = X.KeyPressMask | X.KeyReleaseMask | X.ButtonPressMask | X.ButtonReleaseMask

    def __init__(self, name: str):
        self.d = display.Display(name)
        screen = self.d.screen()
        self.win = screen.root.create_window(
            0,
            0,
            screen.width_in_pixels,
            screen.height_in_pixels,
            0,
            screen.root_depth,
            event_mask=self.MASK | X.StructureNotifyMask,
        )
        self.win.map()
        self.d.flush()
        while self.d.next_event().type != X.MapNotify:
            pass
        self.win.set_input_focus(X.RevertToParent, X.CurrentTime)
        self.d.sync()

    def events(self, timeout: float = 0.5, want: int | None = None) -> list[tuple[str, object]]:
        """Events as ("key+", "a") / ("key-", "a") / ("btn+", 1) / ("btn-", 1)."""
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (want is None or len(out) < want):
            if not self.d.pending_events():
                select.select([self.d], [], [], 0.01)
                continue
            ev = self.d.next_event()
            if ev.type in (X.KeyPress, X.KeyRelease):
                sym = self.d.keycode_to_keysym(ev.detail, 0)
                out.append(("key+" if ev.type == X.KeyPress else "key-", keysym_name(sym)))
            elif ev.type in (X.ButtonPress, X.ButtonRelease):
                out.append(("btn+" if ev.type == X.ButtonPress else "btn-", ev.detail))
        return out

    def typed(self, timeout: float = 1.0, want: int | None = None) -> str:
        """The text the key presses type, read as an X client reads it: with the keymap as it
        is when the event is handled (MappingNotify refreshes it) and Shift for the upper
        level. Modifier keys themselves type nothing."""
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (want is None or len(out) < want):
            if not self.d.pending_events():
                select.select([self.d], [], [], 0.01)
                continue
            ev = self.d.next_event()
            if ev.type == X.MappingNotify:
                self.d.refresh_keyboard_mapping(ev)
            elif ev.type == X.KeyPress:
                shifted = bool(ev.state & X.ShiftMask)
                sym = self.d.keycode_to_keysym(ev.detail, 1 if shifted else 0)
                if not sym and shifted:
                    sym = self.d.keycode_to_keysym(ev.detail, 0)
                ch = keysym_char(sym)
                if ch is not None:
                    out.append(ch)
        return "".join(out)

    def keymap(self) -> list[list[int]]:
        info = self.d.display.info
        rows = self.d.get_keyboard_mapping(
            info.min_keycode, info.max_keycode - info.min_keycode + 1
        )
        return [list(r) for r in rows]

    def keys_down(self) -> list[int]:
        keymap = self.d.query_keymap()
        return [i * 8 + b for i, byte in enumerate(keymap) for b in range(8) if byte >> b & 1]

    def buttons_down(self) -> int:
        mask = self.d.screen().root.query_pointer().mask
        return mask & (X.Button1Mask | X.Button2Mask | X.Button3Mask)

    def close(self):
        self.d.close()
