"""Keyboard and mouse into a wlroots compositor: virtual-keyboard and wlr-virtual-pointer.

`WlrInput` has the interface of streaming.input.xtest.XInput (key by the client's VK code,
type_text, button, move_relative, move_absolute with the client's reference size, scroll in
1/120 notches, release_all, close), with the same checks: VK codes without a key on the
layout are refused, positions are scaled and clamped to the output, presses/moves/scrolls go
through the rate limiter and releases never do, held keys and buttons are remembered and
`release_all()` lets them go. The pointer is bound to one output (motion_absolute maps onto
that output's extent). One Wayland connection per instance, serialised by a lock.

Keys travel as Linux evdev codes under the US keymap of streaming.wayland.xkbmap; the
compositor tracks modifiers itself from the Shift/Control/... key events.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict

from streaming.input.keymap import keysym_name
from streaming.input.limiter import RateLimiter
from streaming.input.xtest import (
    MAX_NOTCHES,
    MAX_TEXT_CHARS,
    WHEEL_STEP,
    InputUnavailable,
    char_keysym,
)
from streaming.wayland import xkbmap
from streaming.wayland.client import Display, MissingGlobal, WaylandError

log = logging.getLogger("streaming.input")

# Client mouse buttons (1 left, 2 middle, 3 right, 4 back/X1, 5 forward/X2) to evdev codes.
BUTTONS = {1: 0x110, 2: 0x112, 3: 0x111, 4: 0x113, 5: 0x114}
AXIS_STEP = 15.0  # what one wheel notch scrolls, in Wayland's axis units (libinput's value)
KEYMAP_FORMAT_XKB_V1 = 1


class WlrInputUnavailable(InputUnavailable, WaylandError):
    """The compositor cannot be reached or lacks the virtual keyboard/pointer protocols."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000) & 0xFFFFFFFF


