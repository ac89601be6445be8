"""Where the host keeps what it owns. Imports nothing from the apps, so every layer may use it."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """The state directory: HOST_STATE_DIR, else ~/.local/state/hostmgmt."""
    raw = os.environ.get("HOST_STATE_DIR", "").strip()
    if raw:
        return Path(raw).expanduser().resolve()
    return (Path.home() / ".local" / "state" / "hostmgmt").resolve()


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
