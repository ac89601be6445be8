"""Virtual gamepads through uinput, where the host has it.

Many hosts do not: a container or a VM kernel without the uinput module has no /dev/uinput
(or a node that fails with ENODEV). `availability()` answers that once, with a reason, for
preflight; a session on such a host reports gamepads unavailable instead of failing.

A client's controller state (button flags, two triggers 0-255, two sticks -32768..32767) is
turned into evdev events by `state_events()`, a pure function the tests check without uinput.
The button flags are the GameStream client's (moonlight-common-c's) controller bits.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

MAX_PADS = 16  # GameStream clients number controllers 0-15
UINPUT = "/dev/uinput"

# Client button flag -> evdev key code name (Linux gamepad layout).
BUTTON_FLAGS = {
    0x0001: "BTN_DPAD_UP",
    0x0002: "BTN_DPAD_DOWN",
    0x0004: "BTN_DPAD_LEFT",
    0x0008: "BTN_DPAD_RIGHT",
    0x0010: "BTN_START",
    0x0020: "BTN_SELECT",
    0x0040: "BTN_THUMBL",
    0x0080: "BTN_THUMBR",
    0x0100: "BTN_TL",
    0x0200: "BTN_TR",
    0x0400: "BTN_MODE",
    0x1000: "BTN_SOUTH",
    0x2000: "BTN_EAST",
    0x4000: "BTN_WEST",
    0x8000: "BTN_NORTH",
}
AXES = ("ABS_X", "ABS_Y", "ABS_RX", "ABS_RY", "ABS_Z", "ABS_RZ")


class GamepadUnavailable(RuntimeError):
    pass


def availability(path: str = UINPUT) -> tuple[bool, str]:
    """(usable, reason) for preflight: can this host create virtual gamepads?"""
    try:
        # optional: a host may lack python evdev; say so instead of failing
        import evdev  # noqa: F401
    except ImportError:
        return False, "python evdev is not installed"
    if not os.path.exists(path):
        return False, f"{path} does not exist (no uinput module in this kernel)"
    if not stat.S_ISCHR(os.stat(path).st_mode):
        return False, f"{path} is not a character device"
    if not os.access(path, os.R_OK | os.W_OK):
        return False, f"{path} is not writable by this user"
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    except OSError as e:
        return False, f"{path} cannot be opened: {e.strerror}"
    os.close(fd)
    return True, "ok"


def check_index(index: int) -> int:
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_PADS:
        raise ValueError(f"gamepad index must be 0..{MAX_PADS - 1}, not {index!r}")
    return index


@dataclass(frozen=True)
class PadState:
    buttons: int = 0
    left_trigger: int = 0
    right_trigger: int = 0
    left_x: int = 0
    left_y: int = 0
    right_x: int = 0
    right_y: int = 0

    def clamped(self) -> PadState:
        def c(v, lo, hi):
            return max(lo, min(hi, int(v)))

        return PadState(
            buttons=int(self.buttons) & 0xFFFF,
            left_trigger=c(self.left_trigger, 0, 255),
            right_trigger=c(self.right_trigger, 0, 255),
            left_x=c(self.left_x, -32768, 32767),
            left_y=c(self.left_y, -32768, 32767),
            right_x=c(self.right_x, -32768, 32767),
            right_y=c(self.right_y, -32768, 32767),
        )


def state_events(old: PadState, new: PadState) -> list[tuple[str, str, int]]:
    """Events (type, code name, value) that take a pad from `old` to `new`.

    Sticks: the client's Y axis points up, evdev's down, so Y is inverted.
    """
    new = new.clamped()
    out: list[tuple[str, str, int]] = []
    changed = old.buttons ^ new.buttons
    for flag, name in BUTTON_FLAGS.items():
        if changed & flag:
            out.append(("EV_KEY", name, 1 if new.buttons & flag else 0))
    axes = {
        "ABS_X": (old.left_x, new.left_x),
        "ABS_Y": (_flip(old.left_y), _flip(new.left_y)),
        "ABS_RX": (old.right_x, new.right_x),
        "ABS_RY": (_flip(old.right_y), _flip(new.right_y)),
        "ABS_Z": (old.left_trigger, new.left_trigger),
        "ABS_RZ": (old.right_trigger, new.right_trigger),
    }
    for name, (a, b) in axes.items():
        if a != b:
            out.append(("EV_ABS", name, b))
    return out


def _flip(y: int) -> int:
    return min(32767, -y)


class VirtualGamepad:
    """One uinput pad. # GAP: untested here (no uinput on the dev hosts); rumble not wired."""

    def __init__(self, index: int):
        check_index(index)
        ok, why = availability()
        if not ok:
            raise GamepadUnavailable(why)
        from evdev import AbsInfo, UInput, ecodes  # optional: see availability()

        self._ec = ecodes
        stick = AbsInfo(0, -32768, 32767, 16, 128, 0)
        trigger = AbsInfo(0, 0, 255, 0, 0, 0)
        caps = {
            ecodes.EV_KEY: [getattr(ecodes, n) for n in BUTTON_FLAGS.values()],
            ecodes.EV_ABS: [
                (getattr(ecodes, a), trigger if a in ("ABS_Z", "ABS_RZ") else stick) for a in AXES
            ],
        }
        try:
            self._ui = UInput(
                caps,
                name=f"GameStream pad {index}",
                vendor=0x045E,
                product=0x028E,
                bustype=ecodes.BUS_USB,
            )
        except Exception as e:  # UInputError or OSError, by kernel
            raise GamepadUnavailable(str(e)) from e
        self.state = PadState()

    def update(self, new: PadState) -> None:
        for etype, code, value in state_events(self.state, new):
            self._ui.write(getattr(self._ec, etype), getattr(self._ec, code), value)
        self._ui.syn()
        self.state = new.clamped()

    def close(self) -> None:
        """Neutral state first (nothing held), then the device goes away."""
        try:
            self.update(PadState())
        finally:
            self._ui.close()
