"""The host config file (`host.conf` in the state dir): `key = value` lines.

A hand-edited file keeps its comments, blank lines, unknown keys and key order across writes.

The reader is strict about what a line is, so that no value can ever reach the next line: lines
end at `\n` only (a trailing `\r` is tolerated), never at the other characters that
`str.splitlines()` takes as breaks. A line holding a control or line-break character is a bad
line: its key is not read and the line is reported (`problems()`, the preflight `host-config`
check, the console's config page, one log line per file version). Only list-valued keys
(`list`, `json`) may continue over several lines, while a `[` is open; a list that is not closed
before the next `key =` line, a bad line or the end of the file is reported and not read, and
the lines after it are read on their own.

Every write also regenerates the companion env file (`host.env`, `HOST_<KEY>=value` lines) that
the next process start may source. Updates are validated whole first: one bad value and nothing
is written.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shlex
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.files import atomic_write
from common.statedir import state_dir
from hostconfig.keytype import require_printable
from hostconfig.schema import KEYS, key

CONFIG_FILE = "host.conf"
ENV_FILE = "host.env"
_write_lock = threading.Lock()
log = logging.getLogger(__name__)


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
    number: int = 0  # 1-based number of the line the entry starts on
    problem: str = ""  # why the line is not read (a bad line); empty for a good one


@dataclass(frozen=True)
class Problem:
    """A line of the file the reader refused; `key` only when it is a plain key name."""

    line: int
    key: str | None
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f" ({self.key})" if self.key else "")
        return f"{CONFIG_FILE} {where}: {self.reason}"


_LIST_TYPES = ("list", "json")
_KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_STARTS_ENTRY = re.compile(r"\s*[A-Za-z0-9_.-]+\s*=")


def _bad_char(text: str) -> str:
    """Why `text` may not be one line of the file: a control or line/paragraph separator
    character (tab aside, as hand edits indent with it); empty when it may."""
    for c in text:
        if c != "\t" and unicodedata.category(c) in ("Cc", "Zl", "Zp"):
            return f"holds the control or line-break character U+{ord(c):04X}"
    return ""


def _depth(text: str) -> int:
    """Open `[` minus `]` of `text`, not counting brackets inside double-quoted strings."""
    depth, quoted, escaped = 0, False, False
    for c in text:
        if quoted:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
    return depth


def _split_lines(text: str) -> list[tuple[str, str]]:
    """(raw, body) per line: split on `\n` only; body is raw less one trailing `\r`."""
    raws = text.split("\n")
    if raws and raws[-1] == "":
        raws.pop()  # the newline that ends the last line
    return [(raw, raw[:-1] if raw.endswith("\r") else raw) for raw in raws]


def _name_of(body: str) -> str | None:
    name = body.split("=", 1)[0].strip() if "=" in body else ""
    return name if _KEY_NAME.fullmatch(name) else None


def parse_lines(text: str) -> list[Line]:
    """Every line of the file, entries with their key and value; bad lines carry `problem`."""
    lines: list[Line] = []
    split = _split_lines(text)
    i = 0
    while i < len(split):
        raw, body = split[i]
        number = i + 1
        i += 1
        bad = _bad_char(body)
        if bad:
            lines.append(Line(raw, number=number, problem=f"{bad}; the line is not read"))
            continue
        stripped = body.strip()
        if not stripped or stripped.startswith("#") or "=" not in stripped:
            lines.append(Line(raw, number=number))
            continue
        name, value = (part.strip() for part in stripped.split("=", 1))
        spec = key(name)
        if not (value.startswith("[") and _depth(value) > 0):
            lines.append(Line(raw, name, value, number))
            continue
        if spec is None or spec.type not in _LIST_TYPES:
            # A scalar that starts with `[` is just that one line (`host_name = [den` is fine).
            lines.append(Line(raw, name, value, number))
            continue
        block, end, cut = [raw], i, ""
        while end < len(split):
            more_raw, more = split[end]
            if _bad_char(more):
                cut = f"is cut by line {end + 1}, a bad line"
                break
            if _STARTS_ENTRY.match(more):
                cut = f"is not closed before line {end + 1}, which sets a key"
                break
            block.append(more_raw)
            value += " " + more.strip()
            end += 1
            if _depth(value) <= 0:
                break
        else:
            cut = "is not closed before the end of the file"
        if cut:
            problem = f"the list that starts here {cut}; the key is not read"
            lines.append(Line(raw, number=number, problem=problem))
            continue  # the lines after the opening one are read on their own
        lines.append(Line("\n".join(block), name, value, number))
        i = end
    return lines


def _problems(lines: list[Line]) -> list[Problem]:
    return [
        Problem(ln.number, _name_of(ln.text.split("\n", 1)[0]), ln.problem)
        for ln in lines
        if ln.problem
    ]


# Every request reads a key or two (origin class, CSRF origins, tokens): parse the file once
# per version of it. Writes replace the file by rename, so a new inode or mtime means new text.
_parsed: tuple[tuple, dict[str, str], list[Problem]] | None = None


def _read_text(path: Path) -> str:
    """The file as text, line ends untouched (`read_text` would turn a bare `\r` into `\n`)."""
    return path.read_bytes().decode("utf-8", errors="replace")


def _parse_file() -> tuple[dict[str, str], list[Problem]]:
    global _parsed
    path = config_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}, []
    version = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _parsed
    if cached is not None and cached[0] == version:
        return cached[1], cached[2]
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return {}, []
    lines = parse_lines(text)
    raw = {ln.key: ln.value for ln in lines if ln.key and ln.value is not None}
    found = _problems(lines)
    for problem in found:  # once per version of the file (and process), never the line itself
        log.warning("%s", problem)
    _parsed = (version, raw, found)
    return raw, found


def read_raw() -> dict[str, str]:
    """Every key of the file with its raw string value (the last occurrence wins)."""
    return dict(_parse_file()[0])


def problems() -> list[Problem]:
    """The lines of the file the reader refused (hand edits); their keys read as unset."""
    return list(_parse_file()[1])


def get(name: str) -> Any:
    """Typed value of one key: the file's value when valid, else the schema default."""
    return _typed(name, _parse_file()[0].get(name))  # read_raw's copy is for callers that keep it


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
    for name, value in updates.items():
        # The last door: callers validate, but nothing unprintable or multi-line is ever written.
        if not isinstance(name, str) or not _KEY_NAME.fullmatch(name):
            raise ConfigError({str(name): "not a key name"})
        try:
            require_printable(value)
        except ValueError as exc:
            raise ConfigError({name: str(exc)}) from None
    with _locked():
        path = config_path()
        try:
            text = _read_text(path)
        except FileNotFoundError:
            text = ""
        lines = parse_lines(text)
        pending = dict(updates)
        out: list[str] = []
        for ln in lines:
            if ln.key is not None and ln.key in updates:
                # The first line of the key takes the new value; later duplicates (which would
                # win on read) go, so the value written is the value read.
                if ln.key in pending:
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
