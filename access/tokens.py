"""The management and plugin tokens: created by the supervisor, read by every process.

Each token file holds one shell assignment, `HOST_MGMT_TOKEN=<64 hex>`, mode 0600, so an
operator can `. "$HOST_STATE_DIR/mgmt-token"`. An environment variable of the same name wins
over the file and is never written to disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from access.secrets import is_token_shaped, new_token
from common.files import atomic_write
from common.statedir import MGMT_TOKEN_FILE, PLUGIN_TOKEN_FILE, state_dir


@dataclass(frozen=True)
class TokenSpec:
    env_name: str
    file_name: str

    @property
    def path(self) -> Path:
        return state_dir() / self.file_name


MGMT = TokenSpec("HOST_MGMT_TOKEN", MGMT_TOKEN_FILE)
PLUGIN = TokenSpec("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN_FILE)


class TokenError(ValueError):
    pass


def _from_env(spec: TokenSpec) -> str | None:
    raw = os.environ.get(spec.env_name)
    if raw is None or not raw.strip():
        return None
    token = raw.strip().lower()
    if not is_token_shaped(token):
        raise TokenError(f"{spec.env_name} must be 64 hex characters")
    return token


def _from_file(spec: TokenSpec) -> str | None:
    try:
        text = spec.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        value = line.split("=", 1)[1] if line.startswith(f"{spec.env_name}=") else line
        value = value.strip().strip("'\"").lower()
        if not is_token_shaped(value):
            raise TokenError(f"{spec.path} does not hold a 64-hex {spec.env_name}")
        return value
    return None


def ensure_token(spec: TokenSpec) -> str:
    """The token in force; generates and writes the file (0600) when neither source has one."""
    token = _from_env(spec) or _from_file(spec)
    if token:
        return token
    token = new_token()
    atomic_write(spec.path, f"{spec.env_name}={token}\n", mode=0o600)
    return token


# Daphne reads the token on each request; cache it by file mtime so edits apply at once.
_cache: dict[str, tuple[float | None, str | None]] = {}


def current_token(spec: TokenSpec) -> str | None:
    """The token a request must present, or None when none is configured."""
    env_token = _from_env(spec)
    if env_token:
        return env_token
    try:
        mtime = spec.path.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    cached = _cache.get(spec.env_name)
    if cached and cached[0] == mtime:
        return cached[1]
    try:
        token = _from_file(spec)
    except TokenError:
        token = None
    _cache[spec.env_name] = (mtime, token)
    return token
