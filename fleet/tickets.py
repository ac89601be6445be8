"""The member's side of a placement: a one-use ticket the fleet host mints for a player, the
approval a browser gets for it, and that approval's one use on `/native/offer`. docs/fleet.md.

1. The fleet host (with the token it holds for this member) mints a ticket for one app and one
   player name. Only the ticket's SHA-256 is stored (`fleet:ticket:<hash>`, `TICKET_TTL_S`):
   Redis never holds the secret, and a lookup by hash compares nothing by time.
2. The browser brings the ticket in a form POST body (`/play/fleet`); redeeming deletes it in
   the same transaction that reads it (one use), and stores an approval
   (`fleet:approval:<id>`, `APPROVAL_TTL_S`) whose id rides in a signed cookie bound to the app.
3. The browser's first offer with that cookie for that app takes the approval (again
   read-and-delete) and its device is paired as an operator approval pairs it. Not bound to
   the fingerprint the fleet host knows: a browser's identity is kept per origin, so on this
   host's page the same browser offers another certificate. What binds it is the cookie: set
   only in the browser that brought the ticket, HttpOnly, used once.

The ticket and the approval id are never logged and never appear in a URL.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass

from django.core import signing

from common import redis_client
from common.errors import Invalid, NotFound
from common.names import sanitize_name
from streaming.sessions import apps

TICKET_TTL_S = 120
APPROVAL_TTL_S = 300
COOKIE = "fleet_approval"
SALT = "fleet.approval"
TICKET_RE = re.compile(r"[A-Za-z0-9_-]{43}")
TICKET_KEY = "fleet:ticket:"
APPROVAL_KEY = "fleet:approval:"


@dataclass(frozen=True)
class Vouched:
    """What the fleet host vouched for: a player of this app, under this name."""

    app: str
    name: str
    by: str  # the fleet host's name, shown to the player ("placed here by ...")

    def dump(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def load(cls, raw) -> Vouched | None:
        try:
            data = json.loads(raw)
            return cls(**{k: str(data[k]) for k in ("app", "name", "by")})
        except (TypeError, ValueError, KeyError):
            return None


def _hash(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()


def _take(key: str) -> str | None:
    """Read and delete `key` in one transaction: of two callers, one gets it."""
    pipe = redis_client.client().pipeline()
    pipe.get(key)
    pipe.delete(key)
    value, deleted = pipe.execute()
    return value if deleted else None


def mint(vouched: Vouched) -> str:
    ticket = secrets.token_urlsafe(32)  # 43 characters
    redis_client.client().set(TICKET_KEY + _hash(ticket), vouched.dump(), ex=TICKET_TTL_S)
    return ticket


def redeem(ticket) -> tuple[Vouched, str] | None:
    """Use the ticket once: what it vouched for and the signed cookie value of its approval,
    or None (unknown, expired, used or malformed)."""
    if not isinstance(ticket, str) or not TICKET_RE.fullmatch(ticket):
        return None
    vouched = Vouched.load(_take(TICKET_KEY + _hash(ticket)))
    if vouched is None:
        return None
    approval = secrets.token_urlsafe(24)
    redis_client.client().set(APPROVAL_KEY + approval, vouched.dump(), ex=APPROVAL_TTL_S)
    return vouched, signing.dumps({"id": approval, "app": vouched.app}, salt=SALT)


def _approval_id(cookie, app: str | None = None) -> str | None:
    if not isinstance(cookie, str) or not cookie or len(cookie) > 512:
        return None
    try:
        data = signing.loads(cookie, salt=SALT, max_age=APPROVAL_TTL_S)
    except signing.BadSignature:  # forged, altered or expired
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return None
    if app is not None and data.get("app") != app:
        return None
    return data["id"]


def peek(cookie) -> Vouched | None:
    """The approval a cookie names, left in place (the player page shows who placed it)."""
    approval = _approval_id(cookie)
    if approval is None:
        return None
    return Vouched.load(redis_client.client().get(APPROVAL_KEY + approval))


def take(cookie, app: str) -> Vouched | None:
    """Use the cookie's approval for an offer of `app`, once. None, and nothing used, when the
    cookie is forged, expired or for another app."""
    approval = _approval_id(cookie, app)
    if approval is None:
        return None
    key = APPROVAL_KEY + approval
    held = Vouched.load(redis_client.client().get(key))
    if held is None or held.app != app:
        return None
    return Vouched.load(_take(key))


def vouch(body) -> dict:
    """`POST /api/v1/fleet/tickets`: `{app, name, by?}` -> `{ticket, expires_in_secs}`. Invalid
    (400) for a malformed body, NotFound (404) for an app this host cannot start."""
    if not isinstance(body, dict):
        raise Invalid("request body must be a JSON object")
    app, name, by = (body.get(k) for k in ("app", "name", "by"))
    if not isinstance(app, str) or not 0 < len(app) <= 200:
        raise Invalid("app must be the id of an app this host offers", fields={"app": "required"})
    if not isinstance(name, str) or (by is not None and not isinstance(by, str)):
        raise Invalid("name and by must be text", fields={"name": "text"})
    if apps.resolve(app) is None:
        raise NotFound(f"no app {app[:64]!r} in the catalog or library")
    vouched = Vouched(
        app=app,
        name=sanitize_name(name, fallback_seed=app),
        by=sanitize_name(by or "", fallback_seed="") or "the fleet host",
    )
    return {"ticket": mint(vouched), "expires_in_secs": TICKET_TTL_S}
