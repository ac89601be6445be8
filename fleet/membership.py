"""Joining, listing and removing members (docs/fleet.md).

A join checks each field, pins the member's certificate before the token is sent
(`fleet/pinned.py`), and asks the member who the token is (`GET /api/v1/fleet/whoami`): only a
fleet token is kept. The management token is refused as over-scoped (it would give this host,
and anyone who reads its state, the member's whole reach) and a plugin token as under-scoped.
The token is then stored in `fleet/member_tokens.py`, never in the database or an answer.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from common.errors import Conflict, DomainError, Invalid, NotFound
from fleet import identity, member_tokens, view
from fleet.models import Member
from fleet.pinned import (
    FingerprintMismatch,
    MemberClient,
    MemberError,
    normalise_fingerprint,
    normalise_url,
)

JOIN_TIMEOUT_S = 5.0
MAX_MEMBERS = 64
WHOAMI = "/api/v1/fleet/whoami"


def client_for(member: Member, timeout: float | None = None) -> MemberClient:
    """A pinned client for a joined member, carrying its token; NotFound when the token is gone
    (the member was removed, or the token file lost)."""
    token = member_tokens.get(member.id)
    if token is None:
        raise NotFound("no token is kept for this member; remove it and join it again")
    return MemberClient(member.url, member.fingerprint, token, timeout or JOIN_TIMEOUT_S)


def check_fields(data: object) -> tuple[str, str, str]:
    """(url, token, fingerprint) normalised; Invalid with every field's mistake."""
    if not isinstance(data, dict):
        raise Invalid("request body must be a JSON object with url, token and fingerprint")
    errors: dict[str, str] = {}
    for key in data:
        if key not in ("url", "token", "fingerprint"):
            errors[str(key)[:64]] = "unknown field"
    url = fingerprint = token = ""
    try:
        url = normalise_url(data.get("url"))
    except ValueError as exc:
        errors["url"] = str(exc)
    try:
        fingerprint = normalise_fingerprint(data.get("fingerprint"))
    except ValueError as exc:
        errors["fingerprint"] = str(exc)
    raw = data.get("token")
    if not isinstance(raw, str) or not view.TOKEN_RE.fullmatch(raw.strip()):
        errors["token"] = "token must be the member's fleet token (64 hex digits)"
    else:
        token = raw.strip()
    if errors:
        raise Invalid("invalid member", fields=errors)
    return url, token, fingerprint


def _ask_whoami(client: MemberClient) -> dict:
    try:
        answer = client.request("GET", WHOAMI)
    except FingerprintMismatch as exc:
        raise DomainError(str(exc), status=422) from None
    except MemberError as exc:
        status = 504 if "timed out" in str(exc) else 502
        raise DomainError(f"the member could not be asked: {exc}", status=status) from None
    if answer.status == 401:
        raise DomainError("the member refused the token (unknown or revoked)", status=422)
    if answer.status == 404:
        raise DomainError(
            "the member does not serve /api/v1/fleet/whoami (a version without fleets)",
            status=422,
        )
    if answer.status != 200:
        raise DomainError(f"the member answered {answer.status} to whoami", status=502)
    try:
        body = answer.json()
    except MemberError as exc:
        raise DomainError(f"the member's whoami: {exc}", status=502) from None
    return body if isinstance(body, dict) else {}


def join(data: object) -> Member:
    """Check, pin, ask, keep. DomainError (with its status) says why a join is refused."""
    url, token, fingerprint = check_fields(data)
    if fingerprint == identity.fingerprint():
        raise Invalid("that fingerprint is this host's own: a host cannot join itself")
    if Member.objects.filter(url=url).exists():
        raise Conflict(f"{url} is already a member")
    if Member.objects.filter(fingerprint=fingerprint).exists():
        raise Conflict("a member with that certificate is already joined")
    if Member.objects.count() >= MAX_MEMBERS:
        raise Conflict(f"at most {MAX_MEMBERS} members")
    client = MemberClient(url, fingerprint, token, JOIN_TIMEOUT_S)
    try:
        role = _ask_whoami(client).get("role")
    finally:
        client.close()
    if role == "admin":
        raise DomainError(
            "that is the member's management token (over-scoped): mint a fleet token on the "
            "member (manage.py mint_fleet_token NAME, or its console's Fleet page)",
            status=422,
        )
    if role != "fleet":
        raise DomainError(
            "that token is not a fleet token (under-scoped): mint a fleet token on the member",
            status=422,
        )
    try:
        with transaction.atomic():
            member = Member.objects.create(url=url, fingerprint=fingerprint)
            member_tokens.put(member.id, token)
    except IntegrityError:
        raise Conflict(f"{url} is already a member") from None
    return member


def get(member_id: int) -> Member:
    try:
        return Member.objects.get(pk=member_id)
    except Member.DoesNotExist:
        raise NotFound("no member with that id") from None


def remove(member_id: int) -> None:
    """The member and its token, at once (the token first: nothing can use it after)."""
    member = get(member_id)
    member_tokens.drop(member.id)
    member.delete()
