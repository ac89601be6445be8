"""Display settings, layout and custom presets: one function per management route."""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from django.db import DatabaseError

from common.errors import DomainError
from displays import policy as policies
from displays.models import CustomPreset

log = logging.getLogger(__name__)

MAX_PRESETS = 256


class ServiceError(DomainError):
    def __init__(self, status: int, message: str, fields: dict[str, str] | None = None):
        super().__init__(message, status=status, fields=fields)


def settings_state() -> dict:
    stored, configured = policies.load()
    return {
        "settings": stored,
        "configured": configured,
        "effective": policies.effective(stored),
        "presets": policies.presets_info(),
        "custom_presets": [p.as_record() for p in CustomPreset.objects.all()],
        "enforced": list(policies.ENFORCED),
        "unsupported": dict(policies.UNSUPPORTED),
    }


def _save(policy: dict, what: str) -> None:
    try:
        policies.save(policy)
    except OSError as exc:
        log.error("%s could not be persisted: %s", what, exc.strerror or exc)
        raise ServiceError(500, f"{what} could not be persisted") from None


def put_settings(body: Any) -> dict:
    try:
        policy = policies.validate(body)
    except policies.PolicyError as exc:
        raise ServiceError(400, "invalid display policy", exc.fields) from None
    _save(policy, "display policy")
    return settings_state()


def put_layout(body: Any) -> dict:
    if not isinstance(body, dict) or set(body) - {"positions"}:
        raise ServiceError(400, "invalid layout", {"body": "must be {positions}"})
    errors: dict[str, str] = {}
    positions = policies.parse_positions(body.get("positions", {}), "positions", errors)
    if errors:
        raise ServiceError(400, "invalid layout", errors)
    stored, _ = policies.load()
    _save(policies.with_layout(stored, positions), "layout")
    return settings_state()


# -- custom presets ---------------------------------------------------------------------------
def _preset_input(body: Any) -> tuple[str, dict, str]:
    if not isinstance(body, dict):
        raise ServiceError(400, "invalid preset", {"body": "must be a JSON object"})
    errors: dict[str, str] = {}
    for name in body:
        if name not in ("name", "fields", "game_session"):
            errors[str(name)] = "unknown field"
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        errors["name"] = "must be a non-empty string"
    elif len(name) > 128:
        errors["name"] = "must be at most 128 characters"
    fields = body.get("fields", {})
    if not isinstance(fields, dict):
        errors["fields"] = "must be an object"
        fields = {}
    game_session = fields.get("game_session", body.get("game_session", "auto"))
    if game_session not in policies.GAME_SESSION:
        errors["fields.game_session"] = "must be auto or dedicated"
    elif game_session != "auto":
        errors["fields.game_session"] = policies.UNSUPPORTED["game_session"]
    unknown = set(fields) - {*policies.AXES, "game_session"}
    for extra in sorted(unknown):
        errors[f"fields.{extra}"] = "unknown field"
    axes = policies.validate_axes(fields, errors, prefix="fields.")
    if errors:
        message = "empty preset name" if set(errors) == {"name"} else "invalid preset"
        raise ServiceError(400, message, errors)
    return name, axes, game_session


def list_presets() -> list[dict]:
    return [p.as_record() for p in CustomPreset.objects.all()]


def create_preset(body: Any) -> dict:
    name, axes, game_session = _preset_input(body)
    if CustomPreset.objects.count() >= MAX_PRESETS:
        raise ServiceError(400, f"at most {MAX_PRESETS} custom presets")
    pid = hashlib.sha256(f"{name}:{time.time_ns()}".encode()).hexdigest()[:12]
    try:
        preset = CustomPreset.objects.create(
            id=pid, name=name, fields=axes, game_session=game_session
        )
    except DatabaseError as exc:
        log.error("preset catalog could not be persisted: %s", exc)
        raise ServiceError(500, "preset catalog could not be persisted") from None
    return preset.as_record()


def _get(pid: str) -> CustomPreset:
    preset = CustomPreset.objects.filter(id=str(pid)[:12]).first() if len(pid) == 12 else None
    if preset is None:
        raise ServiceError(404, "no custom preset with that id")
    return preset


def update_preset(pid: str, body: Any) -> dict:
    preset = _get(pid)
    name, axes, game_session = _preset_input(body)
    preset.name, preset.fields, preset.game_session = name, axes, game_session
    try:
        preset.save()
    except DatabaseError:
        raise ServiceError(500, "preset catalog could not be persisted") from None
    return preset.as_record()


def delete_preset(pid: str) -> None:
    """Removes it from the catalog only; a policy that was applied from it stays as it is."""
    preset = _get(pid)
    try:
        preset.delete()
    except DatabaseError:
        raise ServiceError(500, "preset catalog could not be persisted") from None
