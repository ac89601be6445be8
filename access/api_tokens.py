"""Scoped API tokens of the admin API, stored in the file-only config key `api_tokens`.

Each stored entry is the string `name hash salt scopes`: `hash` = hex SHA-256 of
`plaintext + ":" + salt`, `scopes` comma-separated. The plaintext (64 hex) is never stored.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from access.scopes import SCOPES
from access.secrets import is_token_shaped, new_token
from hostconfig import store
from hostconfig.schema import KEYS

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # always fullmatch: `$` admits "\n"


@dataclass(frozen=True)
class StoredToken:
    name: str
    hash: str
    salt: str
    scopes: tuple[str, ...]

    def render(self) -> str:
        return f"{self.name} {self.hash} {self.salt} {','.join(self.scopes)}"

    def matches(self, plaintext: str) -> bool:
        return hmac.compare_digest(hash_token(plaintext, self.salt), self.hash)


def hash_token(plaintext: str, salt: str) -> str:
    return hashlib.sha256(f"{plaintext}:{salt}".encode()).hexdigest()


def parse_entry(entry: str) -> StoredToken | None:
    parts = str(entry).split()
    if len(parts) != 4 or not NAME_RE.fullmatch(parts[0]):
        return None
    scopes = tuple(s for s in parts[3].split(",") if s)
    return StoredToken(parts[0], parts[1].lower(), parts[2], scopes)


def load() -> list[StoredToken]:
    raw = store.get("api_tokens")
    if not isinstance(raw, list):
        return []
    return [t for t in (parse_entry(e) for e in raw) if t is not None]


def save(entries: list[StoredToken]) -> None:
    store.write({"api_tokens": KEYS["api_tokens"].render([t.render() for t in entries])})


def authenticate(plaintext: str) -> StoredToken | None:
    """The stored token whose hash matches, checked against every entry in constant time each."""
    if not is_token_shaped(plaintext):
        return None
    found = None
    for entry in load():
        if entry.matches(plaintext) and found is None:
            found = entry
    return found


class TokenRequestError(ValueError):
    pass


def mint(name: str, scopes: list[str]) -> str:
    """Create a token and return its plaintext (shown once)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise TokenRequestError("name must be 1-64 characters of letters, digits, '.', '_', '-'")
    if not isinstance(scopes, list) or not scopes:
        raise TokenRequestError("scopes must be a non-empty array")
    unknown = [s for s in scopes if not isinstance(s, str) or s not in SCOPES]
    if unknown:
        raise TokenRequestError(f"unknown scopes: {', '.join(map(str, unknown))}")
    entries = load()
    if any(e.name == name for e in entries):
        raise TokenRequestError(f"a token named {name!r} already exists")
    plaintext = new_token()
    salt = secrets.token_hex(16)
    entries.append(
        StoredToken(name, hash_token(plaintext, salt), salt, tuple(dict.fromkeys(scopes)))
    )
    save(entries)
    return plaintext


def revoke(name: str) -> bool:
    entries = load()
    kept = [e for e in entries if e.name != name]
    if len(kept) == len(entries):
        return False
    save(kept)
    return True
