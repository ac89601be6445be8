"""The live sessions of a member, and ending one, from this host's console or API: over the
member's own v1 routes (`GET /api/v1/status` `sessions[]`, `DELETE /api/v1/session?id=`) with
the token this host holds for it, through the pinned client. docs/fleet.md.

Everything the member says is cut down to printable text of bounded length before it is
shown (a member may lie); a member that cannot be asked is a 503 that says why.
"""

from __future__ import annotations

import re

from common.errors import Invalid, NotFound, Unavailable
from fleet import member_tokens
from fleet.models import Member
from fleet.pinned import MemberClient, MemberError
from fleet.view import clean_text

SESSION_ID_RE = re.compile(r"[0-9a-f]{8}")
MAX_LISTED = 64
RETRY_AFTER_S = 10


def _client(member_id: int) -> tuple[Member, MemberClient]:
    member = Member.objects.filter(pk=member_id).first()
    if member is None:
        raise NotFound(f"no member {member_id}")
    token = member_tokens.get(member.id)
    if not token:
        raise Unavailable(f"this host holds no token for {member.name or member.url}")
    return member, MemberClient(member.url, member.fingerprint, token)


def _unavailable(member: Member, exc: MemberError) -> Unavailable:
    return Unavailable(f"{member.name or member.url}: {exc}", retry_after=RETRY_AFTER_S)


def live(member_id: int) -> list[dict]:
    """`[{id, plane, client, app_title, mode, state}]`: the member's live sessions."""
    member, client = _client(member_id)
    try:
        status = client.get_json("/api/v1/status")
    except MemberError as exc:
        raise _unavailable(member, exc) from None
    finally:
        client.close()
    rows = status.get("sessions") if isinstance(status, dict) else None
    out = []
    for row in rows[:MAX_LISTED] if isinstance(rows, list) else []:
        if not isinstance(row, dict) or not SESSION_ID_RE.fullmatch(str(row.get("id", ""))):
            continue
        out.append(
            {
                "id": row["id"],
                "plane": clean_text(row.get("plane"), 16),
                "client": clean_text(row.get("client"), 64),
                "app_title": clean_text(row.get("app_title")),
                "mode": clean_text(row.get("mode"), 32),
                "state": clean_text(row.get("state"), 32),
            }
        )
    return out


def end(member_id: int, session_id: str) -> None:
    """End one live session on the member (as its own console's End does)."""
    if not isinstance(session_id, str) or not SESSION_ID_RE.fullmatch(session_id):
        raise Invalid("session id must be 8 hex digits")
    member, client = _client(member_id)
    try:
        answer = client.request("DELETE", f"/api/v1/session?id={session_id}")
    except MemberError as exc:
        raise _unavailable(member, exc) from None
    finally:
        client.close()
    if answer.status == 404:
        raise NotFound(f"no live session {session_id} on {member.name or member.url}")
    if answer.status != 204:
        raise _unavailable(member, MemberError(f"ending it answered {answer.status}"))
