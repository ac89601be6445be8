"""Fleet tokens: what this host's admin mints for a fleet host that manages it (docs/fleet.md).

A fleet token is a principal of its own on the management API (`access/mgmt.py`
`FLEET_ALLOWED`): read status, sessions, library, GPUs, displays and events; end sessions;
nothing else. One per fleet host, by name, so one can be revoked without the others.

Kept in one file, `<state>/fleet/issued.json`, mode 0600, written atomically. Only the
SHA-256 of each token is stored: the plaintext is shown once, when minted. `lookup()`
compares a presented token with every entry in constant time, so neither which name nor how
much of a token matched leaks through timing.

Nothing here imports Django.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from access.secrets import is_token_shaped, new_token, tokens_equal
from common import filecache, statedir
from common.files import atomic_write

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "name must be 1-64 letters, digits, '.', '_', '-' (a letter or digit first)"
MAX_TOKENS = 64
FILE = "issued.json"
_lock = threading.Lock()


class FleetTokenError(ValueError):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Issued:
    name: str
    created: str  # ISO 8601, UTC


def path() -> Path:
    return statedir.state_path("fleet", FILE)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _parse(raw: bytes) -> dict[str, dict]:
    data = json.loads(raw)
    return {
        k: v
        for k, v in (data.items() if isinstance(data, dict) else [])
        if isinstance(k, str) and NAME_RE.fullmatch(k) and isinstance(v, dict)
        and isinstance(v.get("sha256"), str) and isinstance(v.get("created"), str)
    }  # fmt: skip


def _read() -> dict[str, dict]:
    """The entries, parsed once per version of the file (shared: copy before changing)."""
    return filecache.parsed(path(), _parse, {})


def _write(entries: dict[str, dict]) -> None:
    p = path()
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(p, json.dumps(entries, sort_keys=True) + "\n", mode=0o600)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise FleetTokenError(NAME_RULE)
    return name


def mint(name: object) -> str:
    """A token for `name`, returned once (only its digest is kept); 409 when the name is taken."""
    name = check_name(name)
    with _lock:
        entries = dict(_read())
        if name in entries:
            raise FleetTokenError(f"a fleet token named {name!r} exists; revoke it first", 409)
        if len(entries) >= MAX_TOKENS:
            raise FleetTokenError(f"at most {MAX_TOKENS} fleet tokens", 409)
        token = new_token()
        created = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
        entries[name] = {"sha256": _digest(token), "created": created}
        _write(entries)
        return token


def listing() -> list[Issued]:
    return [Issued(name, v["created"]) for name, v in sorted(_read().items())]


def revoke(name: object) -> None:
    """Revoked at once: the next request with it is a 401. 404 for an unknown name."""
    name = check_name(name)
    with _lock:
        entries = dict(_read())
        if entries.pop(name, None) is None:
            raise FleetTokenError(f"no fleet token named {name!r}", 404)
        _write(entries)


def lookup(presented: str) -> str | None:
    """The name a presented token was minted under, or None. Every entry is compared."""
    if not is_token_shaped(presented):
        return None
    digest = _digest(presented)
    found = None
    for name, entry in _read().items():
        if tokens_equal(digest, entry["sha256"]):
            found = name
    return found
