"""Keyboard and mouse from the client, injected into the session's X display with XTest.

One persistent X connection per session (spawning xdotool per event costs milliseconds; XTest
over an open connection costs ~0.2 ms). Everything a client sends is checked first:

* key codes outside the VK range or without a key on this layout are refused, not guessed;
* absolute positions are scaled from the client's reference size and clamped to the screen,
  relative moves are clamped to one screen per event;
* presses, moves and scrolls go through a rate limiter; releases never do;
* every key and button held down is remembered, and `release_all()` (called when the client
  disconnects or the session ends) lets them all go, so nothing stays stuck.

Each call returns True when the event was injected and False when it was refused or dropped;
`rejected` and `limiter.dropped` count both for the session's stats.
"""

from __future__ import annotations

import logging
import threading

from Xlib import XK, X, display
from Xlib.error import DisplayError
from Xlib.ext import xtest

from streaming.input.keymap import keysym_name
from streaming.input.limiter import RateLimiter

log = logging.getLogger("streaming.input")

# Client mouse buttons (1 left, 2 middle, 3 right, 4 back/X1, 5 forward/X2) to X buttons.
BUTTONS = {1: 1, 2: 2, 3: 3, 4: 8, 5: 9}
WHEEL_STEP = 120  # one notch, as Windows counts scroll
_WHEEL = {(False, 1): 4, (False, -1): 5, (True, 1): 7, (True, -1): 6}
MAX_NOTCHES = 10  # per event: a client saying "scroll 10,000 notches" gets ten

XK.load_keysym_group("xf86")


class InputUnavailable(RuntimeError):
    """The display cannot be reached or has no XTest."""


class XInput:
    def __init__(self, display_name: str | None = None, limiter: RateLimiter | None = None):
        try:
            self._d = display.Display(display_name)
        except (DisplayError, OSError, ValueError) as e:
            raise InputUnavailable(f"cannot open display {display_name!r}: {e}") from e
        if not self._d.has_extension("XTEST"):
            self._d.close()
            raise InputUnavailable(f"display {display_name!r} has no XTEST extension")
        screen = self._d.screen()
        self.width, self.height = screen.width_in_pixels, screen.height_in_pixels
        self.limiter = limiter or RateLimiter()
        self.rejected = 0
        self._held_keys: set[int] = set()
        self._held_buttons: set[int] = set()
        self._wheel_rest = {False: 0, True: 0}
        self._lock = threading.Lock()
        self._closed = False

    # -- keyboard ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        name = keysym_name(vk)
        if name is None:
            return None
        sym = XK.string_to_keysym(name)
        code = self._d.keysym_to_keycode(sym) if sym else 0
        return code or None

    def key(self, vk: int, down: bool) -> bool:
        code = self.keycode(vk)
        if code is None:
            return self._reject("key code %r has no key", vk)
        with self._lock:
            if down:
                if not self.limiter.allow():
                    return False
                self._held_keys.add(code)
                self._fake(X.KeyPress, code)
            else:
                if code not in self._held_keys:
                    return False  # a release for a key we never pressed: nothing to do
                self._held_keys.discard(code)
                self._fake(X.KeyRelease, code)
        return True

    # -- mouse ------------------------------------------------------------------------------
    def button(self, button: int, down: bool) -> bool:
        xb = BUTTONS.get(button) if isinstance(button, int) else None
        if xb is None:
            return self._reject("mouse button %r does not exist", button)
        with self._lock:
            if down:
                if not self.limiter.allow():
                    return False
                self._held_buttons.add(xb)
                self._fake(X.ButtonPress, xb)
            else:
                if xb not in self._held_buttons:
                    return False
                self._held_buttons.discard(xb)
                self._fake(X.ButtonRelease, xb)
        return True

    def move_relative(self, dx: int, dy: int) -> bool:
        try:
            dx = _clamp(int(dx), -self.width, self.width)
            dy = _clamp(int(dy), -self.height, self.height)
        except (TypeError, ValueError, OverflowError):
            return self._reject("relative move %r,%r is not a number", dx, dy)
        with self._lock:
            if not self.limiter.allow():
                return False
            self._fake(X.MotionNotify, detail=1, x=dx, y=dy)
        return True

    def move_absolute(self, x: int, y: int, ref_width: int, ref_height: int) -> bool:
        """`x, y` on a `ref_width` x `ref_height` surface (the client's view of the screen)."""
        try:
            x, y, rw, rh = int(x), int(y), int(ref_width), int(ref_height)
        except (TypeError, ValueError, OverflowError):
            return self._reject("absolute move %r,%r is not a number", x, y)
        if rw <= 0 or rh <= 0:
            return self._reject("absolute move with reference size %dx%d", rw, rh)
        sx = _clamp(x * self.width // rw, 0, self.width - 1)
        sy = _clamp(y * self.height // rh, 0, self.height - 1)
        with self._lock:
            if not self.limiter.allow():
                return False
            self._fake(X.MotionNotify, x=sx, y=sy)
        return True

    def scroll(self, amount: int, horizontal: bool = False) -> bool:
        """`amount` in 1/120 notches (high-resolution wheels send less than a notch)."""
        try:
            amount = int(amount)
        except (TypeError, ValueError, OverflowError):
            return self._reject("scroll %r is not a number", amount)
        with self._lock:
            if not self.limiter.allow():
                return False
            total = self._wheel_rest[horizontal] + amount
            notches = int(total / WHEEL_STEP)  # toward zero: the rest waits for more
            self._wheel_rest[horizontal] = total - notches * WHEEL_STEP
            if abs(notches) > MAX_NOTCHES:
                notches = MAX_NOTCHES if notches > 0 else -MAX_NOTCHES
                self._wheel_rest[horizontal] = 0
            xb = _WHEEL[(horizontal, 1 if notches > 0 else -1)]
            for _ in range(abs(notches)):
                self._fake(X.ButtonPress, xb, flush=False)
                self._fake(X.ButtonRelease, xb, flush=False)
            self._d.flush()
        return True

    # -- lifetime ---------------------------------------------------------------------------
    def pointer(self) -> tuple[int, int]:
        p = self._d.screen().root.query_pointer()
        return p.root_x, p.root_y

    def release_all(self) -> int:
        """Let go of every key and button still held; how many there were."""
        with self._lock:
            held = len(self._held_keys) + len(self._held_buttons)
            for code in sorted(self._held_keys):
                self._fake(X.KeyRelease, code, flush=False)
            for xb in sorted(self._held_buttons):
                self._fake(X.ButtonRelease, xb, flush=False)
            self._held_keys.clear()
            self._held_buttons.clear()
            self._wheel_rest = {False: 0, True: 0}
            if held:
                self._d.sync()  # before a disconnect returns, the server has them all
        return held

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.release_all()
        finally:
            self._d.close()

    def __enter__(self) -> XInput:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------------------
    def _fake(self, kind: int, detail: int = 0, flush: bool = True, **kw) -> None:
        xtest.fake_input(self._d, kind, detail, **kw)
        if flush:
            self._d.flush()

    def _reject(self, msg: str, *args) -> bool:
        self.rejected += 1
        log.debug("input refused: " + msg, *args)
        return False


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v
