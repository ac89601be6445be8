"""What every keyboard and mouse injector shares, whatever it injects into (XTest into an X
display, virtual-keyboard/pointer into a wlroots compositor): the checks on what a client sends,
the rate limiter, the held keys and buttons, and the wheel remainder.

A backend subclasses `Injector`, calls `_setup()` and provides the primitives, each called with
`_lock` held and each sending its event at once: `keycode`, `_send_key`, `_send_button`,
`_send_move_by`, `_send_move_to` (a position inside the captured area) and `_send_wheel`;
for text, `_type_one` (and `_typable`, `_text_sent` where the default does not fit).
Each public call returns True when the event was injected and False when it was refused or
dropped; `rejected` and `limiter.dropped` count both for the session's stats.
"""

from __future__ import annotations

import logging
import threading

from hostconfig import store
from media.input.keymap import char_keysym
from media.input.limiter import RateLimiter

log = logging.getLogger("media.input")

WHEEL_STEP = 120  # one notch, as Windows counts scroll
MAX_NOTCHES = 10  # per event: a client saying "scroll 10,000 notches" gets ten
MAX_TEXT_CHARS = 32  # per call; the protocol's text message holds 32 bytes


def keybindings() -> dict[int, int]:
    """host.conf's `keybindings` as {from: to} key codes; {} when unset or unreadable (a
    broken config must not stop a session's input)."""
    try:
        codes = [int(c, 0) for c in store.get("keybindings") or []]
        return dict(zip(codes[0::2], codes[1::2], strict=True))
    except Exception:
        log.exception("keybindings unreadable; no key is remapped")
        return {}


class Injector:
    BUTTONS: dict[int, int] = {}  # client button (1 left ... 5 forward) -> the backend's code

    def _setup(self, width: int, height: int, limiter: RateLimiter | None) -> None:
        self.width, self.height = width, height
        self.limiter = limiter or RateLimiter()
        self.rejected = 0
        self._held_keys: set[int] = set()
        self._held_buttons: set[int] = set()
        self._wheel_rest = {False: 0, True: 0}
        self._lock = threading.Lock()
        self._closed = False
        # `keybindings`: the client's key `from` presses `to` (read once per session).
        self.remap: dict[int, int] = keybindings()

    # -- primitives ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        raise NotImplementedError

    def _send_key(self, code: int, down: bool) -> None:
        raise NotImplementedError

    def _send_button(self, code: int, down: bool) -> None:
        raise NotImplementedError

    def _send_move_by(self, dx: int, dy: int) -> None:
        raise NotImplementedError

    def _send_move_to(self, x: int, y: int) -> None:
        raise NotImplementedError

    def _send_wheel(self, notches: int, horizontal: bool) -> None:
        """`notches` != 0, positive is up (vertical) or right (horizontal)."""
        raise NotImplementedError

    # -- what a client sends ------------------------------------------------------------------
    def key(self, vk: int, down: bool) -> bool:
        if isinstance(vk, int) and not isinstance(vk, bool):
            vk = self.remap.get(vk, vk)
        code = self.keycode(vk)
        if code is None:
            return self._reject("key code %r has no key", vk)
        return self._press(self._held_keys, code, down, self._send_key)

    def button(self, button: int, down: bool) -> bool:
        code = self.BUTTONS.get(button) if isinstance(button, int) else None
        if code is None:
            return self._reject("mouse button %r does not exist", button)
        return self._press(self._held_buttons, code, down, self._send_button)

    def _press(self, held: set[int], code: int, down: bool, send) -> bool:
        with self._lock:
            if down:
                if not self.limiter.allow():
                    return False
                held.add(code)
            else:
                if code not in held:
                    return False  # a release for something we never pressed: nothing to do
                held.discard(code)
            send(code, down)
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
            self._send_move_by(dx, dy)
        return True

    def move_absolute(self, x: int, y: int, ref_width: int, ref_height: int) -> bool:
        """`x, y` on a `ref_width` x `ref_height` surface (the client's view of the picture)."""
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
            self._send_move_to(sx, sy)
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
            if notches:
                self._send_wheel(notches, horizontal)
        return True

    def type_text(self, text: str) -> int:
        """Type `text` into the focused window; how many characters were typed. Characters
        the backend cannot type are refused (counted in `rejected`), the rate limiter counts
        one press per character, and at most MAX_TEXT_CHARS are taken from one call."""
        text = self._text_to_type(text)
        typed = 0
        with self._lock:
            if self._closed or not text:
                return 0
            try:
                for ch in text:
                    what = self._typable(ch)
                    if what is None:
                        continue
                    if not self.limiter.allow():
                        break  # the flood's rest is dropped (and counted by the limiter)
                    if self._type_one(ch, what):
                        typed += 1
            finally:
                self._text_sent()
        return typed

    def _typable(self, ch: str):
        """What `_type_one` types for `ch` (its keysym by default), or None, refused."""
        sym = char_keysym(ch)
        if sym is None:
            self._reject("character %r has no keysym", ch)
        return sym

    def _type_one(self, ch: str, what) -> bool:
        """Send one character (`_lock` held); False when it was refused after all."""
        raise NotImplementedError

    def _text_sent(self) -> None:
        """After a `type_text`'s characters (`_lock` held): flush what the backend buffers."""

    def _text_to_type(self, text) -> str:
        """The part of a client's text message that may be typed ("" for none)."""
        if not isinstance(text, str):
            self._reject("text %r is not a string", text)
            return ""
        text = text.replace("\r\n", "\n")
        if len(text) > MAX_TEXT_CHARS:
            self._reject("text of %d characters cut to %d", len(text), MAX_TEXT_CHARS)
            text = text[:MAX_TEXT_CHARS]
        return text

    def _forget_held(self) -> int:
        """Clear what is held (the caller has released it); how much there was."""
        held = len(self._held_keys) + len(self._held_buttons)
        self._held_keys.clear()
        self._held_buttons.clear()
        self._wheel_rest = {False: 0, True: 0}
        return held

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def _reject(self, msg: str, *args) -> bool:
        self.rejected += 1
        log.debug("input refused: " + msg, *args)
        return False


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v
