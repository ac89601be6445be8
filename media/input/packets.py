"""Input packets of the control stream (message type 0x0206), decoded into small events.

Layout, as moonlight-common-c writes it: a header of `u32 BE size` (bytes after this field)
and `u32 LE magic` (the input kind), then a body whose byte order differs per kind, a legacy of
GFE: mouse fields are big-endian, keyboard and controller fields little-endian.

| magic | kind | body |
|---|---|---|
| 0x03 / 0x04 | key down / up | u8 flags, i16 LE key code (VK in the low byte), u8 modifiers, i16 |
| 0x05 | absolute mouse | i16 BE x, y, unused, width, height (width/height = reference - 1) |
| 0x07 | relative mouse | i16 BE dx, dy |
| 0x08 / 0x09 | mouse button down / up | u8 button (1 left .. 5 X2) |
| 0x0A | vertical scroll | i16 BE amount (120 per notch), the same again, i16 zero |
| 0x55000001 | horizontal scroll | i16 BE amount |
| 0x0C | controller | LE: u16 0x1A, i16 number, i16 mask, u16 0x14, u16 buttons, u8 LT RT, |
|  |  | i16 LX LY RX RY, trailer |
| 0x17 | UTF-8 text | the bytes (1..32; MCC sends one code point per message) |
| 0x0D | enable haptics | u16 |

Anything shorter than its kind needs raises `InputPacketError`, and so does text that is empty,
over `MAX_TEXT_BYTES` or not valid UTF-8; unknown kinds decode to None
(newer clients send kinds we do not handle, such as touch and pen; those are ignored).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

KEY_DOWN, KEY_UP = 0x03, 0x04
MOUSE_ABS, MOUSE_REL = 0x05, 0x07
BUTTON_DOWN, BUTTON_UP = 0x08, 0x09
SCROLL, HSCROLL = 0x0A, 0x55000001
CONTROLLER = 0x0C
TEXT = 0x17
HAPTICS = 0x0D
MAX_TEXT_BYTES = 32  # the text field of the protocol's packet (Sunshine refuses more too)


class InputPacketError(ValueError):
    pass


@dataclass(frozen=True)
class Key:
    vk: int  # the Windows VK code (low byte of the key code), or -1 when the code is garbage
    down: bool
    modifiers: int = 0


@dataclass(frozen=True)
class MouseRel:
    dx: int
    dy: int


@dataclass(frozen=True)
class MouseAbs:
    x: int
    y: int
    ref_width: int
    ref_height: int


@dataclass(frozen=True)
class Button:
    button: int
    down: bool


@dataclass(frozen=True)
class Scroll:
    amount: int
    horizontal: bool = False


@dataclass(frozen=True)
class Pad:
    index: int
    active_mask: int
    buttons: int
    left_trigger: int
    right_trigger: int
    left_x: int
    left_y: int
    right_x: int
    right_y: int


@dataclass(frozen=True)
class Text:
    text: str


Event = Key | MouseRel | MouseAbs | Button | Scroll | Pad | Text

_BODY = {
    KEY_DOWN: "<BhBh",
    KEY_UP: "<BhBh",
    MOUSE_ABS: ">hhhhh",
    MOUSE_REL: ">hh",
    BUTTON_DOWN: "<B",
    BUTTON_UP: "<B",
    SCROLL: ">hhh",
    HSCROLL: ">h",
    CONTROLLER: "<HhhHHBBhhhh",
    HAPTICS: "<H",
}


def parse(payload: bytes) -> Event | None:
    """One input message's payload -> an event; None for kinds the host ignores."""
    if len(payload) < 8:
        raise InputPacketError(f"input packet of {len(payload)} bytes has no header")
    size, magic = struct.unpack_from(">I", payload)[0], struct.unpack_from("<I", payload, 4)[0]
    body = payload[8 : 4 + size] if 4 + size <= len(payload) else payload[8:]
    if magic == TEXT:
        if not body or len(body) > MAX_TEXT_BYTES:
            raise InputPacketError(f"text of {len(body)} bytes (1..{MAX_TEXT_BYTES})")
        try:
            return Text(body.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InputPacketError(f"text is not UTF-8: {e.reason}") from None
    fmt = _BODY.get(magic)
    if fmt is None:
        return None
    need = struct.calcsize(fmt)
    if len(body) < need:
        raise InputPacketError(f"input kind {magic:#x} needs {need} bytes, got {len(body)}")
    f = struct.unpack_from(fmt, body)
    if magic in (KEY_DOWN, KEY_UP):
        code = f[1] & 0xFFFF
        # Clients put the VK in the low byte and may flag the high byte with 0x80.
        vk = code & 0xFF if code >> 8 in (0x00, 0x80) else -1
        return Key(vk, magic == KEY_DOWN, f[2])
    if magic == MOUSE_ABS:
        return MouseAbs(f[0], f[1], f[3] + 1, f[4] + 1)
    if magic == MOUSE_REL:
        return MouseRel(f[0], f[1])
    if magic in (BUTTON_DOWN, BUTTON_UP):
        return Button(f[0], magic == BUTTON_DOWN)
    if magic == SCROLL:
        return Scroll(f[0])
    if magic == HSCROLL:
        return Scroll(f[0], horizontal=True)
    if magic == CONTROLLER:
        return Pad(f[1], f[2] & 0xFFFF, f[4], f[5], f[6], f[7], f[8], f[9], f[10])
    return None  # haptics enable: nothing to do until rumble is wired
