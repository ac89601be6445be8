"""Session ⇄ game settings (`GET/PUT /api/v1/session/settings`, mgmt-api-records §1.3).

What happens to a launched game when its session ends, and to the session when its game
exits. Stored as `<state>/session-settings.json` (atomic write) and read again at each session
end, so a change reaches live sessions without a restart. A hand-edited file that breaks a rule
reads as the defaults for the fields it breaks: a session end must never fail on a bad file.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from common.errors import Invalid
from common.files import atomic_write
from common.statedir import ensure_state_dir, state_path

log = logging.getLogger("games")

FILE = "session-settings.json"
KEEP, ON_QUIT, ALWAYS = "keep", "on_quit", "always"
GAME_ON_SESSION_END = (KEEP, ON_QUIT, ALWAYS)
GRACE_MIN, GRACE_MAX = 10, 86400
# The fields this build acts on (SessionSettingsState.enforced).
ENFORCED = ("game_on_session_end", "session_on_game_exit", "disconnect_grace_seconds")


@dataclass(frozen=True)
class SessionSettings:
    version: int = 1
    game_on_session_end: str = KEEP
    session_on_game_exit: bool = True
    disconnect_grace_seconds: int = 300

    def as_dict(self) -> dict:
        return asdict(self)


class SettingsError(Invalid, ValueError):
    def __init__(self, fields: dict[str, str]):
        super().__init__("invalid session settings", fields=fields)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check(data: dict) -> tuple[dict, dict[str, str]]:
    """(good values, field -> message) for one request or file body; omitted fields default."""
    good: dict = {}
    errors: dict[str, str] = {}
    for name in data:
        if name not in SessionSettings.__dataclass_fields__:
            errors[name] = "unknown field"
    v = data.get("version", 1)
    if not _is_int(v) or v != 1:
        errors["version"] = "must be 1"
    v = data.get("game_on_session_end", KEEP)
    if v in GAME_ON_SESSION_END:
        good["game_on_session_end"] = v
    else:
        errors["game_on_session_end"] = "must be one of keep, on_quit, always"
    v = data.get("session_on_game_exit", True)
    if isinstance(v, bool):
        good["session_on_game_exit"] = v
    else:
        errors["session_on_game_exit"] = "must be a boolean"
    v = data.get("disconnect_grace_seconds", 300)
    if _is_int(v) and GRACE_MIN <= v <= GRACE_MAX:
        good["disconnect_grace_seconds"] = v
    else:
        errors["disconnect_grace_seconds"] = f"must be an integer from {GRACE_MIN} to {GRACE_MAX}"
    return good, errors


def validate(data) -> SessionSettings:
    """The settings of a PUT body; SettingsError naming every bad field (nothing is written)."""
    if not isinstance(data, dict):
        raise SettingsError({"": "must be a JSON object"})
    good, errors = _check(data)
    if errors:
        raise SettingsError(errors)
    return SessionSettings(**good)


def configured() -> bool:
    return state_path(FILE).exists()


def load() -> SessionSettings:
    """The stored settings; defaults when absent, per field when a hand edit broke one."""
    try:
        data = json.loads(state_path(FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SessionSettings()
    except (OSError, ValueError) as exc:
        log.warning("session settings unreadable (%s); using the defaults", exc)
        return SessionSettings()
    if not isinstance(data, dict):
        log.warning("session settings file is not an object; using the defaults")
        return SessionSettings()
    good, errors = _check(data)
    if errors:
        log.warning("session settings file: %s; those fields use their defaults", errors)
    return SessionSettings(**good)


def save(settings: SessionSettings) -> None:
    """Atomic: a session ending meanwhile reads the old file or the new one, never half."""
    ensure_state_dir()
    atomic_write(state_path(FILE), json.dumps(settings.as_dict(), indent=2) + "\n")


def state() -> dict:
    """SessionSettingsState."""
    return {"settings": load().as_dict(), "configured": configured(), "enforced": list(ENFORCED)}
