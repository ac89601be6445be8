"""What this host shows of a member: a summary built from the member's own answers, every
string sanitised (a member may lie or send control characters), and the public shape of a
`Member` (never its token).

Nothing here imports Django.
"""

from __future__ import annotations

import re

TOKEN_RE = re.compile(r"[0-9a-f]{64}")
NAME_MAX = 64
TEXT_MAX = 120
LIST_MAX = 16


def clean_text(value: object, limit: int = TEXT_MAX) -> str:
    """Printable text of at most `limit` characters; anything else becomes ''."""
    if not isinstance(value, str):
        return ""
    text = "".join(ch for ch in value if ch.isprintable()).strip()
    return text[:limit]


def clean_name(value: object) -> str:
    return clean_text(value, NAME_MAX)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def summarise(host: dict, status: dict, gpus: dict, displays: dict) -> dict:
    """The member's view from `GET /host`, `/status`, `/gpus` and `/display/state`."""
    sessions = status.get("sessions") if isinstance(status.get("sessions"), list) else []
    gpu_list = gpus.get("gpus") if isinstance(gpus.get("gpus"), list) else []
    active = gpus.get("active") if isinstance(gpus.get("active"), dict) else {}
    selected = gpus.get("selected") if isinstance(gpus.get("selected"), dict) else {}
    shown = displays.get("displays") if isinstance(displays.get("displays"), list) else []
    states = [d.get("state") for d in shown if isinstance(d, dict)]
    return {
        "name": clean_name(host.get("hostname")),
        "version": clean_text(host.get("version"), 40),
        "live_sessions": _int(status.get("active_sessions")) or len(sessions),
        "gpus": [
            {
                "id": clean_text(g.get("id"), 64),
                "name": clean_text(g.get("name")),
                "vendor": clean_text(g.get("vendor"), 32),
                "vram_mb": _int(g.get("vram_mb")),
            }
            for g in gpu_list[:LIST_MAX]
            if isinstance(g, dict)
        ],
        "gpu_selected": clean_text(selected.get("id"), 64) or None,
        "gpu_active": clean_text(active.get("id"), 64) or None,
        "displays": {
            "total": len(states),
            "active": states.count("active"),
            "lingering": states.count("lingering"),
            "pinned": states.count("pinned"),
        },
    }


def public(member, backoff_s: float | None = None) -> dict:
    """A member as the API and the page show it: no token, only what it said and our verdict."""
    shown = member.view if isinstance(member.view, dict) else {}
    return {
        "id": member.id,
        "name": member.name,
        "previous_name": shown.get("previous_name"),
        "url": member.url,
        "fingerprint": member.fingerprint,
        "reachable": member.reachable,
        "error": member.error,
        "version": shown.get("version"),
        "live_sessions": shown.get("live_sessions"),
        "gpus": shown.get("gpus", []),
        "gpu_selected": shown.get("gpu_selected"),
        "gpu_active": shown.get("gpu_active"),
        "displays": shown.get("displays"),
        "refreshed_at": member.refreshed_at.isoformat() if member.refreshed_at else None,
        "refresh_ms": member.refresh_ms,
        "created_at": member.created_at.isoformat() if member.created_at else None,
    }
