"""What the two APIs do with the host configuration, one function per route.

Validation is whole-update: every bad key is reported and nothing is written. A write that the
file system refuses leaves the previous file in place and surfaces as a 500.
"""

from __future__ import annotations

import logging
from typing import Any

from common.errors import Failed, Invalid
from common.files import storage_refusal
from common.version import VERSION
from host import config_checks as checks
from hostconfig import effects, store, v1form
from hostconfig.schema import KEYS, key

log = logging.getLogger(__name__)

MAX_KEYS_PER_POST = 512


def _persist(typed: dict[str, Any], what: str = "host config") -> None:
    try:
        store.update(typed)
    except OSError as exc:
        log.error("%s could not be persisted: %s", what, exc.strerror or exc)
        refusal = storage_refusal(exc)
        if refusal is not None:
            raise refusal from None
        raise Failed(f"{what} could not be persisted: {exc.strerror or 'write failed'}") from None


# -- management API (/api/v1/host/...) ------------------------------------------------------------
def v1_state() -> dict:
    return v1form.state()


def v1_replace(body: Any) -> dict:
    """PUT /host/config: the whole file form; omitted fields go back to their defaults."""
    try:
        typed = v1form.parse(body)
        refused = checks.encoder_refusal(typed)
        if refused:  # named as the form names it
            raise store.ConfigError({"encoders.encoder": refused["encoder"]})
    except store.ConfigError as exc:
        raise Invalid("invalid host configuration", fields=exc.fields) from None
    _persist(typed)
    return v1form.state()


def set_compat(body: Any) -> dict:
    """PUT /host/compat: the only writer of the broadcast switch; on forces mDNS on too."""
    if not isinstance(body, dict):
        raise Invalid("invalid broadcast request", fields={"body": "must be a JSON object"})
    errors = {str(k): "unknown field" for k in body if k != "enabled"}
    if not isinstance(body.get("enabled"), bool):
        errors["enabled"] = "required; must be true or false"
    if errors:
        raise Invalid("invalid broadcast request", fields=errors)
    typed: dict[str, Any] = {"compat_enabled": body["enabled"]}
    if body["enabled"]:
        typed["mdns"] = True
    _persist(typed, "broadcast setting")
    return v1form.state()


# -- admin API (/api/config) ----------------------------------------------------------------------
def _redacted(name: str, value: Any) -> Any:
    if name == "api_tokens":
        shown = []
        for entry in value if isinstance(value, list) else []:
            parts = str(entry).split()
            if len(parts) == 4:
                shown.append({"name": parts[0], "scopes": [s for s in parts[3].split(",") if s]})
        return shown
    spec = key(name)
    if spec is not None and spec.secret:
        return "********" if value else ""
    return value


def admin_get(platform: str = "linux") -> dict:
    """Every key with its value; file-only keys apart (redacted); defaults and rules alongside."""
    values = store.values()
    out: dict[str, Any] = {"status": True, "status_code": 200, "platform": platform}
    out["version"] = VERSION
    file_only: dict[str, Any] = {}
    for name, value in values.items():
        spec = key(name)
        if spec is None:
            continue
        if spec.file_only:
            file_only[name] = _redacted(name, value)
        else:
            out[name] = _redacted(name, value)
    out["file_only"] = file_only
    out["defaults"] = {name: spec.default for name, spec in KEYS.items() if not spec.secret}
    out["restart_required_keys"] = sorted(n for n, s in KEYS.items() if s.restart)
    # What the host cannot do, per key, with the reason (the console shows the same).
    out["refused"] = effects.refused_keys(values)
    out["refused_values"] = effects.refused_values(values)
    return out


def admin_post(body: Any) -> dict:
    """POST /api/config: a flat object of key/value pairs, merged into the file."""
    if not isinstance(body, dict):
        raise Invalid("body must be a JSON object of key/value pairs")
    if not body:
        raise Invalid("body must name at least one key")
    if len(body) > MAX_KEYS_PER_POST:
        raise Invalid("too many keys")
    # A secret shown redacted by GET and posted back unchanged is not a change.
    body = {k: v for k, v in body.items() if not (k == "webhook_secret" and v == "********")}
    try:
        typed = checks.at_write(store.validate(body))
    except store.ConfigError as exc:
        raise Invalid(f"invalid configuration: {exc}") from None
    if typed:
        _persist(typed)
    restart = any(key(n).restart for n in typed)
    return {"status": True, "status_code": 200, "restart_required": restart}
