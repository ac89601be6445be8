"""Every host configuration key: type, default, range or allowed values, restart and file-only.

The config file stores raw strings; `Key.parse` turns one into a typed value or raises
`ValueError` with a message that names the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TRUE_WORDS = {"true", "yes", "on", "enable", "enabled", "1"}
FALSE_WORDS = {"false", "no", "off", "disable", "disabled", "0"}


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # "bool" | "int" | "float" | "str" | "enum" | "json" | "list"
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    group: str = "general"
    restart: bool = True
    file_only: bool = False
    help: str = ""
    extra: dict = field(default_factory=dict)

    def parse(self, raw: Any) -> Any:
        """Typed value of `raw` (a file string or a JSON value); ValueError when out of rule."""
        if self.type == "bool":
            if isinstance(raw, bool):
                return raw
            word = str(raw).strip().lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
            raise ValueError("must be true or false")
        if self.type == "int":
            if isinstance(raw, bool):
                raise ValueError("must be an integer")
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ValueError("must be an integer") from None
            return self._check_range(value)
        if self.type == "float":
            if isinstance(raw, bool):
                raise ValueError("must be a number")
            try:
                value = float(str(raw).strip())
            except ValueError:
                raise ValueError("must be a number") from None
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError("must be a finite number")
            return self._check_range(value)
        if self.type == "enum":
            value = str(raw).strip()
            if value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            return value
        if self.type == "list":
            if isinstance(raw, list):
                items = [str(x).strip() for x in raw]
            else:
                items = [x.strip() for x in str(raw).split(",")]
            return [x for x in items if x]
        if self.type == "json":
            if isinstance(raw, str):
                try:
                    return json.loads(raw) if raw.strip() else self.default
                except json.JSONDecodeError:
                    raise ValueError("must be valid JSON") from None
            return raw
        if isinstance(raw, (dict, list)):
            raise ValueError("must be a string")
        value = str(raw)
        if any(ord(c) < 32 for c in value):
            raise ValueError("must not contain control characters")
        return value

    def _check_range(self, value):
        if self.min is not None and value < self.min:
            raise ValueError(f"must be {self._fmt(self.min)} to {self._fmt(self.max)}")
        if self.max is not None and value > self.max:
            raise ValueError(f"must be {self._fmt(self.min)} to {self._fmt(self.max)}")
        return value

    @staticmethod
    def _fmt(v):
        if v is None:
            return "any"
        return str(int(v)) if float(v).is_integer() and not isinstance(v, float) else str(v)

    def render(self, value: Any) -> str:
        """The file form of a typed value."""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        if self.type == "json":
            return json.dumps(value, separators=(",", ":"))
        return str(value)


def _keys(*keys: Key) -> dict[str, Key]:
    return {k.name: k for k in keys}


# The keys the platform itself reads. The host-state work extends this table to every key of
# the spec; nothing else in the host defines a key.
KEYS: dict[str, Key] = _keys(
    Key("port", "int", 47989, 1029, 65514, group="network", help="base streaming port"),
    Key(
        "compat_enabled",
        "bool",
        True,
        group="network",
        restart=False,
        file_only=True,
        help="compatibility-plane broadcast switch (mDNS); written only by PUT /api/v1/host/compat",
    ),
    Key("sunshine_name", "str", "", group="general", help="host name shown to clients"),
    Key(
        "origin_web_ui_allowed",
        "enum",
        "lan",
        choices=("pc", "lan", "wan"),
        group="security",
        restart=False,
        help="where the web UI and admin API may be reached from",
    ),
    Key(
        "csrf_allowed_origins",
        "list",
        [],
        group="security",
        restart=False,
        help="extra https origins allowed to make browser writes",
    ),
    Key(
        "api_tokens",
        "json",
        [],
        group="access",
        restart=False,
        file_only=True,
        help="scoped API tokens, entries `name hash salt scopes`",
    ),
)


def key(name: str) -> Key | None:
    return KEYS.get(name)
