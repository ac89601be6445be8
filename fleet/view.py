"""What this host shows of a member: a summary built from the member's own answers, every
string sanitised (a member may lie or send control characters), and the public shape of a
`Member` (never its token).

Nothing here imports Django.
"""

from __future__ import annotations

import re

from fleet import member_view

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


TITLES_MAX = 1000
DESKTOP = {"id": "desktop", "name": "Desktop"}


def titles(library: object) -> list[dict]:
    """`[{id, name}]` a player may pick on the member: the Desktop (every host's `/play` offers
    it) and its library (`GET /library`: `id`, `title`), at most TITLES_MAX."""
    out = [dict(DESKTOP)]
    for entry in library if isinstance(library, list) else []:
        if len(out) > TITLES_MAX:
            break
        if not isinstance(entry, dict):
            continue
        key, name = clean_text(entry.get("id"), 200), clean_text(entry.get("title"), 200)
        if key and name:
            out.append({"id": key, "name": name})
    return out


def summarise(
    host: dict, status: dict, gpus: dict, displays: dict, library: list[dict] | None = None
) -> dict:
    """The member's view from `GET /host`, `/status`, `/gpus`, `/display/state` and the titles
    of `/library` (`titles()`; None: not asked this round)."""
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
        "max_sessions": _int(status.get("max_sessions")),
        # The backend a session would encode on (`software`, `nvenc`, ...; `none`).
        "encoder": clean_text(host.get("encoder"), 32),
        "library": library if library is not None else [],
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


RELAY_STATES = ("connected", "backing_off", "stopped")


def relay(state: object) -> dict | None:
    """`{state, error}` of a member's relay from `fleet.buffer.relay_states()`; None when it
    has none (not started yet, or the state could not be read)."""
    if not isinstance(state, dict) or state.get("state") not in RELAY_STATES:
        return None
    return {"state": state["state"], "error": clean_text(state.get("error"), 300)}


def public(member, relay_state: object = None) -> dict:
    """A member as the API and the page show it: no token, only what it said and our verdict.
    `relay_state`: the member's entry of `fleet.buffer.relay_states()`."""
    shown = member.view if isinstance(member.view, dict) else {}
    most = _int(shown.get("max_sessions"))
    library = shown.get("library") if isinstance(shown.get("library"), list) else []
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
        "max_sessions": most,
        "free_slots": member_view.read(shown).free_slots,  # what placement goes by
        "encoder": shown.get("encoder") or None,
        # The titles a player may pick there (the Desktop included); []: not asked yet.
        "titles": library,
        "relay": relay(relay_state),
        "gpus": shown.get("gpus", []),
        "gpu_selected": shown.get("gpu_selected"),
        "gpu_active": shown.get("gpu_active"),
        "displays": shown.get("displays"),
        "refreshed_at": member.refreshed_at.isoformat() if member.refreshed_at else None,
        "refresh_ms": member.refresh_ms,
        "created_at": member.created_at.isoformat() if member.created_at else None,
    }
