"""The hook configuration document: validation, the operator's `hooks.json`, and the cached
view every emitting process reads.

The whole document is validated as one: a single bad entry rejects a PUT (nothing written) and,
in a hand-edited file, disables every hook until the file is corrected. Readers notice changes
by (inode, mtime, size), so an edit applies from the next event without a restart.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from common.files import atomic_write
from common.statedir import state_path
from hooks import conf, event_kinds, ssrf

log = logging.getLogger("hooks.config")

HOOKS_FILE = "hooks.json"
ENTRY_FIELDS = {"on", "run", "webhook", "filter", "timeout_s", "debounce_ms", "hmac_secret_file"}
FILTER_FIELDS = {"client", "fingerprint", "plane", "app"}
MAX_ENTRIES = 256
MAX_TEXT = 4096
MAX_DEBOUNCE_MS = 86_400_000


class InvalidHooks(ValueError):
    """The document is invalid; `fields` maps a dotted path to what is wrong there."""

    def __init__(self, fields: dict[str, str]):
        self.fields = fields
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))


def hooks_path() -> Path:
    return state_path(HOOKS_FILE)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value, where: str, errors: dict, *, required: bool = False) -> None:
    if not isinstance(value, str):
        errors[where] = "must be a string"
    elif required and not value.strip():
        errors[where] = "must not be empty"
    elif len(value) > MAX_TEXT:
        errors[where] = f"must be at most {MAX_TEXT} characters"
    elif "\x00" in value:
        errors[where] = "must not contain NUL characters"


def _validate_entry(entry, at: str, errors: dict) -> None:
    if not isinstance(entry, dict):
        errors[at] = "must be an object"
        return
    for name in sorted(set(entry) - ENTRY_FIELDS):
        errors[f"{at}.{name}"] = "unknown field"
    if "on" not in entry:
        errors[f"{at}.on"] = "is required"
    else:
        _text(entry["on"], f"{at}.on", errors, required=True)
        if f"{at}.on" not in errors and not event_kinds.valid_pattern(entry["on"].strip()):
            errors[f"{at}.on"] = "must be a known event kind or a `<domain>.*` prefix"
    if "run" not in entry and "webhook" not in entry:
        errors[at] = "needs `run` and/or `webhook`"
    if "run" in entry:
        _text(entry["run"], f"{at}.run", errors, required=True)
    if "webhook" in entry:
        _text(entry["webhook"], f"{at}.webhook", errors, required=True)
        if f"{at}.webhook" not in errors:
            try:
                ssrf.check_url(entry["webhook"])
            except ssrf.UrlRefused as exc:
                errors[f"{at}.webhook"] = str(exc)
    if "filter" in entry:
        flt = entry["filter"]
        if not isinstance(flt, dict):
            errors[f"{at}.filter"] = "must be an object"
        else:
            for name, value in flt.items():
                where = f"{at}.filter.{name}"
                if name not in FILTER_FIELDS:
                    errors[where] = "unknown field (client, fingerprint, plane, app)"
                else:
                    _text(value, where, errors)
                    if name == "plane" and where not in errors and value not in event_kinds.PLANES:
                        errors[where] = "must be native or compat"
    if "timeout_s" in entry:
        value = entry["timeout_s"]
        if not _is_int(value) or not 1 <= value <= 600:
            errors[f"{at}.timeout_s"] = "must be an integer from 1 to 600"
    if "debounce_ms" in entry:
        value = entry["debounce_ms"]
        if not _is_int(value) or not 0 <= value <= MAX_DEBOUNCE_MS:
            errors[f"{at}.debounce_ms"] = f"must be an integer from 0 to {MAX_DEBOUNCE_MS}"
    if "hmac_secret_file" in entry:
        _text(entry["hmac_secret_file"], f"{at}.hmac_secret_file", errors, required=True)


def validate(doc) -> list[dict]:
    """The entries of a valid document; raises InvalidHooks naming every mistake."""
    if not isinstance(doc, dict):
        raise InvalidHooks({"body": 'must be an object {"hooks": [...]}'})
    errors: dict[str, str] = {}
    for name in sorted(set(doc) - {"hooks"}):
        errors[name] = "unknown field"
    entries = doc.get("hooks")
    if entries is None:
        errors["hooks"] = "is required"
    elif not isinstance(entries, list):
        errors["hooks"] = "must be an array"
    elif len(entries) > MAX_ENTRIES:
        errors["hooks"] = f"must have at most {MAX_ENTRIES} entries"
    else:
        for i, entry in enumerate(entries):
            _validate_entry(entry, f"hooks[{i}]", errors)
    if errors:
        raise InvalidHooks(errors)
    return entries


def parse_bytes(raw: bytes) -> list[dict]:
    if len(raw) > conf.HOOKS_DOC_MAX_BYTES:
        raise InvalidHooks({"body": f"must be at most {conf.HOOKS_DOC_MAX_BYTES} bytes"})
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidHooks({"body": f"is not valid JSON ({exc.__class__.__name__})"}) from None
    return validate(doc)


def save(entries: list[dict]) -> None:
    """Write a validated document; OSError propagates (the caller answers 500)."""
    text = json.dumps({"hooks": entries}, indent=2, ensure_ascii=False) + "\n"
    atomic_write(hooks_path(), text, mode=0o600)
    _cache.invalidate()


@dataclass(frozen=True)
class Snapshot:
    entries: tuple[dict, ...]
    valid: bool
    error: str = ""


class _Cache:
    def __init__(self):
        self.lock = threading.Lock()
        self.stamp: tuple | None = None
        self.snapshot = Snapshot((), True)

    def invalidate(self) -> None:
        with self.lock:
            self.stamp = None

    def get(self) -> Snapshot:
        path = hooks_path()
        try:
            st = path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = ("missing",)
        with self.lock:
            if stamp == self.stamp:
                return self.snapshot
            self.snapshot = _load(path, stamp)
            self.stamp = stamp
            return self.snapshot


def _load(path: Path, stamp: tuple) -> Snapshot:
    if stamp == ("missing",):
        return Snapshot((), True)
    try:
        entries = parse_bytes(path.read_bytes())
    except OSError as exc:
        log.error("hooks.json cannot be read (%s): every hook is disabled", exc.strerror)
        return Snapshot((), False, "hooks.json cannot be read")
    except InvalidHooks as exc:
        log.error("hooks.json is invalid, every hook is disabled until it is fixed: %s", exc)
        return Snapshot((), False, str(exc))
    return Snapshot(tuple(entries), True)


_cache = _Cache()


REMIND_EVERY_S = 60.0
_last_reminder = [0.0]


def current() -> Snapshot:
    """The operator's hooks as of now (an invalid file reads as no hooks, valid=False).

    While the file stays invalid, the log is reminded at most once a minute, so an operator
    tailing it sees why hooks are silent."""
    snapshot = _cache.get()
    if not snapshot.valid:
        now = time.monotonic()
        if now - _last_reminder[0] >= REMIND_EVERY_S:
            _last_reminder[0] = now
            log.error("hooks are disabled: hooks.json is invalid (%s)", snapshot.error)
    return snapshot


def builtin_entries() -> list[dict]:
    """HOST_ON_CONNECT_CMD / HOST_ON_DISCONNECT_CMD as two ordinary `run` hooks."""
    out = []
    if conf.on_connect_cmd():
        out.append({"on": event_kinds.CLIENT_CONNECTED, "run": conf.on_connect_cmd()})
    if conf.on_disconnect_cmd():
        out.append({"on": event_kinds.CLIENT_DISCONNECTED, "run": conf.on_disconnect_cmd()})
    return out
