"""The host's own log: one file in the state dir that every process appends to.

Rotation is done by one process only (the supervisor's `log-rotation` periodic job): it renames
`host.log` to `host.log.1` (shifting older ones) and every process reopens the new file on its
next line, because the handlers are `WatchedFileHandler`s that notice the inode change.

Readers (`GET /api/logs`, `GET /api/v1/logs`) only ever read; a file vanishing under them
mid-rotation reads as empty, never as an error. Every line is redacted twice: by
`RedactingFilter` before it is written, and again when it is served (lines written by other
tools, or before a pattern existed, stay safe).

Sequence numbers of `GET /api/v1/logs` are byte positions in the whole log history: the base of
each file is kept in `logs/bases.json`, written after each rotation. They are monotonic and
unique but not contiguous.
"""

from __future__ import annotations

import json
import logging
import os
import re
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from common.files import atomic_write
from common.statedir import LOG_DIR, state_dir

LOG_NAME = "host.log"
BASES_FILE = "bases.json"
MAX_BYTES = 5 * 1024 * 1024  # rotate above this
BACKUPS = 3
# Late lines written into the renamed file by a process that has not reopened yet land in this
# many bytes after the recorded size, so they never share a seq with the new file's lines.
ROTATE_SLACK = 1024 * 1024
TEXT_TAIL_BYTES = 256 * 1024  # GET /api/logs
MSG_MAX_BYTES = 2048
PAGE_DEFAULT = 1000
PAGE_MAX = 1000

REDACTED = "[redacted]"

# Every pattern below runs in time linear in the line: a log line is outside input (a request
# path, a client name), and a key pattern such as `\b[\w-]*word[\w-]*` (tried at every dash) takes
# minutes on a long dash-separated line. Each pattern also only runs when a cheap substring probe
# says it could match, so an ordinary line costs a few passes in C.
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_WORDS = ("password", "passwd", "secret", "token", "apikey", "api_key", "api-key")
_SECRET_WORDS += ("authorization", "pin")
# key=value / key: value / "key": "value" where the key names a secret. The match starts at the
# first secret word of a run of [\w-] and the possessive `*+` takes the rest of the run in one go,
# so no later word of the same run is tried again; the separator and value are optional so that
# a run without them is consumed (and given back unchanged) rather than retried.
_SECRET_KEY = re.compile(
    r"""(?ix)
    (?P<key>(?:password|passwd|secret|token|api[_-]?key|authorization)[\w-]*+
      |\bpin(?=["']?\s*[=:]))
    (?:(?P<sep>["']?\s*[=:]\s*)(?P<value>"[^"]*"|'[^']*'|[^\s,;&}]+))?
    """
)
# A bare 64-hex run is token-shaped (also a fingerprint): keep a prefix to tell them apart.
_HEX64 = re.compile(r"\b([0-9a-fA-F]{8})[0-9a-fA-F]{56}\b")
_HEX_PROBE = bytes(ord("h") if chr(b) in string.hexdigits else ord(".") for b in range(256))
# Characters that `re` (?i) matches to a letter of the words above but str.lower() does not map
# to that letter; folded before the substring probes so a probe never misses what `re` finds.
_ODD_CHARS = "\u0130\u0131\u017f"
_ODD_CASE = str.maketrans(_ODD_CHARS, "iis")


def _secret_value(match: re.Match) -> str:
    if match.group("sep") is None:
        return match.group(0)
    return match.group("key") + match.group("sep") + REDACTED


def redact(text: str) -> str:
    probe = text
    if not text.isascii() and any(ch in text for ch in _ODD_CHARS):
        probe = text.translate(_ODD_CASE)
    probe = probe.lower()
    if "bearer" in probe or "basic" in probe:
        text = _BEARER.sub(r"\1 " + REDACTED, text)
    if ("=" in text or ":" in text) and any(word in probe for word in _SECRET_WORDS):
        text = _SECRET_KEY.sub(_secret_value, text)
    hexes = text.encode("utf-8", "surrogatepass").translate(_HEX_PROBE)
    if b"h" * 64 in hexes:
        text = _HEX64.sub(r"\1…" + REDACTED, text)
    return text


class UtcFormatter(logging.Formatter):
    """Log lines carry UTC times whatever the process's time zone, so readers can parse them."""

    converter = time.gmtime


class RedactingFilter(logging.Filter):
    """Attached to every handler: secrets never reach stderr or the file."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is logged as its raw template
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def log_dir() -> Path:
    """Where the bookkeeping (bases.json) lives: the state dir's logs/, wherever the log is."""
    return state_dir() / LOG_DIR


def live_log() -> Path:
    """The file every process of this host appends to: `log_path` as the host started with it
    (settings.LOG_FILE), else logs/host.log in the state dir."""
    if getattr(settings, "LOG_PATH_CHOSEN", False):
        return Path(settings.LOG_FILE)
    return log_dir() / LOG_NAME


def log_path(index: int = 0) -> Path:
    live = live_log()
    return live if index == 0 else live.with_name(f"{live.name}.{index}")


