"""Windows virtual-key codes (what GameStream clients send for keys) to X keysym names.

Clients send the key's position as a Windows VK code, not the character it types, so we map
to the keysym of the key at that place on a US layout and let the X server's keymap turn it
into a keycode. Letters map to lower-case keysyms: shift is a key of its own that the client
sends, and an upper-case keysym would make XTest press a phantom shift.
"""

from __future__ import annotations

import string

from Xlib import XK

XK.load_keysym_group("xf86")

_NAMED = {
    0x08: "BackSpace",
    0x09: "Tab",
    0x0C: "Clear",
    0x0D: "Return",
    0x10: "Shift_L",
    0x11: "Control_L",
    0x12: "Alt_L",
    0x13: "Pause",
    0x14: "Caps_Lock",
    0x1B: "Escape",
    0x20: "space",
    0x21: "Prior",
    0x22: "Next",
    0x23: "End",
    0x24: "Home",
    0x25: "Left",
    0x26: "Up",
    0x27: "Right",
    0x28: "Down",
    0x29: "Select",
    0x2A: "Print",
    0x2B: "Execute",
    0x2C: "Print",  # VK_SNAPSHOT
    0x2D: "Insert",
    0x2E: "Delete",
    0x2F: "Help",
    0x5B: "Super_L",
    0x5C: "Super_R",
    0x5D: "Menu",
    0x6A: "KP_Multiply",
    0x6B: "KP_Add",
    0x6C: "KP_Separator",
    0x6D: "KP_Subtract",
    0x6E: "KP_Decimal",
    0x6F: "KP_Divide",
    0x90: "Num_Lock",
    0x91: "Scroll_Lock",
    0xA0: "Shift_L",
    0xA1: "Shift_R",
    0xA2: "Control_L",
    0xA3: "Control_R",
    0xA4: "Alt_L",
    0xA5: "Alt_R",
    0xA6: "XF86Back",
    0xA7: "XF86Forward",
    0xA8: "XF86Refresh",
    0xA9: "XF86Stop",
    0xAA: "XF86Search",
    0xAB: "XF86Favorites",
    0xAC: "XF86HomePage",
    0xAD: "XF86AudioMute",
    0xAE: "XF86AudioLowerVolume",
    0xAF: "XF86AudioRaiseVolume",
    0xB0: "XF86AudioNext",
    0xB1: "XF86AudioPrev",
    0xB2: "XF86AudioStop",
    0xB3: "XF86AudioPlay",
    0xB4: "XF86Mail",
    0xBA: "semicolon",
    0xBB: "equal",
    0xBC: "comma",
    0xBD: "minus",
    0xBE: "period",
    0xBF: "slash",
    0xC0: "grave",
    0xDB: "bracketleft",
    0xDC: "backslash",
    0xDD: "bracketright",
    0xDE: "apostrophe",
    0xE2: "less",  # the extra key left of Z on ISO keyboards
}

VK_TO_KEYSYM: dict[int, str] = dict(_NAMED)
VK_TO_KEYSYM.update({0x30 + i: str(i) for i in range(10)})  # top-row digits
VK_TO_KEYSYM.update({0x41 + i: c for i, c in enumerate(string.ascii_lowercase)})
VK_TO_KEYSYM.update({0x60 + i: f"KP_{i}" for i in range(10)})  # numpad digits
VK_TO_KEYSYM.update({0x70 + i: f"F{i + 1}" for i in range(24)})  # F1..F24

VK_MIN, VK_MAX = 0x01, 0xFE


def keysym_name(vk: int) -> str | None:
    """The keysym name for a VK code; None for codes out of range or with no key."""
    if not isinstance(vk, int) or isinstance(vk, bool) or not VK_MIN <= vk <= VK_MAX:
        return None
    return VK_TO_KEYSYM.get(vk)


def keysym_value(name: str) -> int:
    """The keysym of an X keysym name, 0 when unknown. python-xlib spells the XF86 names with
    an underscore ("XF86_AudioMute"), so the media and browser keys need the second try."""
    sym = XK.string_to_keysym(name)
    if not sym and name.startswith("XF86"):
        sym = XK.string_to_keysym("XF86_" + name[4:])
    return sym


_CONTROL_CHARS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08}  # Return, Tab, BackSpace


def char_keysym(ch: str) -> int | None:
    """The X keysym that types `ch`: Latin-1 keysyms are the code point, everything else is
    0x01000000 + code point (X's Unicode keysyms); Return, Tab, BackSpace for their control
    characters; None for other control characters."""
    if len(ch) != 1:
        return None
    cp = ord(ch)
    if ch in _CONTROL_CHARS:
        return _CONTROL_CHARS[ch]
    if cp < 0x20 or 0x7F <= cp < 0xA0 or 0xD800 <= cp < 0xE000:
        return None
    return cp if cp < 0x100 else 0x01000000 | cp
