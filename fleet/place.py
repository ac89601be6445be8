"""The fleet host's side of a placement: the members' titles for the player's picker, and
placing a player (the rule in `fleet/placement.py`, then a ticket minted on the chosen member
over its pinned client, the next candidate when one fails). docs/fleet.md.

The player's device must be paired (and enabled) on this host first (`native.services.place`
knocks): the ticket tells the member "this host vouches for this player", and this host vouches
only for devices it would let play itself.
"""

from __future__ import annotations

import logging
import re
import time

from access import identity
from common.errors import NotFound, Unavailable
from fleet import member_tokens
from fleet.member_view import read
from fleet.models import Member
from fleet.pinned import MemberClient, MemberError
from fleet.placement import Candidate, choose, titles
from fleet.tickets import TICKET_RE

log = logging.getLogger("fleet.place")

MINT_TIMEOUT_S = 3.0
PLACE_BUDGET_S = 8.0  # all tries together: the player's request waits on them
TICKETS_PATH = "/api/v1/fleet/tickets"
HANDOFF_PATH = "/play/fleet"
RETRY_AFTER_S = 10
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def candidates(members) -> list[Candidate]:
    return [Candidate(m.id, m.name or m.url, m.url, m.reachable, read(m.view)) for m in members]


def member_titles() -> list[dict]:
    """`{id, name, members: [names]}` for every title some member has."""
    return titles(candidates(Member.objects.all()))


def _shown(text, limit: int = 120) -> str:
    return _UNPRINTABLE.sub("?", text if isinstance(text, str) else "")[:limit]


def _mint(member: Candidate, pin: str, token: str, body: dict, timeout: float) -> str:
    """A ticket from the member, or MemberError saying (safely) why not."""
    client = MemberClient(member.url, pin, token, timeout=timeout)
    try:
        answer = client.request("POST", TICKETS_PATH, body)
    finally:
        client.close()
    if answer.status != 201:
        try:
            said = answer.json().get("error")
        except (MemberError, AttributeError):
            said = None
        # A member that echoes the token back must not get it shown to the player.
        why = f": {_shown(said.replace(token, '[token]'))}" if isinstance(said, str) else ""
        raise MemberError(f"refused the ticket ({answer.status}{why})")
    data = answer.json()
    ticket = data.get("ticket") if isinstance(data, dict) else None
    if not isinstance(ticket, str) or not TICKET_RE.fullmatch(ticket):
        raise MemberError("answered 201 without a ticket")
    return ticket


def place(app: str, title: str, name: str) -> dict:
    """Place a paired device's player of `app` (`title`) on a member: `{member, handoff,
    skipped}` (`skipped`: the members tried first and why they could not take it). NotFound
    when no member has the title, Unavailable (503) when every one that has it is busy,
    unreachable or refused."""
    members = list(Member.objects.all())
    pins = {m.id: m.fingerprint for m in members}
    choice = choose(candidates(members), app, title)
    if not choice.ranked:
        if choice.nobody_has:
            raise NotFound(choice.reason)
        raise Unavailable(choice.reason, retry_after=RETRY_AFTER_S)
    body = {"app": app, "name": name, "by": identity.host_name()}
    skipped = []
    deadline = time.monotonic() + PLACE_BUDGET_S
    for member in choice.ranked:
        left = deadline - time.monotonic()
        if left < 0.5:
            skipped.append(f"{member.name}: not tried (the others took the time)")
            continue
        token = member_tokens.get(member.id)
        if not token:
            skipped.append(f"{member.name}: this host holds no token for it")
            continue
        try:
            ticket = _mint(member, pins[member.id], token, body, min(MINT_TIMEOUT_S, left))
        except MemberError as exc:
            log.warning("placement on member %s failed: %s", member.id, exc)
            skipped.append(f"{member.name}: {exc}")
            continue
        return {
            "member": {"name": member.name, "url": member.url},
            "handoff": {"url": member.url + HANDOFF_PATH, "ticket": ticket},
            "skipped": skipped,
        }
    raise Unavailable(
        f"no member with {title} could take the player: " + "; ".join(skipped),
        retry_after=RETRY_AFTER_S,
    )
