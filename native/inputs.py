"""Data-channel input messages of the player page -> media.input (XTest and uinput pads).

JSON, one event per message:
`{"t":"k","vk":65,"d":1}` key (Windows virtual-key codes, as `KeyboardEvent.keyCode` gives),
`{"t":"m","x":..,"y":..,"w":..,"h":..}` absolute move on a w x h view,
`{"t":"r","dx":..,"dy":..}` relative move (pointer lock), `{"t":"b","b":1,"d":1}` button,
`{"t":"s","a":-120,"h":0}` wheel in 1/120 notches,
`{"t":"p","i":0,"b":0x1000,"lt":0..255,"rt":..,"lx":-32768..32767,"ly":..,"rx":..,"ry":..}`
a pad's whole state (GameStream button flags, Y up), sent by the page when it changes.
The XTest injector clamps and rate-limits; pads are created on first use.
"""

from __future__ import annotations

import logging

from media.input.gamepad import GamepadUnavailable, PadState, VirtualGamepad, check_index
from media.input.session import input_switches

log = logging.getLogger("native")


class Pads:
    """The session's virtual pads. # GAP: untested end to end here (no /dev/uinput)."""

    def __init__(self, switches: dict | None = None):
        self._pads: dict = {}
        self.unavailable: str | None = None
        # The host's `keyboard` / `mouse` / `controller` switches, read once per session.
        self.switches = input_switches() if switches is None else switches

    def allows(self, kind) -> bool:
        return self.switches.get(_SWITCH_OF.get(kind, ""), True)

    def update(self, ev: dict) -> bool:
        if self.unavailable:
            return False
        index = check_index(int(ev["i"]))
        state = PadState(
            int(ev.get("b", 0)),
            int(ev.get("lt", 0)),
            int(ev.get("rt", 0)),
            int(ev.get("lx", 0)),
            int(ev.get("ly", 0)),
            int(ev.get("rx", 0)),
            int(ev.get("ry", 0)),
        ).clamped()
        pad = self._pads.get(index)
        if pad is None:
            try:
                pad = self._pads[index] = VirtualGamepad(index)
            except GamepadUnavailable as exc:
                self.unavailable = str(exc)
                log.info("gamepads unavailable: %s", exc)
                return False
        pad.update(state)
        return True

    def close(self) -> None:
        for pad in self._pads.values():
            pad.close()
        self._pads.clear()


_SWITCH_OF = {"k": "keyboard", "m": "mouse", "r": "mouse", "b": "mouse", "s": "mouse"}
_SWITCH_OF["p"] = "controller"


def inject(x, ev: dict, pads: Pads | None = None) -> bool:
    try:
        kind = ev.get("t")
        if pads is not None and not pads.allows(kind):
            return False  # the operator turned this kind of input off
        if kind == "p":
            return pads.update(ev) if pads is not None else False
        if x is None:
            return False
        if kind == "k":
            return x.key(int(ev["vk"]), bool(ev["d"]))
        if kind == "m":
            return x.move_absolute(ev["x"], ev["y"], ev["w"], ev["h"])
        if kind == "r":
            return x.move_relative(ev["dx"], ev["dy"])
        if kind == "b":
            return x.button(int(ev["b"]), bool(ev["d"]))
        if kind == "s":
            return x.scroll(int(ev["a"]), bool(ev.get("h")))
    except (KeyError, TypeError, ValueError):
        return False
    return False


def release(device, pads: Pads | None) -> None:
    """At the session's end: keys and buttons up, the virtual devices gone. A dead compositor
    (display_lost) must not keep the display from its release: failures are logged."""
    if device is not None:
        try:
            device.release_all()
            device.close()
        except Exception:
            log.warning("input release failed", exc_info=True)
    if pads is not None:
        pads.close()
