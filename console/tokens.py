"""Scoped API token administration on top of `access.api_tokens`.

Adds what the storage layer leaves to its callers: a cross-process lock (daphne, the Celery
workers and `manage.py mint_token` may all write `api_tokens` at once, and a lost update would
silently resurrect a revoked token), and the rules that a token holder can only hand out scopes
it holds itself (a `tokens:manage` token must not be a path to `*`) and can only see and revoke
tokens whose scopes are a subset of its own (it must not learn of, or cut off, the tokens of
callers with more reach than it).
"""

from __future__ import annotations

import fcntl
from contextlib import contextmanager

from access import api_tokens
from access.scopes import ADMIN
from common.errors import DomainError
from common.statedir import state_path

LOCK_FILE = ".api-tokens.lock"


class TokenError(DomainError, ValueError):
    """The request is invalid (400); `status` says otherwise where needed."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message, status=status)


@contextmanager
def _locked():
    with open(state_path(LOCK_FILE), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _within(token: api_tokens.StoredToken, reach: frozenset[str] | None) -> bool:
    """Whether a caller with scopes `reach` (None: admin) may see and revoke `token`."""
    return reach is None or ADMIN in reach or set(token.scopes) <= reach


def list_tokens(reach: frozenset[str] | None = None) -> list[dict]:
    """The tokens a caller with scopes `reach` (None: admin) may see."""
    return [
        {"name": t.name, "scopes": list(t.scopes)} for t in api_tokens.load() if _within(t, reach)
    ]


def mint(name, scopes, granted_by: frozenset[str] | None = None) -> str:
    """Mint a token; `granted_by` is the caller's scopes, None for an admin caller."""
    # `fullmatch`: the name rule's `$` also matches before a trailing newline ("ci\n").
    if not isinstance(name, str) or not api_tokens.NAME_RE.fullmatch(name):
        raise TokenError("name must be 1-64 characters of letters, digits, '.', '_', '-'")
    if granted_by is not None and ADMIN not in granted_by and isinstance(scopes, list):
        beyond = sorted({s for s in scopes if isinstance(s, str)} - granted_by)
        if beyond:
            raise TokenError(
                f"a token can only grant scopes it holds itself: {', '.join(beyond)}", 403
            )
    with _locked():
        try:
            return api_tokens.mint(name, scopes)
        except api_tokens.TokenRequestError as exc:
            raise TokenError(str(exc)) from None


def revoke(name, reach: frozenset[str] | None = None) -> None:
    """Revoke a token; one beyond the caller's `reach` (None: admin) answers as unknown, so
    its existence is not revealed either."""
    if not isinstance(name, str) or not api_tokens.NAME_RE.fullmatch(name):
        raise TokenError("invalid token name")
    with _locked():
        target = next((t for t in api_tokens.load() if t.name == name), None)
        if target is None or not _within(target, reach) or not api_tokens.revoke(name):
            raise TokenError(f"no token named {name!r}", 404)
