"""The host config file (`host.conf` in the state dir): `key = value` lines.

A hand-edited file keeps its comments, blank lines, unknown keys and key order across writes.
Values that start with `[` may continue over several lines until the brackets balance.

Every write also regenerates the companion env file (`host.env`, `HOST_<KEY>=value` lines) that
the next process start may source. Updates are validated whole first: one bad value and nothing
is written.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostmgmt.config.schema import KEYS, key
from hostmgmt.lib.files import atomic_write
from hostmgmt.lib.statedir import state_dir

CONFIG_FILE = "host.conf"
ENV_FILE = "host.env"
_write_lock = threading.Lock()


class ConfigError(ValueError):
    """A rejected update; `fields` maps each offending key to the rule it broke."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def env_path() -> Path:
    return state_dir() / ENV_FILE


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


# Every request reads a key or two (origin class, CSRF origins, tokens): parse the file once
# per version of it. Writes replace the file by rename, so a new inode or mtime means new text.
_parsed: tuple[tuple, dict[str, str]] | None = None


def read_raw() -> dict[str, str]:
    """Every key of the file with its raw string value (the last occurrence wins)."""
    global _parsed
    path = config_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    version = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _parsed
    if cached is not None and cached[0] == version:
        return dict(cached[1])
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    raw = {ln.key: ln.value for ln in parse_lines(text) if ln.key and ln.value is not None}
    _parsed = (version, raw)
    return dict(raw)


def get(name: str) -> Any:
    """Typed value of one key: the file's value when valid, else the schema default."""
    return _typed(name, read_raw().get(name))


def effective(name: str) -> Any:
    """Typed value of a key from the file, else from its environment variable (`Key.env`),
    else the default. Unlike `get`, a value that breaks the rule is an error, not the default:
    ConfigError names the key, where the value came from and the rule.
    """
    spec = key(name)
    if spec is None:
        raise KeyError(name)
    raw, source = read_raw().get(name), CONFIG_FILE
    if (raw is None or not raw.strip()) and spec.env:
        raw, source = os.environ.get(spec.env), spec.env
    if raw is None or not raw.strip():
        return spec.default
    try:
        return spec.parse(raw)
    except ValueError as exc:
        raise ConfigError({name: f"{exc} (value from {source})"}) from None


def _typed(name: str, raw: str | None) -> Any:
    spec = key(name)
    if spec is None:
        raise KeyError(name)
    if raw is None or (raw == "" and not spec.nullable):
        return spec.default
    try:
        return spec.parse(raw)
    except ValueError:
        if spec.type == "list":  # a hand-edited list keeps its good items
            return spec.parse_items_leniently(raw)
        return spec.default


def values() -> dict[str, Any]:
    """Typed value of every key of the schema, plus pattern keys present in the file."""
    raw = read_raw()
    names = list(KEYS) + [n for n in raw if n not in KEYS and key(n) is not None]
    return {name: _typed(name, raw.get(name)) for name in names}


def is_configured() -> bool:
    return config_path().exists()


def validate(updates: dict[str, Any], *, allow_file_only: bool = False) -> dict[str, Any]:
    """Typed values of a whole update, or ConfigError naming every key that breaks its rule.

    A value of None (or an empty string for a non-string key) means "back to the default".
    """
    typed: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, raw in updates.items():
        spec = key(name)
        if spec is None:
            errors[str(name)] = "unknown configuration key"
            continue
        if spec.file_only and not allow_file_only:
            errors[name] = "file-only key; edit the host config file"
            continue
        if isinstance(raw, dict) or (isinstance(raw, list) and spec.type != "list"):
            errors[name] = "must be a plain value, not an object or array"
            continue
        if raw is None or (isinstance(raw, str) and raw == "" and spec.type != "str"):
            typed[name] = None
            continue
        try:
            typed[name] = spec.parse(raw)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        raise ConfigError(errors)
    return typed


def update(typed: dict[str, Any]) -> None:
    """Persist validated values (None removes the line, so the default applies)."""
    rendered: dict[str, str | None] = {}
    for name, value in typed.items():
        spec = key(name)
        rendered[name] = None if value is None or spec is None else spec.render(value)
    write(rendered)


def render_env(raw: dict[str, str]) -> str:
    """The env file: every key the config sets, as `HOST_<KEY>=value`, secrets left out."""
    lines = [
        "# Generated from host.conf on every config write; the next host start may source it.",
        "# Edit host.conf (or use the APIs), not this file.",
    ]
    for name in sorted(raw):
        spec = key(name)
        if spec is None or spec.secret or spec.file_only:
            continue
        value = _typed(name, raw[name])
        if value is None:
            continue
        lines.append(f"HOST_{name.upper()}={shlex.quote(spec.render(value))}")
    return "\n".join(lines) + "\n"


@contextmanager
def _locked() -> Iterator[None]:
    """One writer at a time across the host's processes (daphne, workers, commands)."""
    with _write_lock:
        fd = os.open(state_dir() / f".{CONFIG_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def write(updates: dict[str, str | None]) -> None:
    """Set (or with None remove) raw values, keeping everything else of the file as it was."""
    with _locked():
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
        text = "\n".join(out) + "\n"
        atomic_write(path, text, mode=0o600)
        raw = {ln.key: ln.value for ln in parse_lines(text) if ln.key and ln.value is not None}
        atomic_write(env_path(), render_env(raw), mode=0o600)
