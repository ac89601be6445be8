"""Where the host keeps what it owns. Imports nothing from the apps, so every layer may use it."""

from __future__ import annotations

import os
from pathlib import Path

# Resolving walks every component of the path (an lstat each): 0.05-0.25 ms, and a request
# asks for the state dir five to ten times. Keyed by the variables it depends on, so a test
# or a child that changes HOST_STATE_DIR gets its own answer.
_resolved: dict[tuple[str, str], Path] = {}


def state_dir() -> Path:
    """The state directory: HOST_STATE_DIR, else ~/.local/state/hostmgmt."""
    raw = os.environ.get("HOST_STATE_DIR", "").strip()
    key = (raw, "" if raw else os.environ.get("HOME", ""))
    cached = _resolved.get(key)
    if cached is not None:
        return cached
    if raw:
        path = Path(raw).expanduser().resolve()
    else:
        path = (Path.home() / ".local" / "state" / "hostmgmt").resolve()
    if path.exists():  # a path made later may become a symlink: resolve it again until then
        if len(_resolved) > 64:
            _resolved.clear()
        _resolved[key] = path
    return path


def ensure_state_dir() -> Path:
    path = state_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def state_path(*parts: str) -> Path:
    return state_dir().joinpath(*parts)


# Well-known files, one name each.
DB_FILE = "db.sqlite3"
TLS_CERT_FILE = "tls-cert.pem"
TLS_KEY_FILE = "tls-key.pem"
MGMT_TOKEN_FILE = "mgmt-token"
PLUGIN_TOKEN_FILE = "plugin-token"
IDENTITY_FILE = "identity.json"
REDIS_SOCKET = "redis.sock"
LOG_DIR = "logs"
EVENTS_SEQ_FILE = "events-seq"  # the event bus's sequence floor (hooks/events.py)
