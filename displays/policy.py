"""The display policy: what happens to a virtual display around a session, and its presets.

Stored in `display-settings.json` in the state dir (an operator may edit it; a broken file reads
as the default policy). A policy is either a named preset (which fixes the six behaviour axes)
or `custom` with the axes spelled out; four orthogonal options sit beside them. Changes apply
from the next acquire: a live display keeps the policy it was opened under.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from common.files import atomic_write
from common.statedir import state_dir

SETTINGS_FILE = "display-settings.json"
VERSION = 1
KEEP_ALIVE_MIN_S, KEEP_ALIVE_MAX_S = 10, 86400
MAX_DISPLAYS_MIN, MAX_DISPLAYS_MAX = 1, 16
TOPOLOGIES = ("auto", "extend", "primary", "exclusive")
CONFLICTS = ("separate", "steal", "join", "reject")
IDENTITIES = ("shared", "per-client", "per-client-mode")
LAYOUT_MODES = ("auto-row", "manual")
GAME_SESSION = ("auto", "dedicated")
AXES = ("keep_alive", "topology", "mode_conflict", "identity", "layout", "max_displays")
ORTHOGONAL = ("game_session", "ddc_power_off", "pnp_disable_monitors", "capture_monitor")
# What the display machine really acts on (displays/machine.py, displays/monitors.py).
ENFORCED = [
    "keep_alive",
    "topology",
    "mode_conflict",
    "identity",
    "layout",
    "max_displays",
    "capture_monitor",
]
# Options of the policy this host cannot act on: a value other than the default is refused
# with the reason (400), and GET shows them under `unsupported`.
UNSUPPORTED = {
    "game_session": "not supported on this host: games share the session's display "
    "(no dedicated game display); only auto is accepted",
    "ddc_power_off": "not supported on this host: no DDC/CI monitor control (the host drives "
    "virtual outputs only); only false is accepted",
    "pnp_disable_monitors": "not supported on this host: Windows only (PnP monitor "
    "disabling); only false is accepted",
}
POSITION_LIMIT = 1 << 20


def _axes(keep_alive, topology, conflict, identity, layout_mode="auto-row") -> dict:
    return {
        "keep_alive": keep_alive,
        "topology": topology,
        "mode_conflict": conflict,
        "identity": identity,
        "layout": {"mode": layout_mode, "positions": {}},
        "max_displays": 4,
    }


PRESETS: dict[str, tuple[str, dict]] = {
    "default": (
        "Keep the display 10 s after a disconnect; one per client.",
        _axes({"mode": "duration", "seconds": 10}, "auto", "separate", "per-client"),
    ),
    "gaming-rig": (
        "Pin the display until released; a new client takes it over.",
        _axes({"mode": "forever"}, "exclusive", "steal", "per-client"),
    ),
    "shared-desktop": (
        "Extend the desktop; tear the display down as soon as the client leaves.",
        _axes({"mode": "off"}, "extend", "separate", "per-client"),
    ),
    "hotdesk": (
        "One display per client and mode, kept 5 minutes; conflicting modes are refused.",
        _axes({"mode": "duration", "seconds": 300}, "exclusive", "reject", "per-client-mode"),
    ),
    "workstation": (
        "Kept 5 minutes, exclusive, with a manual layout.",
        _axes(
            {"mode": "duration", "seconds": 300}, "exclusive", "separate", "per-client", "manual"
        ),
    ),
}

DEFAULT_POLICY: dict = {
    "version": VERSION,
    "preset": "custom",
    **copy.deepcopy(PRESETS["default"][1]),
    "game_session": "auto",
    "ddc_power_off": False,
    "pnp_disable_monitors": False,
    "capture_monitor": None,
}


class PolicyError(ValueError):
    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def settings_path():
    return state_dir() / SETTINGS_FILE


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _keep_alive(value: Any, path: str, errors: dict) -> dict | None:
    if not isinstance(value, dict):
        errors[path] = "must be an object with `mode`"
        return None
    mode = value.get("mode")
    extra = set(value) - {"mode", "seconds"}
    if extra:
        errors[f"{path}.{sorted(extra)[0]}"] = "unknown field"
    if mode in ("off", "forever"):
        return {"mode": mode}
    if mode != "duration":
        errors[f"{path}.mode"] = "must be off, duration or forever"
        return None
    seconds = value.get("seconds")
    if not _int(seconds) or not KEEP_ALIVE_MIN_S <= seconds <= KEEP_ALIVE_MAX_S:
        errors[f"{path}.seconds"] = f"must be an integer {KEEP_ALIVE_MIN_S} to {KEEP_ALIVE_MAX_S}"
        return None
    return {"mode": "duration", "seconds": seconds}


def parse_positions(value: Any, path: str, errors: dict) -> dict:
    if not isinstance(value, dict):
        errors[path] = "must be an object of identity slot -> {x, y}"
        return {}
    out = {}
    for slot, pos in value.items():
        where = f"{path}.{slot}"
        if not str(slot).isdigit() or len(str(slot)) > 4:
            errors[where] = "keys must be identity slot numbers"
            continue
        if not isinstance(pos, dict) or set(pos) != {"x", "y"}:
            errors[where] = "must be {x, y}"
            continue
        if not all(_int(pos[a]) and abs(pos[a]) <= POSITION_LIMIT for a in ("x", "y")):
            errors[where] = f"x and y must be integers within ±{POSITION_LIMIT}"
            continue
        out[str(int(slot))] = {"x": pos["x"], "y": pos["y"]}
    return out


def _choice(body, name, choices, errors, default):
    value = body.get(name, default)
    if value not in choices:
        errors[name] = f"must be one of {', '.join(choices)}"
    return value


def validate_axes(body: dict, errors: dict, prefix: str = "") -> dict:
    """The six behaviour axes of `body` (defaults for missing ones), errors keyed with `prefix`."""
    out: dict[str, Any] = {}
    sub: dict[str, str] = {}
    base = DEFAULT_POLICY
    out["keep_alive"] = _keep_alive(body.get("keep_alive", base["keep_alive"]), "keep_alive", sub)
    out["topology"] = _choice(body, "topology", TOPOLOGIES, sub, base["topology"])
    out["mode_conflict"] = _choice(body, "mode_conflict", CONFLICTS, sub, base["mode_conflict"])
    out["identity"] = _choice(body, "identity", IDENTITIES, sub, base["identity"])
    layout = body.get("layout", base["layout"])
    if not isinstance(layout, dict) or set(layout) - {"mode", "positions"}:
        sub["layout"] = "must be {mode, positions}"
        layout = base["layout"]
    mode = layout.get("mode", "auto-row")
    if mode not in LAYOUT_MODES:
        sub["layout.mode"] = "must be auto-row or manual"
    out["layout"] = {
        "mode": mode,
        "positions": parse_positions(layout.get("positions", {}), "layout.positions", sub),
    }
    count = body.get("max_displays", base["max_displays"])
    if not _int(count) or not MAX_DISPLAYS_MIN <= count <= MAX_DISPLAYS_MAX:
        sub["max_displays"] = f"must be an integer {MAX_DISPLAYS_MIN} to {MAX_DISPLAYS_MAX}"
    out["max_displays"] = count
    errors.update({f"{prefix}{k}": v for k, v in sub.items()})
    return out


def validate(body: Any) -> dict:
    """A whole policy from a PUT body, or PolicyError with every bad field."""
    if not isinstance(body, dict):
        raise PolicyError({"body": "must be a JSON object"})
    errors: dict[str, str] = {}
    known = {"version", "preset", "fields", *AXES, *ORTHOGONAL}
    for name in body:
        if name not in known:
            errors[str(name)] = "unknown field"
    version = body.get("version", VERSION)
    if not _int(version) or version != VERSION:
        errors["version"] = "must be 1"
    preset = body.get("preset", "custom")
    if preset != "custom" and preset not in PRESETS:
        errors["preset"] = f"must be custom or one of {', '.join(PRESETS)}"
    # The spec's form carries the axes of a custom policy in `fields`; top-level works too.
    source = body
    if "fields" in body:
        if not isinstance(body["fields"], dict):
            errors["fields"] = "must be an object"
        else:
            source = {**body, **body["fields"]}
            for name in body["fields"]:
                if name not in (*AXES, *ORTHOGONAL):
                    errors[f"fields.{name}"] = "unknown field"
    policy: dict[str, Any] = {"version": VERSION, "preset": preset}
    policy.update(validate_axes(source, errors))
    policy.update(_orthogonal(source, errors))
    if errors:
        raise PolicyError(errors)
    return policy


def _orthogonal(source: dict, errors: dict) -> dict:
    out = {"game_session": _choice(source, "game_session", GAME_SESSION, errors, "auto")}
    if out["game_session"] != "auto" and "game_session" not in errors:
        errors["game_session"] = UNSUPPORTED["game_session"]
    for flag in ("ddc_power_off", "pnp_disable_monitors"):
        out[flag] = source.get(flag, False)
        if not isinstance(out[flag], bool):
            errors[flag] = "must be true or false"
        elif out[flag]:
            errors[flag] = UNSUPPORTED[flag]
    monitor = source.get("capture_monitor")
    if monitor is not None and (not isinstance(monitor, str) or len(monitor) > 128):
        errors["capture_monitor"] = "must be a string of at most 128 characters or null"
        monitor = None
    out["capture_monitor"] = (monitor or "").strip() or None
    return out


def effective(policy: dict) -> dict:
    """The six axes in force: a preset's row, or the stored custom axes."""
    preset = policy.get("preset", "custom")
    if preset in PRESETS:
        axes = copy.deepcopy(PRESETS[preset][1])
        positions = policy.get("layout", {}).get("positions") or {}
        if preset == "workstation" and positions:
            axes["layout"]["positions"] = copy.deepcopy(positions)
        return axes
    return {name: copy.deepcopy(policy[name]) for name in AXES}


def load() -> tuple[dict, bool]:
    """(policy, configured); a missing or broken file reads as the default policy."""
    try:
        stored = json.loads(settings_path().read_text())
        return validate(stored), True
    except FileNotFoundError:
        return copy.deepcopy(DEFAULT_POLICY), False
    except (OSError, ValueError):
        return copy.deepcopy(DEFAULT_POLICY), True


def save(policy: dict) -> None:
    atomic_write(settings_path(), json.dumps(policy, indent=2) + "\n", mode=0o600)


def presets_info() -> list[dict]:
    return [
        {"id": pid, "summary": summary, "fields": copy.deepcopy(fields)}
        for pid, (summary, fields) in PRESETS.items()
    ]


def with_layout(policy: dict, positions: dict) -> dict:
    """PUT /display/layout: the current effective axes made explicit, manual layout."""
    axes = effective(policy)
    axes["layout"] = {"mode": "manual", "positions": positions}
    out = {"version": VERSION, "preset": "custom", **axes}
    out.update({name: policy[name] for name in ORTHOGONAL})
    return out
