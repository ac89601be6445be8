"""What placement reads from a member's refreshed view (`Member.view`), in one place.

The view is filled by the refresh job from the member's own v1 API; its shape is the refresh
job's, so everything placement needs from it is read here, defensively (a missing or
malformed field reads as "not known"), and nowhere else. Keys read:

- `version` (str): `GET /api/v1/host` -> `version`.
- `sessions` or `live_sessions` (int, or a list whose length counts): live sessions,
  `GET /api/v1/status` -> `active_sessions` (or `sessions[]`).
- `free_slots` (int), else `max_sessions` (int) minus `sessions`: `GET /api/v1/status` ->
  `max_sessions`. Neither given: no slot is known to be free.
- `gpus` (list of objects): `GET /api/v1/gpus` -> `gpus[]` (`name`, `vendor`); a GPU encoder is
  available when an entry says `encoder: true` (or names one that is not software), or the
  view's `encoder` (`GET /api/v1/host` -> `encoder`, the backend a session would encode on)
  names a hardware backend.
- `library` (list of `{id, name}`; `title` read as `name`): the titles a player may pick, the
  Desktop and `GET /api/v1/library` (`id`, `title`), `fleet/view.py` `titles()`.

Nothing here imports Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_TITLES = 1000
SOFTWARE = {"", "software", "none", "false", "0"}


@dataclass(frozen=True)
class Capacity:
    version: str = ""
    sessions: int = 0
    free_slots: int | None = None  # None: the member does not say
    gpu_encoder: bool = False
    titles: dict[str, str] = field(default_factory=dict)  # id -> name


def _count(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, list):
        return len(value)
    return None


def _hardware(value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() not in SOFTWARE
    return False


def _titles(value) -> dict[str, str]:
    out: dict[str, str] = {}
    if not isinstance(value, list):
        return out
    for entry in value[:MAX_TITLES]:
        if not isinstance(entry, dict):
            continue
        key, name = entry.get("id"), entry.get("name", entry.get("title"))
        if isinstance(key, str) and 0 < len(key) <= 200 and isinstance(name, str) and name:
            out.setdefault(key, name[:200])
    return out


def read(view) -> Capacity:
    """The placement figures of one member's view (`Member.view`)."""
    if not isinstance(view, dict):
        return Capacity()
    sessions = _count(view.get("sessions", view.get("live_sessions"))) or 0
    free = _count(view.get("free_slots"))
    if free is None:
        most = _count(view.get("max_sessions"))
        free = None if most is None else max(0, most - sessions)
    gpus = view.get("gpus")
    encoder = _hardware(view.get("encoder")) or (
        isinstance(gpus, list)
        and any(isinstance(g, dict) and _hardware(g.get("encoder")) for g in gpus)
    )
    version = view.get("version")
    return Capacity(
        version=version[:64] if isinstance(version, str) else "",
        sessions=sessions,
        free_slots=free,
        gpu_encoder=encoder,
        titles=_titles(view.get("library")),
    )
