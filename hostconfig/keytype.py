"""One configuration key: its type, default, rule, and the two forms of its value.

The config file stores raw strings; `Key.parse` turns one (or a JSON value from an API) into a
typed value or raises `ValueError` with a message that names the rule. `Key.check_json` is the
stricter door of the v1 file form, where a JSON `true` is a bool and `"true"` is not.

Every door (both APIs, the console form, the file) goes through `Key.parse`, which first refuses
any string that is not wholly printable (`require_printable`): the file is line-based, and a
character that any reader may take as a line break (`\n`, `\r`, VT, FF, FS/GS/RS, NEL, U+2028,
U+2029) or any other control character would let one value write a second key.
"""

from __future__ import annotations

import ipaddress
import json
import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from common import netranges

TRUE_WORDS = {"true", "yes", "on", "enable", "enabled", "1"}
FALSE_WORDS = {"false", "no", "off", "disable", "disabled", "0"}
MAX_STR = 4096


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # "bool" | "int" | "float" | "str" | "enum" | "json" | "list" | "url"
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    group: str = "general"
    restart: bool = True
    file_only: bool = False
    help: str = ""
    extra: dict = field(default_factory=dict)
    nullable: bool = False  # "unset" is a value of its own (an empty file value)
    secret: bool = False  # never in the env file, never shown in full
    max_len: int = MAX_STR
    item: str = ""  # list items: "cidr" | "origin" | ""; str keys: "ip" | "abspath"
    aliases: dict = field(default_factory=dict)  # enum spellings folded onto a choice
    fold_case: bool = False  # enum/str values are lower-cased before the check
    https_only: bool = False  # url keys: https, or plain http to a loopback address only
    env: str = ""  # environment variable read when the config file does not set the key
    # enum values the host knows but cannot do here: value -> why (a 400 names the reason)
    refused: dict = field(default_factory=dict)
    # The host stores this key but cannot act on any value but the default: why (a write of
    # another value is a 400 naming the reason; a file value other than the default reads as
    # the default and is reported). Every key either acts or says this (hostconfig/effects).
    refused_all: str = ""
    # Why writing this key gives code execution or a file of the writer's choosing (it runs
    # commands, or names a file the host writes, executes or serves): the admin API then asks
    # for `config:exec` beside `config:set` (access/admin.py). Empty for ordinary keys.
    exec_power: str = ""
    # int/float keys: one value outside min..max that switches the feature off (0 = never)
    off: float | None = None

    def parse(self, raw: Any) -> Any:
        """Typed value of `raw` (a file string or a JSON value); ValueError when out of rule."""
        require_printable(raw)
        if raw is None or (isinstance(raw, str) and raw.strip() == "" and self.type != "str"):
            if self.nullable or self.default is None:
                return None
            raise ValueError("must not be empty")
        parser = getattr(self, f"_parse_{self.type}")
        value = parser(raw)
        if self.refused_all and value is not None and value != self.default:
            raise ValueError(self.refusal())
        return value

    def refusal(self) -> str:
        """The 400 text of a refused_all key: which value is accepted and why no other."""
        accepted = self.render(self.default) or "unset"
        return f"not supported on this host: {self.refused_all} (only {accepted} is accepted)"

    def check_json(self, value: Any) -> Any:
        """Typed value of a JSON value from the v1 file form, with JSON types enforced."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError("must not be null")
        wanted = {
            "bool": (bool,),
            "int": (int,),
            "float": (int, float),
            "str": (str,),
            "enum": (str,),
            "url": (str,),
        }.get(self.type)
        if wanted and (not isinstance(value, wanted) or (bool not in wanted and value is True)):
            raise ValueError(f"must be {_type_word(self.type)}")
        if isinstance(value, bool) and self.type in ("int", "float"):
            raise ValueError(f"must be {_type_word(self.type)}")
        return self.parse(value)

    # -- per type -------------------------------------------------------------------------------
    def _parse_bool(self, raw):
        if isinstance(raw, bool):
            return self._not_refused(raw)
        if isinstance(raw, (dict, list)):
            raise ValueError("must be true or false")
        word = str(raw).strip().lower()
        if word in TRUE_WORDS:
            return self._not_refused(True)
        if word in FALSE_WORDS:
            return self._not_refused(False)
        raise ValueError("must be true or false")

    def _not_refused(self, value):
        if value in self.refused:
            raise ValueError(f"not supported on this host: {self.refused[value]}")
        return value

    def _parse_int(self, raw):
        if isinstance(raw, (bool, dict, list)) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError("must be an integer")
        try:
            value = int(raw) if isinstance(raw, float) else int(str(raw).strip())
        except ValueError:
            raise ValueError("must be an integer") from None
        return self._check_range(value)

    def _parse_float(self, raw):
        if isinstance(raw, (bool, dict, list)):
            raise ValueError("must be a number")
        try:
            value = float(str(raw).strip())
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return self._check_range(value)

    def _parse_enum(self, raw):
        if isinstance(raw, (dict, list, bool)):
            raise ValueError(f"must be one of {', '.join(self.choices)}")
        value = str(raw).strip()
        if self.fold_case:
            value = value.lower()
        value = self.aliases.get(value, value)
        if value in self.refused:
            raise ValueError(f"not supported on this host: {self.refused[value]}")
        if value not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}")
        return value

    def _parse_str(self, raw):
        if isinstance(raw, (dict, list)):
            raise ValueError("must be a string")
        value = raw if isinstance(raw, str) else json.dumps(raw)
        require_printable(value)
        if len(value) > self.max_len:
            raise ValueError(f"must be at most {self.max_len} characters")
        if self.fold_case:
            value = value.strip().lower()
        if self.nullable and not value.strip():
            return None
        if self.item == "abspath" and not value.strip().startswith("/"):
            raise ValueError("must be an absolute path")
        if self.item == "ip":
            value = value.strip()
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address") from None
        return value

    def _parse_url(self, raw):
        value = self._parse_str(raw)
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL")
        try:
            host = parts.hostname
        except ValueError:
            host = None
        if not host:
            raise ValueError("must name a host")
        if self.https_only and parts.scheme != "https" and not netranges.is_loopback_host(host):
            raise ValueError("must be an https:// URL (plain http only to a loopback address)")
        return value.strip()

    def _parse_list(self, raw):
        if isinstance(raw, list):
            if any(isinstance(x, (dict, list)) for x in raw):
                raise ValueError("must be a list of strings")
            items = [str(x).strip() for x in raw]
        elif isinstance(raw, (dict, bool)):
            raise ValueError("must be a comma-separated list")
        else:
            items = [x.strip() for x in str(raw).strip().strip("[]").split(",")]
        items = [x.strip("\"'") for x in items if x.strip("\"'")]
        for item in items:
            _check_item(self.item, item)
        if self.item == "keycode":
            _check_key_pairs(items)
        return items

    def parse_items_leniently(self, raw) -> list[str]:
        """The valid items of a list value, dropping the ones that break the item rule."""
        if self.item == "keycode":
            return []  # pairs: one dropped code would shift every pair after it
        good = []
        for item in str(raw).strip().strip("[]").split(","):
            item = item.strip().strip("\"'")
            try:
                if item:
                    _check_item(self.item, item)
                    good.append(item)
            except ValueError:
                continue
        return good

    def _parse_json(self, raw):
        if isinstance(raw, str):
            try:
                value = json.loads(raw) if raw.strip() else self.default
            except json.JSONDecodeError:
                raise ValueError("must be valid JSON") from None
            require_printable(value)  # `\u2028` escapes decode to what the raw text hid
        else:
            value = raw
        if self.item == "prep":
            _check_prep(value)
        return value

    def _check_range(self, value):
        if self.off is not None and value == self.off:
            return value
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            raise ValueError(f"must be {self.range_text()}")
        return value

    def range_text(self) -> str:
        """`5 to 1440`, or `0 (off) or 5 to 1440` for a key with an off value."""
        span = f"{self._fmt(self.min)} to {self._fmt(self.max)}"
        return span if self.off is None else f"{self._fmt(self.off)} (off) or {span}"

    def _fmt(self, v):
        if v is None:
            return "any"
        return str(int(v)) if self.type == "int" else str(float(v))

    def render(self, value: Any) -> str:
        """The file form of a typed value (empty for unset)."""
        if value is None:
            return ""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        if self.type == "json":
            return json.dumps(value, separators=(",", ":"))
        return str(value)


def _type_word(type_: str) -> str:
    return {
        "bool": "true or false",
        "int": "an integer",
        "float": "a number",
        "url": "a URL string",
    }.get(type_, "a string")


def require_printable(value: Any) -> None:
    """ValueError unless every string in `value` (nested lists and objects included, keys too)
    is wholly printable in the sense of `str.isprintable()`; the space is the only blank allowed.

    Stricter than "no line breaks" on purpose: tab, NBSP, zero-width and format characters and
    unassigned code points are refused too, so no reader of the file can disagree about where
    a value ends.
    """
    if isinstance(value, str):
        if not value.isprintable():
            bad = next(c for c in value if not c.isprintable())
            raise ValueError(
                "must contain only printable characters, no line breaks or control characters "
                f"(found U+{ord(bad):04X})"
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            require_printable(k)
            require_printable(v)
    elif isinstance(value, (list, tuple)):
        for item in value:
            require_printable(item)


MAX_PREP_STEPS = 16


def _check_prep(value: Any) -> None:
    """A prep-command list: `[{"do": str, "undo": str}, ...]`, as an app's `prep-cmd`."""
    if not isinstance(value, list) or len(value) > MAX_PREP_STEPS:
        raise ValueError(f'must be a JSON array of at most {MAX_PREP_STEPS} {{"do", "undo"}}')
    for i, step in enumerate(value):
        if not isinstance(step, dict) or set(step) - {"do", "undo"}:
            raise ValueError(f'[{i}] must be an object with only "do" and "undo"')
        if not all(isinstance(step.get(k, ""), str) for k in ("do", "undo")):
            raise ValueError(f'[{i}] "do" and "undo" must be strings')
        if not (step.get("do") or "").strip():
            raise ValueError(f'[{i}] needs a "do" command')
        require_printable(step)


