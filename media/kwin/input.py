"""Keyboard and mouse into a KDE Plasma (KWin) desktop: org_kde_kwin_fake_input.

`KWinInput` has the interface of media.input.xtest.XInput, WlrInput and MutterInput (their
common base media.input.injector.Injector). KWin offers fake input only to privileged
clients (docs/kde-capture.md); to anyone else the global is absent and the constructor
raises `KWinInputUnavailable` saying so. One Wayland connection per instance, serialised
by the base's lock.

Keys travel as Linux evdev codes under the US positions of media.wayland.xkbmap (KWin maps
them through the desktop's own layout and tracks modifiers itself). KWin 5.27 offers
version 4 of the protocol, which has no keysym request (version 5 adds one): text is typed
as the key and Shift level of each character on the US layout, and a character off it is
refused and counted rather than typed as something else.
"""

from __future__ import annotations

import logging

from media.input.injector import Injector, _clamp
from media.input.keymap import char_keysym, keysym_name
from media.input.limiter import RateLimiter
from media.input.xtest import InputUnavailable
from media.kwin.screencast import grant_hint
from media.wayland import xkbmap
from media.wayland.client import Display, MissingGlobal, WaylandError

log = logging.getLogger("media.input")

FAKE_INPUT = "org_kde_kwin_fake_input"
NEED_VERSION = 4  # keyboard_key; pointer_motion_absolute came in 3
AXIS_STEP = 15.0  # one wheel notch in Wayland axis units (libinput's value, as on wlroots)
APP, REASON = "Game streaming host", "keyboard and mouse of a remote-play client"


class KWinInputUnavailable(InputUnavailable, WaylandError):
    """KWin cannot be reached, does not let this process use fake input, or went away."""


class KWinInput(Injector):
    BUTTONS = xkbmap.EVDEV_BUTTONS

    def __init__(
        self,
        wayland_socket: str,
        output_name: str | None = None,
        *,
        limiter: RateLimiter | None = None,
        timeout: float = 5.0,
    ):
        try:
            self._d = Display(wayland_socket, timeout=timeout)
        except WaylandError as exc:
            raise KWinInputUnavailable(str(exc)) from exc
        try:
            out = self._d.output(output_name)
            self._fi = self._d.bind(FAKE_INPUT, NEED_VERSION, min_version=NEED_VERSION)
            self._fi.request("authenticate", APP, REASON)
            self._d.roundtrip()
        except MissingGlobal as exc:
            self._d.close()
            raise KWinInputUnavailable(
                f"{exc}: KWin gives it only to clients a desktop file allows "
                "(X-KDE-Wayland-Interfaces, docs/kde-capture.md), or it is not KWin" + grant_hint()
            ) from exc
        except WaylandError as exc:
            self._d.close()
            raise KWinInputUnavailable(str(exc)) from exc
        if out.width <= 0 or out.height <= 0:
            self._d.close()
            raise KWinInputUnavailable(f"KWin's output {out.name} reports no mode")
        self.output_name = out.name
        # Absolute positions are in KWin's logical (scaled) coordinates; a client speaks
        # in the output's pixels.
        self._origin = (out.x, out.y)
        self._logical = out.extra.get("logical") or (out.width, out.height)
        self._setup(out.width, out.height, limiter)
        self._pos = (self.width // 2, self.height // 2)

    # -- keyboard ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        """The evdev code of the key a VK code names, or None."""
        name = keysym_name(vk)
        return xkbmap.code_for_keysym_name(name) if name else None

    def _send_key(self, code: int, down: bool) -> None:
        self._send("keyboard_key", code, 1 if down else 0)

    def _typable(self, ch: str):
        """(key code, needs Shift) of `ch` on the US layout fake input types, else None."""
        sym = char_keysym(ch)
        found = xkbmap.code_for_keysym(sym) if sym is not None else None
        if found is None:
            self._reject("character %r is not on the US layout fake input types", ch)
        return found

    def _type_one(self, ch: str, found: tuple[int, bool]) -> bool:
        self._tap(*found)
        return True

    def _tap(self, code: int, shifted: bool) -> None:
        held = [c for c in self._held_keys if c in xkbmap.MODIFIERS["Shift"]]
        if not shifted:
            for c in held:  # the client holds Shift: lift it for a lower-level character
                self._send("keyboard_key", c, 0)
        elif not held:
            self._send("keyboard_key", xkbmap.SHIFT_CODE, 1)
        self._send("keyboard_key", code, 1)
        self._send("keyboard_key", code, 0)
        if not shifted:
            for c in held:
                self._send("keyboard_key", c, 1)
        elif not held:
            self._send("keyboard_key", xkbmap.SHIFT_CODE, 0)

    def restore_keymap(self) -> int:
        """Nothing to restore: text never changes the desktop's keymap here."""
        return 0

    # -- mouse ------------------------------------------------------------------------------
    def _send_button(self, code: int, down: bool) -> None:
        self._send("button", code, 1 if down else 0)

    def _send_move_by(self, dx: int, dy: int) -> None:
        self._send("pointer_motion", float(dx), float(dy))
        self._pos = (
            _clamp(self._pos[0] + dx, 0, self.width - 1),
            _clamp(self._pos[1] + dy, 0, self.height - 1),
        )

    def _send_move_to(self, x: int, y: int) -> None:
        lw, lh = self._logical
        gx = self._origin[0] + (x + 0.5) * lw / self.width  # the pixel's centre
        gy = self._origin[1] + (y + 0.5) * lh / self.height
        self._send("pointer_motion_absolute", gx, gy)
        self._pos = (x, y)

    def _send_wheel(self, notches: int, horizontal: bool) -> None:
        steps = notches if horizontal else -notches  # Wayland: positive is down/right
        self._send("axis", 1 if horizontal else 0, steps * AXIS_STEP)

    def _send(self, request: str, *args) -> None:
        """Send at once, and pick up a protocol error or a KWin that went away."""
        try:
            self._fi.request(request, *args)
            self._d.dispatch(0)
        except WaylandError as exc:
            raise KWinInputUnavailable(f"KWin's fake input is gone ({exc})") from exc

    # -- lifetime ---------------------------------------------------------------------------
    def pointer(self) -> tuple[int, int]:
        """Where we last put the pointer, in output pixels (the protocol cannot read it)."""
        return self._pos

    def ended(self) -> str | None:
        """Why input is gone (KWin went away), or None while it works; never blocks."""
        if self._closed:
            return "closed"
        with self._lock:
            try:
                self._d.dispatch(0)
            except WaylandError as exc:
                return f"the KWin connection ended ({exc})"
        return None

    def release_all(self) -> int:
        """Let go of every key and button still held; how many there were."""
        with self._lock:
            if self._closed:
                return 0
            try:
                for code in sorted(self._held_keys):
                    self._send("keyboard_key", code, 0)
                for code in sorted(self._held_buttons):
                    self._send("button", code, 0)
                self._d.roundtrip()  # KWin has them before a disconnect
            except WaylandError as exc:
                log.debug("release_all: %s", exc)
            return self._forget_held()

    def close(self) -> None:
        """Release what is held and disconnect (KWin drops the fake device); safe twice."""
        if self._closed:
            return
        try:
            self.release_all()
        finally:
            with self._lock:
                self._closed = True
                self._d.close()
