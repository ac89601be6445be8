"""Per-client profiles and the per-app encoder preset: what one session streams with.

`effective_stream_params(client_name, app, requested)` is a pure function of the host config
(read once per call), the client's name, the catalog entry and what the client asked for. It
returns a new dict and changes nothing global: a profile or an app's preset applies to the one
session that asked for these parameters, and the next session starts again from the host
defaults. That is how "applied at launch, restored at session end / on terminate" holds
without anything to undo, even when a worker dies mid-session.

Host keys (admin-api-and-config): `client_profile_<name>_{max_bitrate,hevc_mode,av1_mode,
latency_mode}` (file-only), the host's own `hevc_mode` / `av1_mode` / `max_bitrate` /
`latency_profile`, and `nvenc_tuning_preset` (-1 manual, 0 latency, 1 balanced, 2 quality),
which an entry's `encoder-preset` (-1 inherit, 0..2) overrides; out-of-range presets are
ignored.
"""

from __future__ import annotations

import logging
import re

from hostconfig import store

log = logging.getLogger("games")

PROFILE_FIELDS = ("max_bitrate", "hevc_mode", "av1_mode", "latency_mode")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
# hevc_mode / av1_mode 1 = the codec is not offered to this client.
CODEC_OFF = 1


def profile_name(client_name: str) -> str:
    """The key form of a client name: the key pattern allows [A-Za-z0-9_.-], so a device named
    "Steam Deck" is configured as `client_profile_Steam_Deck_<field>`."""
    return _NAME_CHARS.sub("_", (client_name or "").strip()).strip("_")


def client_profile(client_name: str, values: dict | None = None) -> dict:
    """The profile fields set for this client (exact name first, else case-insensitive)."""
    values = store.values() if values is None else values
    name = profile_name(client_name)
    if not name:
        return {}
    lowered = {k.lower(): v for k, v in values.items() if k.startswith("client_profile_")}
    found = {}
    for field in PROFILE_FIELDS:
        key = f"client_profile_{name}_{field}"
        value = values.get(key, lowered.get(key.lower()))
        if value is not None:
            found[field] = value
    return found


def _app_preset(app) -> object:
    if app is None:
        return None
    if isinstance(app, dict):
        return app.get("encoder-preset", app.get("encoder_preset"))
    return getattr(app, "encoder_preset", None)


def encoder_preset(app, host_default: int) -> tuple[int, str]:
    """(preset, where it came from): the entry's 0..2, else the host default (-1 inherits;
    anything else, a bool or a string included, is ignored as out of range)."""
    raw = _app_preset(app)
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= 2:
        return raw, "app"
    if raw is not None and raw != -1:
        log.info("encoder-preset %r out of range; keeping the host default", raw)
    return host_default, "host"


def effective_stream_params(client_name: str, app, requested: dict) -> dict:
    """What this session streams with.

    `requested` carries what the client negotiated: `bitrate_kbps`, `codec` (h264/hevc/av1),
    optionally `latency_mode`. The result is a copy with the profile and preset applied plus
    `hevc_mode`, `av1_mode`, `latency_mode`, `encoder_preset`, `profile` (the matched name or
    None) and `applied` (which fields a profile or the entry changed).
    """
    values = store.values()
    profile = client_profile(client_name, values)
    out = dict(requested)
    applied: list[str] = []

    host_cap = values.get("max_bitrate") or 0
    cap = profile.get("max_bitrate") or host_cap
    bitrate = out.get("bitrate_kbps")
    if cap and isinstance(bitrate, int) and bitrate > cap:
        out["bitrate_kbps"] = cap
        if profile.get("max_bitrate"):
            applied.append("max_bitrate")

    for field in ("hevc_mode", "av1_mode"):
        out[field] = profile[field] if field in profile else values.get(field, 0)
        if field in profile:
            applied.append(field)
    codec = out.get("codec")
    if codec == "av1" and out["av1_mode"] == CODEC_OFF:
        codec = "hevc"
    if codec == "hevc" and out["hevc_mode"] == CODEC_OFF:
        codec = "h264"
    if codec is not None and codec != out.get("codec"):
        out["codec"] = codec
        applied.append("codec")

    if "latency_mode" in profile:
        out["latency_mode"] = profile["latency_mode"]
        applied.append("latency_mode")
    elif not out.get("latency_mode"):
        low = values.get("latency_profile") == "low_latency"
        out["latency_mode"] = "aggressive" if low else "safe"

    preset, source = encoder_preset(app, values.get("nvenc_tuning_preset", -1))
    out["encoder_preset"] = preset
    if source == "app":
        applied.append("encoder_preset")
    out["profile"] = profile_name(client_name) if profile else None
    out["applied"] = applied
    return out
