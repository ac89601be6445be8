"""The management API's host-config file form (`GET/PUT /api/v1/host/config`).

A sectioned JSON view over the same keys as `host.conf`: each dotted field maps to one key of
the schema, so the admin API and the v1 API read and write one store with one set of rules. The
broadcast switch (`network.compat`) is shown but only `PUT /host/compat` writes it.
"""

from __future__ import annotations

from typing import Any

from hostconfig import effects, store
from hostconfig.keytype import require_printable
from hostconfig.schema import KEYS

VERSION = 1
# dotted field -> config key
FIELDS: dict[str, str] = {
    "general.host_name": "sunshine_name",
    "general.perf": "perf",
    "input.gamepad": "gamepad",
    "input.pen": "input_pen",
    "input.hide_host_cursor": "hide_host_cursor",
    "input.gamescope_grab_cursor": "gamescope_grab_cursor",
    "audio_video.video_source": "video_source",
    "audio_video.capture_method": "capture_method",
    "audio_video.compositor": "compositor",
    "audio_video.headless_compositor": "headless_compositor",
    "audio_video.max_fps": "max_fps",
    "audio_video.ten_bit": "ten_bit",
    "audio_video.four_four_four": "four_four_four",
    "audio_video.gamescope_hdr": "gamescope_hdr",
    "audio_video.gamescope_splash": "gamescope_splash",
    "audio_video.pipewire_latency_ms": "pipewire_latency_ms",
    "audio_video.capture_max_age_ms": "capture_max_age_ms",
    "audio_video.audio_fec": "audio_fec",
    "audio_video.audio_gain": "audio_gain",
    "audio_video.audio_capture": "audio_capture",
    "audio_video.vdisplay_hz_mult": "vdisplay_hz_mult",
    "audio_video.gamescope_sdr_nits": "gamescope_sdr_nits",
    "network.chacha20": "chacha20",
    "network.mdns": "mdns",
    "network.compat": "compat_enabled",
    "network.fec_pct": "fec_percentage",
    "encoders.encoder": "encoder",
    "encoders.render_adapter": "adapter_name",
    "encoders.zerocopy": "zerocopy",
    "clipboard": "clipboard",
    "performance_profile": "performance_profile",
    "latency_profile": "latency_profile",
    "network_policy": "network_policy",
}
SECTIONS = ("general", "input", "audio_video", "network", "encoders")
READ_ONLY = {"network.compat"}


def current() -> dict:
    """The file form of what is stored now."""
    vals = store.values()
    out: dict[str, Any] = {"version": VERSION}
    for section in SECTIONS:
        out[section] = {}
    for dotted, name in FIELDS.items():
        value = vals[name]
        if name == "sunshine_name":
            value = value.strip() or None
        if "." in dotted:
            section, leaf = dotted.split(".", 1)
            out[section][leaf] = value
        else:
            out[dotted] = value
    return out


def state() -> dict:
    return {
        "settings": current(),
        "configured": store.is_configured(),
        "requires_restart": True,
        "env_path": str(store.env_path()),
        **refusals(),
    }


def refusals() -> dict:
    """`refused` and `refused_values` of the config API, keyed by the form's dotted fields."""
    by_key = {name: dotted for dotted, name in FIELDS.items()}
    return {
        "refused": {by_key[n]: why for n, why in effects.refused_keys(by_key).items()},
        "refused_values": {by_key[n]: v for n, v in effects.refused_values(by_key).items()},
    }


def parse(body: Any) -> dict[str, Any]:
    """Typed config values for a whole file form, or ConfigError with dotted field names.

    Omitted sections and fields go back to their defaults (None); `network.compat` is ignored.
    """
    if not isinstance(body, dict):
        raise store.ConfigError({"body": "must be a JSON object"})
    errors: dict[str, str] = {}
    typed: dict[str, Any] = {}
    sections = {f.split(".", 1)[0] for f in FIELDS if "." in f}
    top_level = {f for f in FIELDS if "." not in f}
    for name in body:
        if name not in sections and name not in top_level and name != "version":
            errors[str(name)] = "unknown field"
    if "version" in body and (body["version"] is True or body["version"] != VERSION):
        errors["version"] = "must be 1"
    for section in sections:
        value = body.get(section, {})
        if value is None:
            value = {}
        if not isinstance(value, dict):
            errors[section] = "must be an object"
            continue
        for leaf in value:
            if f"{section}.{leaf}" not in FIELDS:
                errors[f"{section}.{leaf}"] = "unknown field"
    for dotted, name in FIELDS.items():
        if dotted in READ_ONLY or errors.get(dotted.split(".", 1)[0]):
            continue
        if "." in dotted:
            section, leaf = dotted.split(".", 1)
            container = body.get(section) or {}
            if not isinstance(container, dict) or leaf not in container:
                typed[name] = None
                continue
            raw = container[leaf]
        else:
            if dotted not in body:
                typed[name] = None
                continue
            raw = body[dotted]
        spec = KEYS[name]
        try:
            # Before any trimming: a line break at either end is refused, not silently cut.
            require_printable(raw)
        except ValueError as exc:
            errors[dotted] = str(exc)
            continue
        if name == "sunshine_name" and isinstance(raw, str):
            raw = raw.strip()
        if name == "encoder" and isinstance(raw, str) and not raw.strip():
            raw = "auto"
        try:
            if name == "sunshine_name" and raw is None:
                typed[name] = None
            else:
                typed[name] = spec.check_json(raw)
        except ValueError as exc:
            errors[dotted] = str(exc)
    if errors:
        raise store.ConfigError(errors)
    return typed
