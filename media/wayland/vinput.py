"""Keyboard and mouse into a wlroots compositor: virtual-keyboard and wlr-virtual-pointer.

`WlrInput` has the interface of media.input.xtest.XInput and the same checks, from their
common base media.input.injector.Injector. The pointer is bound to one output
(motion_absolute maps onto that output's extent). One Wayland connection per instance,
serialised by a lock.

Keys travel as Linux evdev codes under the US keymap of media.wayland.xkbmap; the
compositor tracks modifiers itself from the Shift/Control/... key events.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict

from media.input.injector import Injector, _clamp
from media.input.keymap import keysym_name
from media.input.limiter import RateLimiter
from media.input.xtest import InputUnavailable
from media.wayland import xkbmap
from media.wayland.client import Display, MissingGlobal, WaylandError

log = logging.getLogger("media.input")

AXIS_STEP = 15.0  # what one wheel notch scrolls, in Wayland's axis units (libinput's value)
KEYMAP_FORMAT_XKB_V1 = 1


class WlrInputUnavailable(InputUnavailable, WaylandError):
    """The compositor cannot be reached or lacks the virtual keyboard/pointer protocols."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000) & 0xFFFFFFFF


class WlrInput(Injector):
    BUTTONS = xkbmap.EVDEV_BUTTONS

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
        self._setup(self.output.width, self.output.height, limiter)
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> spare code, LRU
        self._pos = (self.width // 2, self.height // 2)

    # -- keyboard ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        """The evdev code of the key a VK code names, or None."""
        name = keysym_name(vk)
        return xkbmap.code_for_keysym_name(name) if name else None

    def _send_key(self, code: int, down: bool) -> None:
        self._key(code, down)
        self._flush()

    def _type_one(self, ch: str, sym: int) -> bool:
        """A character off the US layout is bound to a spare key code and the keymap
        uploaded again."""
        self._tap(*self._text_key(sym))
        return True

    def _text_sent(self) -> None:
        self._flush()

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
    def _send_button(self, code: int, down: bool) -> None:
        self._ptr.request("button", _now_ms(), code, 1 if down else 0)
        self._ptr.request("frame")
        self._flush()

    def _send_move_by(self, dx: int, dy: int) -> None:
        self._ptr.request("motion", _now_ms(), float(dx), float(dy))
        self._ptr.request("frame")
        self._pos = (
            _clamp(self._pos[0] + dx, 0, self.width - 1),
            _clamp(self._pos[1] + dy, 0, self.height - 1),
        )
        self._flush()

    def _send_move_to(self, x: int, y: int) -> None:
        self._ptr.request("motion_absolute", _now_ms(), x, y, self.width, self.height)
        self._ptr.request("frame")
        self._pos = (x, y)
        self._flush()

    def _send_wheel(self, notches: int, horizontal: bool) -> None:
        steps = notches if horizontal else -notches  # Wayland: positive is down/right
        axis = 1 if horizontal else 0
        self._ptr.request("axis_source", 0)  # wheel
        self._ptr.request("axis_discrete", _now_ms(), axis, steps * AXIS_STEP, steps)
        self._ptr.request("frame")
        self._flush()

    # -- lifetime ---------------------------------------------------------------------------
    def pointer(self) -> tuple[int, int]:
        """Where we last put the pointer, in output pixels (the protocols cannot read it)."""
        return self._pos

    def release_all(self) -> int:
        """Let go of every key and button still held; how many there were."""
        with self._lock:
            if self._closed:
                return 0
            for code in sorted(self._held_keys):
                self._key(code, False)
            for code in sorted(self._held_buttons):
                self._ptr.request("button", _now_ms(), code, 0)
            if self._held_buttons:
                self._ptr.request("frame")
            held = self._forget_held()
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

    def _flush(self) -> None:
        """Send, and pick up a protocol error the compositor may have answered with."""
        try:
            self._d.dispatch(0)
        except WaylandError as e:
            raise WlrInputUnavailable(f"virtual input lost: {e}") from e
