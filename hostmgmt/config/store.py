"""The host config file (`host.conf` in the state dir): `key = value` lines.

A hand-edited file keeps its comments, blank lines, unknown keys and key order across writes.
Values that start with `[` may continue over several lines until the brackets balance.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostmgmt.config.schema import KEYS
from hostmgmt.lib.files import atomic_write
from hostmgmt.lib.statedir import state_dir

CONFIG_FILE = "host.conf"
_write_lock = threading.Lock()


def config_path() -> Path:
    return state_dir() / CONFIG_FILE


@dataclass
class Line:
    text: str  # original text (for comments, blanks and untouched entries)
    key: str | None = None
    value: str | None = None


def parse_lines(text: str) -> list[Line]:
    lines: list[Line] = []
    raw_lines = text.splitlines()
    i = 0
    while i < len(raw_lines):
        raw = raw_lines[i]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#") or "=" not in stripped:
            lines.append(Line(raw))
            i += 1
            continue
        key, value = stripped.split("=", 1)
        key, value = key.strip(), value.strip()
        block = [raw]
        if value.startswith("["):
            depth = value.count("[") - value.count("]")
            while depth > 0 and i + 1 < len(raw_lines):
                i += 1
                block.append(raw_lines[i])
                value += "\n" + raw_lines[i].strip()
                depth = value.count("[") - value.count("]")
        lines.append(Line("\n".join(block), key, value))
        i += 1
    return lines


def read_raw() -> dict[str, str]:
    """Every key of the file with its raw string value (the last occurrence wins)."""
    try:
        text = config_path().read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    return {ln.key: ln.value for ln in parse_lines(text) if ln.key and ln.value is not None}


def get(name: str) -> Any:
    """Typed value of one key: the file's value when valid, else the schema default."""
    spec = KEYS[name]
    raw = read_raw().get(name)
    if raw is None or raw == "":
        return spec.default
    try:
        return spec.parse(raw)
    except ValueError:
        return spec.default


def write(updates: dict[str, str | None]) -> None:
    """Set (or with None remove) raw values, keeping everything else of the file as it was."""
    with _write_lock:
        path = config_path()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        lines = parse_lines(text)
        pending = dict(updates)
        out: list[str] = []
        for ln in lines:
            if ln.key is not None and ln.key in pending:
                value = pending.pop(ln.key)
                if value is not None:
                    out.append(f"{ln.key} = {value}")
                continue
            out.append(ln.text)
        for name, value in pending.items():
            if value is not None:
                out.append(f"{name} = {value}")
        atomic_write(path, "\n".join(out) + "\n", mode=0o600)