def _bases() -> dict[str, int]:
    try:
        data = json.loads((log_dir() / BASES_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int)}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def rotate_if_needed(max_bytes: int = MAX_BYTES) -> bool:
    """Rotate when the live file is above `max_bytes`. Only the supervisor calls this."""
    current = log_path(0)
    size = _size(current)
    if size <= max_bytes:
        return False
    bases = _bases()
    base0 = bases.get(LOG_NAME, 0)
    for index in range(BACKUPS, 0, -1):
        src = log_path(index - 1)
        if src.exists():
            os.replace(src, log_path(index))
    new_bases = {LOG_NAME: base0 + size + ROTATE_SLACK, f"{LOG_NAME}.1": base0}
    for index in range(2, BACKUPS + 1):
        old = bases.get(f"{LOG_NAME}.{index - 1}")
        if old is not None:
            new_bases[f"{LOG_NAME}.{index}"] = old
    atomic_write(log_dir() / BASES_FILE, json.dumps(new_bases))
    # Create the new file now so readers never see a gap; children reopen it on their next line.
    fd = os.open(current, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    return True


def read_tail(path: Path, max_bytes: int) -> bytes:
    """At most the last `max_bytes` of a file, from a line boundary; b"" when unreadable."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            start = max(0, size - max_bytes)
            fh.seek(start)
            data = fh.read(max_bytes)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return b""
    if start > 0:  # start at a line boundary
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data


def tail_text(max_bytes: int = TEXT_TAIL_BYTES) -> str:
    """The newest `max_bytes` of the log (newest last), whole lines only, redacted."""
    data = read_tail(log_path(0), max_bytes)
    if len(data) < max_bytes:
        older = read_tail(log_path(1), max_bytes - len(data))
        if older and not older.endswith(b"\n"):
            older += b"\n"
        data = older + data
    return redact(data.decode("utf-8", errors="replace"))


# -- structured paging (GET /api/v1/logs) ---------------------------------------------------

_LINE_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (\w+) \d+ ([^\s:]+): ?(.*)$")
_LEVELS = {"CRITICAL": "ERROR", "ERROR": "ERROR", "WARNING": "WARN", "INFO": "INFO"}


@dataclass
class LogEntry:
    seq: int
    ts_ms: int
    level: str
    target: str
    msg: str

    def as_dict(self) -> dict:
        return {
            "seq": self.seq,
            "ts_ms": self.ts_ms,
            "level": self.level,
            "target": self.target,
            "msg": self.msg,
        }


def _cut(msg: str) -> str:
    raw = msg.encode("utf-8")
    if len(raw) <= MSG_MAX_BYTES:
        return msg
    return raw[:MSG_MAX_BYTES].decode("utf-8", errors="ignore") + "…"


def _parse(data: bytes, base: int, max_entries: int | None = None) -> list[LogEntry]:
    """Entries of whole lines in `data` (which starts at byte `base` of the history).

    With `max_entries`, stops once one more entry has begun: the last kept entry then has all
    its continuation lines.
    """
    entries: list[LogEntry] = []
    offset = 0
    for raw in data.split(b"\n"):
        line_offset = offset
        offset += len(raw) + 1
        if not raw:
            continue
        line = raw.decode("utf-8", errors="replace")
        match = _LINE_RE.match(line)
        if match is None:
            if entries:  # a traceback or multi-line message continues the previous entry
                entries[-1].msg += "\n" + line
            continue
        if max_entries is not None and len(entries) >= max_entries:
            break
        stamp, millis, level, target, msg = match.groups()
        try:
            ts = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        except ValueError:
            continue
        entries.append(
            LogEntry(
                seq=base + line_offset + 1,
                ts_ms=int(ts.timestamp()) * 1000 + int(millis),
                level=_LEVELS.get(level, "DEBUG" if level == "DEBUG" else level[:5].upper()),
                target=target,
                msg=msg,
            )
        )
    return entries


def _read_lines_from(path: Path, start: int, max_bytes: int) -> tuple[bytes, int]:
    """Whole lines of `path` that begin at byte `start` or later, and the offset of the first.

    A last line without its newline is still being written by some process: left for later.
    """
    try:
        with open(path, "rb") as fh:
            if start > os.fstat(fh.fileno()).st_size:
                return b"", start
            pos = max(0, start - 1)
            fh.seek(pos)
            data = fh.read(max_bytes)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return b"", start
    offset = 0
    if start > 0:  # skip to the first line that begins at `start` or later
        cut = data.find(b"\n")
        if cut < 0:
            return b"", start
        data, offset = data[cut + 1 :], pos + cut + 1
    end = data.rfind(b"\n")
    return (data[: end + 1] if end >= 0 else b""), offset


def page(after: int = 0, limit: int = PAGE_DEFAULT) -> dict:
    """LogPage: entries with seq > `after`, oldest first, at most `limit`."""
    limit = min(max(limit, 1), PAGE_MAX)
    bases = _bases()
    entries: list[LogEntry] = []
    oldest_seq = None
    for index in (1, 0):  # the previous file, then the live one
        name = LOG_NAME if index == 0 else f"{LOG_NAME}.{index}"
        base = bases.get(name)
        if base is None:
            if index != 0:
                continue
            base = 0
        if oldest_seq is None:
            head, _ = _read_lines_from(log_path(index), 0, 64 * 1024)
            first = _parse(head, base, 1)
            oldest_seq = first[0].seq if first else None
        if len(entries) > limit:
            continue
        data, offset = _read_lines_from(
            log_path(index), max(0, after - base), MAX_BYTES + ROTATE_SLACK
        )
        parsed = _parse(data, base + offset, limit + 1 - len(entries))
        entries.extend(e for e in parsed if e.seq > after)
    entries.sort(key=lambda e: e.seq)
    chosen = entries[:limit]
    for entry in chosen:
        entry.msg = _cut(redact(entry.msg))
    dropped = bool(after) and oldest_seq is not None and after + 1 < oldest_seq
    return {
        "entries": [e.as_dict() for e in chosen],
        "next": chosen[-1].seq if chosen else after,
        "dropped": dropped,
    }
