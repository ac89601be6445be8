"""One session's input: control-stream input payloads in, X display and gamepads driven.

The engine calls `handle(payload)` for every 0x0206 message and `disconnect()` when the
client goes away (ENet disconnect, ping timeout, session end). A bad packet is counted and
dropped, never raised into the control loop: a broken client must not end a session, and an
attacker must not be able to crash one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hostconfig import store
from media.input import packets
from media.input.gamepad import MAX_PADS, GamepadUnavailable, PadState, VirtualGamepad, availability
from media.input.xtest import XInput

log = logging.getLogger("media.input")


@dataclass
class InputStats:
    handled: int = 0
    ignored: int = 0  # kinds we do not handle (touch, pen)
    malformed: int = 0
    refused: int = 0  # clamped-out or limited events (bad codes, floods, pad 99)
    text_chars: int = 0  # characters typed from text messages
    disabled: int = 0  # events of a kind the host config turns off (keyboard, mouse, controller)


# The host config key that turns each kind of event off.
SWITCH_OF = {
    packets.Key: "keyboard",
    packets.Text: "keyboard",
    packets.MouseRel: "mouse",
    packets.MouseAbs: "mouse",
    packets.Button: "mouse",
    packets.Scroll: "mouse",
    packets.Pad: "controller",
}


def input_switches() -> dict[str, bool]:
    """`keyboard`, `mouse`, `controller` from the host config (read once per session)."""
    try:
        return {name: bool(store.get(name)) for name in ("keyboard", "mouse", "controller")}
    except Exception:  # a broken config must not stop a session's input
        log.exception("input switches unreadable; every input stays on")
        return {}


class SessionInput:
    def __init__(
        self,
        display_name: str | None,
        *,
        gamepads: bool = True,
        region: dict | None = None,
        device=None,
        switches: dict | None = None,
    ):
        """`device`: a keyboard/mouse with XInput's interface made by the caller (a WlrInput
        for wlroots backends, created at session start); else XTest into `display_name`."""
        self.x = device if device is not None else XInput(display_name, region=region)
        self.stats = InputStats()
        self.switches = switches if switches is not None else input_switches()
        ok, why = availability() if gamepads else (False, "disabled")
        self.gamepads_available, self.gamepad_reason = ok, why
        if gamepads and not ok:
            log.info("gamepads unavailable on this host: %s", why)
        self._pads: dict[int, VirtualGamepad] = {}

    def handle(self, payload: bytes) -> bool:
        """True when the event reached the display or a pad."""
        try:
            ev = packets.parse(payload)
        except packets.InputPacketError as e:
            self.stats.malformed += 1
            log.debug("malformed input packet: %s", e)
            return False
        if ev is None:
            self.stats.ignored += 1
            return False
        if not self.switches.get(SWITCH_OF.get(type(ev), ""), True):
            self.stats.disabled += 1  # the operator turned this kind of input off
            return False
        ok = self._dispatch(ev)
        if ok:
            self.stats.handled += 1
        else:
            self.stats.refused += 1
        return ok

    def _dispatch(self, ev: packets.Event) -> bool:
        if isinstance(ev, packets.Key):
            return self.x.key(ev.vk, ev.down)
        if isinstance(ev, packets.MouseRel):
            return self.x.move_relative(ev.dx, ev.dy)
        if isinstance(ev, packets.MouseAbs):
            return self.x.move_absolute(ev.x, ev.y, ev.ref_width, ev.ref_height)
        if isinstance(ev, packets.Button):
            return self.x.button(ev.button, ev.down)
        if isinstance(ev, packets.Scroll):
            return self.x.scroll(ev.amount, ev.horizontal)
        if isinstance(ev, packets.Pad):
            return self._pad(ev)
        if isinstance(ev, packets.Text):
            typed = self.x.type_text(ev.text)
            self.stats.text_chars += typed
            return typed == len(ev.text.replace("\r\n", "\n"))  # all of it, or refused
        return False

    def _pad(self, ev: packets.Pad) -> bool:
        if not 0 <= ev.index < MAX_PADS or not self.gamepads_available:
            return False
        pad = self._pads.get(ev.index)
        if pad is None:
            try:
                pad = self._pads[ev.index] = VirtualGamepad(ev.index)
            except GamepadUnavailable as e:
                self.gamepads_available, self.gamepad_reason = False, str(e)
                return False
        pad.update(
            PadState(
                ev.buttons,
                ev.left_trigger,
                ev.right_trigger,
                ev.left_x,
                ev.left_y,
                ev.right_x,
                ev.right_y,
            )
        )
        # A pad the client no longer lists as active goes away (neutral first).
        for index in [i for i in self._pads if not ev.active_mask >> i & 1]:
            self._pads.pop(index).close()
        return True

    def disconnect(self) -> int:
        """The client is gone: release every key, button and pad. Returns keys+buttons freed."""
        freed = self.x.release_all()
        for pad in self._pads.values():
            pad.close()
        self._pads.clear()
        return freed

    def close(self) -> None:
        self.disconnect()
        self.x.close()
