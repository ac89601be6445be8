"""A minimal US keymap, as XKB text, for the virtual keyboard, and keysym -> evdev lookups.

zwp_virtual_keyboard_v1 sends Linux evdev key codes and must first hand the compositor a keymap
that says what they mean; the compositor forwards it to clients (Xwayland compiles it with
xkbcomp, so key names stay within XKB's four characters: <I9>..<I255>, the XKB code being the
evdev code + 8). Keys follow the US layout on their evdev positions, so the keysym names that
media.input.keymap produces for the client's VK codes find their key here. Spare codes
(evdev 200-247) have no symbols; `WlrInput.type_text` binds one to a character's keysym and
uploads the keymap again, as XTest's path does with spare X keycodes.
"""

from __future__ import annotations

import string

from Xlib import XK

from media.input.keymap import keysym_value

XK.load_keysym_group("xf86")
XK.load_keysym_group("xkb")

# evdev code -> (level 1 keysym name, level 2 keysym name or None)
_KEYS: dict[int, tuple[str, str | None]] = {
    1: ("Escape", None),
    12: ("minus", "underscore"),
    13: ("equal", "plus"),
    14: ("BackSpace", None),
    15: ("Tab", "ISO_Left_Tab"),
    26: ("bracketleft", "braceleft"),
    27: ("bracketright", "braceright"),
    28: ("Return", None),
    29: ("Control_L", None),
    39: ("semicolon", "colon"),
    40: ("apostrophe", "quotedbl"),
    41: ("grave", "asciitilde"),
    42: ("Shift_L", None),
    43: ("backslash", "bar"),
    51: ("comma", "less"),
    52: ("period", "greater"),
    53: ("slash", "question"),
    54: ("Shift_R", None),
    55: ("KP_Multiply", None),
    56: ("Alt_L", None),
    57: ("space", None),
    58: ("Caps_Lock", None),
    69: ("Num_Lock", None),
    70: ("Scroll_Lock", None),
    71: ("KP_7", None),
    72: ("KP_8", None),
    73: ("KP_9", None),
    74: ("KP_Subtract", None),
    75: ("KP_4", None),
    76: ("KP_5", None),
    77: ("KP_6", None),
    78: ("KP_Add", None),
    79: ("KP_1", None),
    80: ("KP_2", None),
    81: ("KP_3", None),
    82: ("KP_0", None),
    83: ("KP_Decimal", None),
    86: ("less", "greater"),  # KEY_102ND, the ISO key left of Z
    87: ("F11", None),
    88: ("F12", None),
    96: ("KP_Enter", None),
    97: ("Control_R", None),
    98: ("KP_Divide", None),
    99: ("Print", None),
    100: ("Alt_R", None),
    102: ("Home", None),
    103: ("Up", None),
    104: ("Prior", None),
    105: ("Left", None),
    106: ("Right", None),
    107: ("End", None),
    108: ("Down", None),
    109: ("Next", None),
    110: ("Insert", None),
    111: ("Delete", None),
    113: ("XF86AudioMute", None),
    114: ("XF86AudioLowerVolume", None),
    115: ("XF86AudioRaiseVolume", None),
    119: ("Pause", None),
    121: ("KP_Separator", None),
    125: ("Super_L", None),
    126: ("Super_R", None),
    127: ("Menu", None),
    128: ("XF86Stop", None),
    138: ("Help", None),
    155: ("XF86Mail", None),
    156: ("XF86Favorites", None),
    158: ("XF86Back", None),
    159: ("XF86Forward", None),
    163: ("XF86AudioNext", None),
    164: ("XF86AudioPlay", None),
    165: ("XF86AudioPrev", None),
    166: ("XF86AudioStop", None),
    172: ("XF86HomePage", None),
    173: ("XF86Refresh", None),
    217: ("XF86Search", None),
}
for _row, _start in (("qwertyuiop", 16), ("asdfghjkl", 30), ("zxcvbnm", 44)):
    for _i, _c in enumerate(_row):
        _KEYS[_start + _i] = (_c, _c.upper())
for _i in range(10):
    _KEYS[59 + _i] = (f"F{_i + 1}", None)
for _i in range(12):
    _KEYS[183 + _i] = (f"F{_i + 13}", None)

# The shifted digits' keysym names ("!" is "exclam" in XKB text).
_PUNCT_NAMES = {
    "!": "exclam",
    "@": "at",
    "#": "numbersign",
    "$": "dollar",
    "%": "percent",
    "^": "asciicircum",
    "&": "ampersand",
    "*": "asterisk",
    "(": "parenleft",
    ")": "parenright",
}
for _i, (_d, _s) in enumerate(zip("1234567890", "!@#$%^&*()", strict=True)):
    _KEYS[2 + _i] = (_d, _PUNCT_NAMES[_s])

