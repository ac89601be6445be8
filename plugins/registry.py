"""Plugin registrations (`GET /plugins`, `PUT/DELETE /plugins/{id}`): leases kept in Redis.

A running plugin says "I am here, this is my UI" with `PUT /plugins/{id}` every ~30 s; the entry
lives 90 s after its last PUT (`LEASE_S`), so a plugin that died drops out by itself. Expiry is
lazy: a read finds the dead entry and removes it, and only the reader whose HDEL removed it
announces `plugins.changed` (so each expiry is announced once, whoever lists).

`plugins.changed {id}` fires on: first registration, any change of title/version/ui (the secret
too), re-registration after expiry, delete of a live entry, and each expiry found. A renewal
that changes nothing is silent.

The UI secret is stored here (the console's proxy needs it) but never leaves through
`summaries()`, logs or error bodies; only `ui_credential()` returns it.
"""

from __future__ import annotations

import json
import re
import time

from common import redis_client
from common.errors import DomainError, Invalid
from hooks import events
from hooks.event_kinds import PLUGINS_CHANGED
from plugins.env import PLUGIN_ID

KEY = "plugins:registry"
LEASE_S = 90.0
TITLE_MAX = 64
VERSION_MAX = 32
PORT_MIN = 1024
PORT_MAX = 65535
SECRET_RE = re.compile(r"[A-Za-z0-9_-]{16,128}")
ICON_RE = re.compile(r"[a-z0-9-]{1,48}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_FIELDS = {"title", "version", "ui"}
_UI_FIELDS = {"port", "secret", "icon"}


class NotFound(DomainError):
    status = 404


def check_id(plugin_id: str) -> None:
    if not isinstance(plugin_id, str) or not PLUGIN_ID.fullmatch(plugin_id):
        raise Invalid("plugin id must be [a-z][a-z0-9-]*, at most 64 characters")


def _clean(value: str) -> str:
    return _CONTROL.sub("", value).strip()


def validate(body) -> dict:
    """A PluginRegistration body -> the stored record (without the lease); 400 with `fields`."""
    if not isinstance(body, dict):
        raise Invalid("request body must be a JSON object")
    errors: dict[str, str] = {}
    for extra in sorted(set(body) - _FIELDS):
        errors[extra] = "unknown field"
    title = body.get("title")
    if not isinstance(title, str):
        errors["title"] = "required: a string of 1-64 characters"
    else:
        title = _clean(title)
        if not 1 <= len(title) <= TITLE_MAX:
            errors["title"] = "must be 1-64 characters after removing control characters"
    record: dict = {"title": title}
    version = body.get("version")
    if version is not None:
        if not isinstance(version, str):
            errors["version"] = "must be a string"
        else:
            version = _clean(version)
            if len(version) > VERSION_MAX:
                errors["version"] = "must be at most 32 characters"
            elif version:
                record["version"] = version
    ui = body.get("ui")
    if ui is not None:
        record["ui"] = _validate_ui(ui, errors)
    if errors:
        raise Invalid("invalid plugin registration", fields=errors)
    return record


def _validate_ui(ui, errors: dict[str, str]) -> dict:
    if not isinstance(ui, dict):
        errors["ui"] = "must be an object with port, secret and optional icon"
        return {}
    for extra in sorted(set(ui) - _UI_FIELDS):
        errors[f"ui.{extra}"] = "unknown field"
    port = ui.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not PORT_MIN <= port <= PORT_MAX:
        errors["ui.port"] = "required: an integer from 1024 to 65535 (a loopback port)"
    secret = ui.get("secret")
    if not isinstance(secret, str) or not SECRET_RE.fullmatch(secret):
        errors["ui.secret"] = "required: 16-128 characters of [A-Za-z0-9_-]"
    out = {"port": port, "secret": secret}
    icon = ui.get("icon")
    if icon is not None:
        if not isinstance(icon, str) or not ICON_RE.fullmatch(icon):
            errors["ui.icon"] = "must be 1-48 characters of [a-z0-9-]"
        else:
            out["icon"] = icon
    return out


def _decode(raw) -> dict | None:
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _expired(entry: dict | None, now: float) -> bool:
    return entry is None or float(entry.get("expires_at", 0)) <= now


def _announce(plugin_id: str) -> None:
    events.emit(PLUGINS_CHANGED, {"id": plugin_id})


def register(plugin_id: str, body, *, port_check=None) -> dict:
    """Create or renew the lease; returns the PluginSummary.

    `port_check(plugin_id, port) -> str | None` (the API passes
    `runner_control.ui_port_error`) refuses a UI port that the plugin's own process does not
    listen on: a 400 naming `ui.port`, so a registration cannot aim the console's proxy at
    another local service."""
    check_id(plugin_id)
    record = validate(body)
    ui = record.get("ui")
    if ui and port_check is not None:
        why = port_check(plugin_id, ui["port"])
        if why:
            raise Invalid("invalid plugin registration", fields={"ui.port": why})
    client = redis_client.client()
    now = time.time()
    old = _decode(client.hget(KEY, plugin_id))
    stored = {**record, "id": plugin_id, "expires_at": now + LEASE_S}
    client.hset(KEY, plugin_id, json.dumps(stored))
    if _expired(old, now) or {k: old.get(k) for k in _FIELDS} != {
        k: stored.get(k) for k in _FIELDS
    }:
        _announce(plugin_id)
    return summary(stored)


def unregister(plugin_id: str) -> bool:
    """Drop the entry; announces only when a live entry went. False when there was none."""
    check_id(plugin_id)
    client = redis_client.client()
    raw = client.hget(KEY, plugin_id)
    if raw is None or not client.hdel(KEY, plugin_id):
        return False
    if not _expired(_decode(raw), time.time()):
        _announce(plugin_id)
        return True
    _announce(plugin_id)  # an expiry nobody had found yet: announce it once, as listing would
    return False


def _live() -> dict[str, dict]:
    """Every live entry; removes (and announces, once) the expired ones found."""
    client = redis_client.client()
    now = time.time()
    live = {}
    for key, raw in client.hgetall(KEY).items():
        plugin_id = key.decode() if isinstance(key, bytes) else key
        entry = _decode(raw)
        if _expired(entry, now):
            # Only the HDEL that removes this exact value announces (compare-and-delete).
            if _hdel_if_same(client, plugin_id, raw):
                _announce(plugin_id)
            continue
        live[plugin_id] = entry
    return live


_HDEL_IF_SAME = "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0"  # noqa: E501


def _hdel_if_same(client, plugin_id: str, raw) -> bool:
    return bool(client.eval(_HDEL_IF_SAME, 1, KEY, plugin_id, raw))


def summary(entry: dict) -> dict:
    """PluginSummary: never the secret."""
    out: dict = {"id": entry["id"], "title": entry["title"]}
    if entry.get("version"):
        out["version"] = entry["version"]
    ui = entry.get("ui")
    if ui:
        public = {"port": ui["port"]}
        if ui.get("icon"):
            public["icon"] = ui["icon"]
        out["ui"] = public
    return out


def summaries() -> list[dict]:
    live = _live()
    return sorted((summary(e) for e in live.values()), key=lambda s: (s["title"], s["id"]))


def get(plugin_id: str) -> dict | None:
    """The live entry (secret included: for the UI proxy and `ui_credential` only)."""
    check_id(plugin_id)
    return _live().get(plugin_id)


def ui_credential(plugin_id: str) -> dict:
    """UiCredential of a live plugin with a UI; 404 otherwise."""
    entry = get(plugin_id)
    if entry is None:
        raise NotFound("no live registration for this plugin id")
    ui = entry.get("ui")
    if not ui:
        raise NotFound("this plugin registered no UI")
    return {"port": ui["port"], "secret": ui["secret"]}