class WlrInput:
    def __init__(
        self,
        wayland_display: str | None,
        output_name: str | None = None,
        *,
        runtime_dir: str | None = None,
        limiter: RateLimiter | None = None,
        timeout: float = 5.0,
    ):
        try:
            self._d = Display(wayland_display, runtime_dir=runtime_dir, timeout=timeout)
        except WaylandError as e:
            raise WlrInputUnavailable(str(e)) from e
        try:
            self.output = self._d.output(output_name)
            kbd_mgr = self._d.bind("zwp_virtual_keyboard_manager_v1", 1)
            # version 2 binds the pointer to one output, so absolute moves land on it
            ptr_mgr = self._d.bind("zwlr_virtual_pointer_manager_v1", 2, min_version=2)
            seat = self._d.bind("wl_seat", 1)
            self._kbd = kbd_mgr.request("create_virtual_keyboard", seat)
            self._ptr = ptr_mgr.request(
                "create_virtual_pointer_with_output", seat, self.output.proxy
            )
            self._extra: dict[int, int] = {}
            self._upload_keymap()
            self._d.roundtrip()
        except MissingGlobal as e:
            self._d.close()
            raise WlrInputUnavailable(f"no virtual input on this compositor: {e}") from e
        except WaylandError as e:
            self._d.close()
            raise WlrInputUnavailable(str(e)) from e
        self.output_name = self.output.name
        self.width, self.height = self.output.width, self.output.height
        self.limiter = limiter or RateLimiter()
        self.rejected = 0
        self._held_keys: set[int] = set()
        self._held_buttons: set[int] = set()
        self._wheel_rest = {False: 0, True: 0}
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> spare code, LRU
        self._pos = (self.width // 2, self.height // 2)
        self._lock = threading.Lock()
        self._closed = False

    # -- keyboard ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        """The evdev code of the key a VK code names, or None."""
        name = keysym_name(vk)
        return xkbmap.code_for_keysym_name(name) if name else None

    def key(self, vk: int, down: bool) -> bool:
        code = self.keycode(vk)
        if code is None:
            return self._reject("key code %r has no key", vk)
        with self._lock:
            if down:
                if not self.limiter.allow():
                    return False
                self._held_keys.add(code)
                self._key(code, True)
            else:
                if code not in self._held_keys:
                    return False
                self._held_keys.discard(code)
                self._key(code, False)
            self._flush()
        return True

    def type_text(self, text: str) -> int:
        """Type `text`; how many characters were typed (see XInput.type_text). A character
        off the US layout is bound to a spare key code and the keymap uploaded again."""
        if not isinstance(text, str):
            self._reject("text %r is not a string", text)
            return 0
        text = text.replace("\r\n", "\n")
        if len(text) > MAX_TEXT_CHARS:
            self._reject("text of %d characters cut to %d", len(text), MAX_TEXT_CHARS)
            text = text[:MAX_TEXT_CHARS]
        typed = 0
        with self._lock:
            if self._closed:
                return 0
            for ch in text:
                sym = char_keysym(ch)
                if sym is None:
                    self._reject("character %r has no keysym", ch)
                    continue
                if not self.limiter.allow():
                    break
                code, shifted = self._text_key(sym)
                self._tap(code, shifted)
                typed += 1
            self._flush()
        return typed

    def _text_key(self, sym: int) -> tuple[int, bool]:
        found = xkbmap.code_for_keysym(sym)
        if found is not None:
            return found
        code = self._bound.get(sym)
        if code is not None:
            self._bound.move_to_end(sym)
            return code, False
        if len(self._bound) < len(xkbmap.SPARE_CODES):
            code = xkbmap.SPARE_CODES[len(self._bound)]
        else:
            _old, code = self._bound.popitem(last=False)
            self._extra.pop(code, None)
        self._bound[sym] = code
        self._extra[code] = sym
        self._upload_keymap()
        return code, False

    def _tap(self, code: int, shifted: bool) -> None:
        held = [c for c in self._held_keys if c in xkbmap.MODIFIERS["Shift"]]
        if not shifted:
            for c in held:  # the client holds Shift: lift it for a lower-level character
                self._key(c, False)
        elif not held:
            self._key(xkbmap.SHIFT_CODE, True)
        self._key(code, True)
        self._key(code, False)
        if not shifted:
            for c in held:
                self._key(c, True)
        elif not held:
            self._key(xkbmap.SHIFT_CODE, False)

    def restore_keymap(self) -> int:
        """Drop the spare-key bindings made for text (the keymap as it started)."""
        with self._lock:
            n = len(self._bound)
            if n and not self._closed:
                self._bound.clear()
                self._extra.clear()
                self._upload_keymap()
                self._flush()
            return n

    def _upload_keymap(self) -> None:
        data = xkbmap.keymap_text(self._extra).encode() + b"\0"
        fd = os.memfd_create("xkb-keymap", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            self._kbd.request("keymap", KEYMAP_FORMAT_XKB_V1, fd, len(data))
            self._d.flush()  # the fd goes out before we close our copy
        finally:
            os.close(fd)

    def _key(self, code: int, down: bool) -> None:
        self._kbd.request("key", _now_ms(), code, 1 if down else 0)

    # -- mouse ------------------------------------------------------------------------------
    def button(self, button: int, down: bool) -> bool:
        code = BUTTONS.get(button) if isinstance(button, int) else None
        if code is None:
            return self._reject("mouse button %r does not exist", button)
        with self._lock:
            if down:
                if not self.limiter.allow():
                    return False
                self._held_buttons.add(code)
            else:
                if code not in self._held_buttons:
                    return False
                self._held_buttons.discard(code)
            self._ptr.request("button", _now_ms(), code, 1 if down else 0)
            self._ptr.request("frame")
            self._flush()
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
            self._ptr.request("motion", _now_ms(), float(dx), float(dy))
            self._ptr.request("frame")
            self._pos = (
                _clamp(self._pos[0] + dx, 0, self.width - 1),
                _clamp(self._pos[1] + dy, 0, self.height - 1),
            )
            self._flush()
        return True

    def move_absolute(self, x: int, y: int, ref_width: int, ref_height: int) -> bool:
        """`x, y` on a `ref_width` x `ref_height` surface (the client's view of the output)."""
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
            self._ptr.request("motion_absolute", _now_ms(), sx, sy, self.width, self.height)
            self._ptr.request("frame")
            self._pos = (sx, sy)
            self._flush()
        return True

    def scroll(self, amount: int, horizontal: bool = False) -> bool:
        """`amount` in 1/120 notches; positive is up (vertical) or right (horizontal)."""
        try:
            amount = int(amount)
        except (TypeError, ValueError, OverflowError):
            return self._reject("scroll %r is not a number", amount)
        with self._lock:
            if not self.limiter.allow():
                return False
            total = self._wheel_rest[horizontal] + amount
            notches = int(total / WHEEL_STEP)
            self._wheel_rest[horizontal] = total - notches * WHEEL_STEP
            if abs(notches) > MAX_NOTCHES:
                notches = MAX_NOTCHES if notches > 0 else -MAX_NOTCHES
                self._wheel_rest[horizontal] = 0
            if notches:
                steps = notches if horizontal else -notches  # Wayland: positive is down/right
                axis = 1 if horizontal else 0
                self._ptr.request("axis_source", 0)  # wheel
                self._ptr.request("axis_discrete", _now_ms(), axis, steps * AXIS_STEP, steps)
                self._ptr.request("frame")
                self._flush()
        return True

    # -- lifetime ---------------------------------------------------------------------------
    def pointer(self) -> tuple[int, int]:
        """Where we last put the pointer, in output pixels (the protocols cannot read it)."""
        return self._pos

    def release_all(self) -> int:
        """Let go of every key and button still held; how many there were."""
        with self._lock:
            held = len(self._held_keys) + len(self._held_buttons)
            if self._closed:
                return 0
            for code in sorted(self._held_keys):
                self._key(code, False)
            for code in sorted(self._held_buttons):
                self._ptr.request("button", _now_ms(), code, 0)
            if self._held_buttons:
                self._ptr.request("frame")
            self._held_keys.clear()
            self._held_buttons.clear()
            self._wheel_rest = {False: 0, True: 0}
            try:
                self._d.roundtrip()  # before a disconnect returns, the compositor has them
            except WaylandError as e:
                log.debug("release_all: %s", e)
        return held

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.release_all()
        finally:
            with self._lock:
                self._closed = True
                try:
                    self._kbd.request("destroy")
                    self._ptr.request("destroy")
                    self._d.flush()
                except (WaylandError, OSError):
                    pass
                self._d.close()

    def __enter__(self) -> WlrInput:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _flush(self) -> None:
        """Send, and pick up a protocol error the compositor may have answered with."""
        try:
            self._d.dispatch(0)
        except WaylandError as e:
            raise WlrInputUnavailable(f"virtual input lost: {e}") from e

    def _reject(self, msg: str, *args) -> bool:
        self.rejected += 1
        log.debug("input refused: " + msg, *args)
        return False


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v