SPARE_CODES = list(range(200, 248))  # evdev codes with no symbols, for characters off the map
MODIFIERS = {
    "Shift": (42, 54),
    "Lock": (58,),
    "Control": (29, 97),
    "Mod1": (56, 100),
    "Mod2": (69,),
    "Mod4": (125, 126),
}


keysym = keysym_value  # the XKB names of the keymap are X keysym names


_SYM_CODE: dict[int, tuple[int, int]] = {}  # keysym -> (evdev code, level 0/1)
for _code, (_l1, _l2) in sorted(_KEYS.items()):
    for _lvl, _name in ((0, _l1), (1, _l2)):
        if _name is None:
            continue
        _sym = keysym(_name)
        if not _sym:
            raise RuntimeError(f"keysym {_name!r} unknown to python-xlib")
        _SYM_CODE.setdefault(_sym, (_code, _lvl))

SHIFT_CODE = 42
# client button (1 left, 2 middle, 3 right, 4 back, 5 forward) -> evdev BTN_LEFT, BTN_MIDDLE,
# BTN_RIGHT, BTN_SIDE, BTN_EXTRA
EVDEV_BUTTONS = {1: 0x110, 2: 0x112, 3: 0x111, 4: 0x113, 5: 0x114}


def code_for_keysym_name(name: str) -> int | None:
    """The evdev code of the key whose first level is keysym `name` ("a", "Return"...)."""
    sym = keysym(name)
    found = _SYM_CODE.get(sym) if sym else None
    return found[0] if found else None


def code_for_keysym(sym: int) -> tuple[int, bool] | None:
    """(evdev code, needs Shift) for a keysym on this layout, or None."""
    found = _SYM_CODE.get(sym)
    return (found[0], found[1] == 1) if found else None


def _type(l1: str, l2: str | None) -> str:
    if l2 is None:
        return "ONE_LEVEL"
    if len(l1) == 1 and l1 in string.ascii_lowercase:
        return "ALPHABETIC"
    return "TWO_LEVEL"


def keymap_text(extra: dict[int, int] | None = None) -> str:
    """The XKB keymap; `extra` binds spare evdev codes to keysyms (both levels)."""
    codes = "\n".join(f"        <I{c + 8}> = {c + 8};" for c in range(1, 248))
    syms = []
    for code, (l1, l2) in sorted(_KEYS.items()):
        levels = l1 if l2 is None else f"{l1}, {l2}"
        syms.append(f'    key <I{code + 8}> {{ type = "{_type(l1, l2)}", [ {levels} ] }};')
    for code, sym in sorted((extra or {}).items()):
        syms.append(f'    key <I{code + 8}> {{ type = "TWO_LEVEL", [ 0x{sym:x}, 0x{sym:x} ] }};')
    mods = "\n".join(
        f"    modifier_map {mod} {{ {', '.join(f'<I{c + 8}>' for c in cs)} }};"
        for mod, cs in MODIFIERS.items()
    )
    return f"""xkb_keymap {{
    xkb_keycodes "streaming" {{
        minimum = 8;
        maximum = 255;
{codes}
    }};
    xkb_types "streaming" {{
        virtual_modifiers NumLock;
        type "ONE_LEVEL" {{
            modifiers = none;
            level_name[Level1] = "Any";
        }};
        type "TWO_LEVEL" {{
            modifiers = Shift;
            map[Shift] = Level2;
            level_name[Level1] = "Base";
            level_name[Level2] = "Shift";
        }};
        type "ALPHABETIC" {{
            modifiers = Shift + Lock;
            map[Shift] = Level2;
            map[Lock] = Level2;
            level_name[Level1] = "Base";
            level_name[Level2] = "Caps";
        }};
    }};
    xkb_compatibility "streaming" {{
        virtual_modifiers NumLock;
        interpret Shift_L {{ action = SetMods(modifiers = Shift); }};
        interpret Shift_R {{ action = SetMods(modifiers = Shift); }};
        interpret Control_L {{ action = SetMods(modifiers = Control); }};
        interpret Control_R {{ action = SetMods(modifiers = Control); }};
        interpret Alt_L {{ action = SetMods(modifiers = Mod1); }};
        interpret Alt_R {{ action = SetMods(modifiers = Mod1); }};
        interpret Super_L {{ action = SetMods(modifiers = Mod4); }};
        interpret Super_R {{ action = SetMods(modifiers = Mod4); }};
        interpret Caps_Lock {{ action = LockMods(modifiers = Lock); }};
        interpret Num_Lock {{ virtualModifier = NumLock; action = LockMods(modifiers = NumLock); }};
    }};
    xkb_symbols "streaming" {{
        name[Group1] = "English (US)";
{chr(10).join(syms)}
{mods}
    }};
}};
"""