def _check_item(kind: str, item: str) -> None:
    try:
        require_printable(item)
    except ValueError as exc:
        raise ValueError(f"items {exc}") from None
    if kind == "cidr":
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ValueError(f"{item!r} is not a CIDR subnet") from None
    elif kind == "keycode":
        key_code(item)
    elif kind == "origin":
        parts = urlsplit(item)
        if parts.scheme != "https" or not parts.netloc:
            raise ValueError(f"{item!r} is not an https:// origin")


KEY_CODE_MIN, KEY_CODE_MAX = 0x01, 0xFE  # Windows virtual-key codes, as clients send them


def key_code(item: str) -> int:
    """A key code of `keybindings` (`0x41` or `65`), or ValueError naming it."""
    try:
        code = int(item, 0)
    except ValueError:
        raise ValueError(f"{item!r} is not a key code (0x01 to 0xFE)") from None
    if not KEY_CODE_MIN <= code <= KEY_CODE_MAX:
        raise ValueError(f"{item!r} is not a key code (0x01 to 0xFE)")
    return code


def _check_key_pairs(items: list[str]) -> None:
    if len(items) % 2:
        raise ValueError("must be from,to pairs of key codes (an even count)")
    froms = [key_code(x) for x in items[0::2]]
    if len(set(froms)) != len(froms):
        raise ValueError("a key code is remapped twice")
