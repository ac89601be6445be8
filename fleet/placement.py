"""The placement rule: which member a browser player goes to for a title. docs/fleet.md.

Among the members that have the title (same id and name in their library), are reachable
(the last refresh reached them) and have a free session slot: first the ones with a GPU
encoder, then the least loaded (most free slots, then fewest live sessions), then the lowest
member id (stable). The answer is the whole ranked list, so a caller whose first choice fails
goes on to the next; when none fits, a reason the player can read.

Pure: no Django, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.member_view import Capacity


@dataclass(frozen=True)
class Candidate:
    id: int
    name: str
    url: str
    reachable: bool
    capacity: Capacity


@dataclass(frozen=True)
class Choice:
    ranked: list[Candidate]
    reason: str = ""  # set when `ranked` is empty
    nobody_has: bool = False  # no member has the title at all (not a passing state)


def has_title(candidate: Candidate, app: str, title: str) -> bool:
    return candidate.capacity.titles.get(app) == title


def _key(c: Candidate):
    return (not c.capacity.gpu_encoder, -(c.capacity.free_slots or 0), c.capacity.sessions, c.id)


def choose(members: list[Candidate], app: str, title: str) -> Choice:
    """The members that may take a player of `app` (`title`), best first; or why none."""
    having = [m for m in members if has_title(m, app, title)]
    if not having:
        return Choice([], f"no member has {title}", nobody_has=True)
    reachable = [m for m in having if m.reachable]
    if not reachable:
        return Choice([], f"every member with {title} is unreachable")
    free = [m for m in reachable if (m.capacity.free_slots or 0) > 0]
    if not free:
        if len(reachable) < len(having):
            return Choice([], f"every member with {title} is busy or unreachable")
        return Choice([], f"every member with {title} is busy")
    return Choice(sorted(free, key=_key))


def titles(members: list[Candidate]) -> list[dict]:
    """Every member's titles for the player's picker: `{id, name, members: [names]}`, one per
    (id, name), sorted by name."""
    seen: dict[tuple[str, str], list[str]] = {}
    for m in members:
        for key, name in m.capacity.titles.items():
            seen.setdefault((key, name), []).append(m.name or m.url)
    rows = [{"id": k, "name": n, "members": sorted(ms)} for (k, n), ms in seen.items()]
    return sorted(rows, key=lambda r: (r["name"].lower(), r["id"]))
