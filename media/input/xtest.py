"""Keyboard and mouse from the client, injected into the session's X display with XTest.

One persistent X connection per session (spawning xdotool per event costs milliseconds; XTest
over an open connection costs ~0.2 ms). Everything a client sends is checked first:

* key codes outside the VK range or without a key on this layout are refused, not guessed;
* absolute positions are scaled from the client's reference size and clamped to the screen,
  relative moves are clamped to one screen per event;
* presses, moves and scrolls go through a rate limiter; releases never do;
* every key and button held down is remembered, and `release_all()` (called when the client
  disconnects or the session ends) lets them all go, so nothing stays stuck;
* text (`type_text`, from the client's UTF-8 text messages) is typed character by character: a
  character on the current keymap is tapped on its key (with Shift for the upper level); one
  that has no key gets a spare, empty keycode bound to its keysym for the tap, as xdotool does.
  Those bindings are undone `restore_after_s` after the last text (and on `release_all`), so the
  display's keymap ends as it was; apps read the keymap when they handle the key, so undoing it
  at once would race them.

The checks common to every injector live in media.input.injector.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from Xlib import XK, X, display
from Xlib.error import DisplayError
from Xlib.ext import xtest

from media.input.injector import Injector
from media.input.keymap import keysym_name, keysym_value
from media.input.limiter import RateLimiter

# Client mouse buttons (1 left, 2 middle, 3 right, 4 back/X1, 5 forward/X2) to X buttons.
BUTTONS = {1: 1, 2: 2, 3: 3, 4: 8, 5: 9}
_WHEEL = {(False, 1): 4, (False, -1): 5, (True, 1): 7, (True, -1): 6}
RESTORE_AFTER_S = 1.0  # spare keycodes go back to empty this long after the last text
REBIND_GAP_S = 0.05  # a spare keycode is not rebound sooner than this after its last tap

XK.load_keysym_group("xf86")


class InputUnavailable(RuntimeError):
    """The display cannot be reached or has no XTest."""


class XInput(Injector):
    BUTTONS = BUTTONS

    def __init__(
        self,
        display_name: str | None = None,
        limiter: RateLimiter | None = None,
        region: dict | None = None,
    ):
        """`region` ({left, top, width, height}): the part of the screen the client sees (one
        monitor of an attached desktop); absolute positions land inside it. None: the screen."""
        try:
            self._d = display.Display(display_name)
        except (DisplayError, OSError, ValueError) as e:
            raise InputUnavailable(f"cannot open display {display_name!r}: {e}") from e
        if not self._d.has_extension("XTEST"):
            self._d.close()
            raise InputUnavailable(f"display {display_name!r} has no XTEST extension")
        screen = self._d.screen()
        self.left = self.top = 0
        width, height = screen.width_in_pixels, screen.height_in_pixels
        if region:
            self.left, self.top = int(region["left"]), int(region["top"])
            width, height = int(region["width"]), int(region["height"])
        self._setup(width, height, limiter)
        self.restore_after_s = RESTORE_AFTER_S
        self._spare: list[int] | None = None  # keycodes with no keysyms, found on first need
        self._spare_rows: dict[int, list[int]] = {}  # their original (empty) rows
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> spare keycode, LRU
        self._used_at: dict[int, float] = {}  # spare keycode -> last tap
        self._restore_timer: threading.Timer | None = None

    # -- keyboard ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        name = keysym_name(vk)
        if name is None:
            return None
        sym = keysym_value(name)
        code = self._d.keysym_to_keycode(sym) if sym else 0
        return code or None

    def _send_key(self, code: int, down: bool) -> None:
        self._fake(X.KeyPress if down else X.KeyRelease, code)

    # -- text -------------------------------------------------------------------------------
    def _type_one(self, ch: str, sym: int) -> bool:
        code, shifted = self._text_key(sym)
        if code is None:
            self._reject("no key for %r and no spare keycode to bind", ch)
            return False
        self._tap(code, shifted)
        return True

    def _text_sent(self) -> None:
        self._d.flush()
        if self._bound:
            self._schedule_restore()

    def _text_key(self, sym: int) -> tuple[int | None, bool]:
        """(keycode, needs shift) for a keysym, binding a spare keycode when the keymap has
        none on its first two levels."""
        code = self._bound.get(sym)
        if code is not None:
            self._bound.move_to_end(sym)
            return code, False
        found = {index: kc for kc, index in self._d.keysym_to_keycodes(sym) if index < 2}
        if 0 in found:
            return found[0], False
        if 1 in found:
            return found[1], True
        if self._spare is None:
            self._spare = self._find_spare()
        if len(self._bound) < len(self._spare):
            code = self._spare[len(self._bound)]
        elif self._bound:
            _, code = self._bound.popitem(last=False)  # least recently used
            wait = self._used_at.get(code, 0.0) + REBIND_GAP_S - time.monotonic()
            self._d.sync()  # its last tap reached the server before the rebind...
            if wait > 0:
                time.sleep(wait)  # ...and the app had a moment to read it
        else:
            return None, False
        # Both levels, so Shift or Caps Lock held by the client cannot change the character.
        self._d.change_keyboard_mapping(code, [(sym, sym)])
        self._bound[sym] = code
        return code, False

    def _find_spare(self) -> list[int]:
        info = self._d.display.info
        first, count = info.min_keycode, info.max_keycode - info.min_keycode + 1
        rows = self._d.get_keyboard_mapping(first, count)
        spare = [first + i for i, row in enumerate(rows) if not any(row)]
        spare = [c for c in spare if c not in self._held_keys][::-1]  # from the top, as xdotool
        self._spare_rows = {c: list(rows[c - first]) for c in spare}
        return spare

    def _shift_codes(self) -> list[int]:
        return [c for c in self._d.get_modifier_mapping()[X.ShiftMapIndex] if c]

    def _tap(self, code: int, shifted: bool) -> None:
        held = [c for c in self._held_keys if c in self._shift_codes()] if self._held_keys else []
        shift = self._d.keysym_to_keycode(XK.XK_Shift_L) if shifted and not held else 0
        if not shifted:
            for c in held:  # the client holds Shift: lift it for a lower-level character
                self._fake(X.KeyRelease, c, flush=False)
        if shift:
            self._fake(X.KeyPress, shift, flush=False)
        self._fake(X.KeyPress, code, flush=False)
        self._fake(X.KeyRelease, code, flush=False)
        if shift:
            self._fake(X.KeyRelease, shift, flush=False)
        if not shifted:
            for c in held:
                self._fake(X.KeyPress, c, flush=False)
        if code in self._spare_rows:
            self._used_at[code] = time.monotonic()

    def _schedule_restore(self) -> None:
        if self._restore_timer is not None:
            self._restore_timer.cancel()
        self._restore_timer = threading.Timer(self.restore_after_s, self.restore_keymap)
        self._restore_timer.daemon = True
        self._restore_timer.start()

    def restore_keymap(self) -> int:
        """Give the spare keycodes bound for text their original (empty) rows back."""
        with self._lock:
            return self._restore_locked()

    def _restore_locked(self) -> int:
        if self._restore_timer is not None:
            self._restore_timer.cancel()
            self._restore_timer = None
        if self._closed or not self._bound:
            return 0
        codes = sorted(self._bound.values())
        for code in codes:
            self._d.change_keyboard_mapping(code, [self._spare_rows[code]])
        self._bound.clear()
        self._d.sync()
        return len(codes)

    # -- mouse ------------------------------------------------------------------------------
    def _send_button(self, code: int, down: bool) -> None:
        self._fake(X.ButtonPress if down else X.ButtonRelease, code)

    def _send_move_by(self, dx: int, dy: int) -> None:
        self._fake(X.MotionNotify, detail=1, x=dx, y=dy)

    def _send_move_to(self, x: int, y: int) -> None:
        self._fake(X.MotionNotify, x=self.left + x, y=self.top + y)

    def _send_wheel(self, notches: int, horizontal: bool) -> None:
        xb = _WHEEL[(horizontal, 1 if notches > 0 else -1)]
        for _ in range(abs(notches)):
            self._fake(X.ButtonPress, xb, flush=False)
            self._fake(X.ButtonRelease, xb, flush=False)
        self._d.flush()

    # -- lifetime ---------------------------------------------------------------------------
    def pointer(self) -> tuple[int, int]:
        p = self._d.screen().root.query_pointer()
        return p.root_x, p.root_y

    def release_all(self) -> int:
        """Let go of every key and button still held; how many there were."""
        with self._lock:
            for code in sorted(self._held_keys):
                self._fake(X.KeyRelease, code, flush=False)
            for xb in sorted(self._held_buttons):
                self._fake(X.ButtonRelease, xb, flush=False)
            held = self._forget_held()
            if held:
                self._d.sync()  # before a disconnect returns, the server has them all
            if not self._closed:
                self._restore_locked()  # the keymap as we found it
        return held

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.release_all()  # keys, buttons and the keymap as we found them
        finally:
            with self._lock:
                self._closed = True
                if self._restore_timer is not None:
                    self._restore_timer.cancel()
            self._d.close()

    # -- helpers ----------------------------------------------------------------------------
    def _fake(self, kind: int, detail: int = 0, flush: bool = True, **kw) -> None:
        xtest.fake_input(self._d, kind, detail, **kw)
        if flush:
            self._d.flush()
