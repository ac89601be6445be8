"""Hook firings as the Celery worker performs them, and the hook document service for the API."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from pathlib import Path

import redis

from common import redis_client
from common.errors import Conflict, Failed, Invalid, NotFound, Unavailable
from common.files import storage_refusal
from hooks import (
    conf,
    deliveries,
    dispatch,
    event_kinds,
    hook_config,
    runner,
    ssrf,
    webhook_client,
)
from hooks.models import Delivery

log = logging.getLogger("hooks")


def get_document() -> dict:
    snapshot = hook_config.current()
    doc: dict = {"hooks": list(snapshot.entries)}
    if not snapshot.valid:
        doc["invalid"] = snapshot.error or "hooks.json is invalid; every hook is disabled"
    return doc


def replace_document(doc) -> dict:
    """Validate the whole document, then write it: Invalid naming every mistake (nothing
    written) or Failed (the previous file stays)."""
    try:
        entries = hook_config.validate(doc)
    except hook_config.InvalidHooks as exc:
        raise Invalid("invalid hook configuration", fields=exc.fields) from None
    try:
        hook_config.save(entries)
    except OSError as exc:
        log.error("hooks.json could not be written: %s", exc.strerror)
        refusal = storage_refusal(exc)
        if refusal is not None:
            raise refusal from None
        raise Failed("hook configuration could not be persisted") from None
    return {"hooks": entries}


def fire(event: dict, action: str, entry: dict, permit: str | None) -> None:
    """Perform one firing and record it; the permit is released whatever happens."""
    try:
        if action == "run":
            fire_run(event, entry)
        elif action == "webhook":
            fire_webhook(event, entry)
    finally:
        if permit:
            dispatch.release_permit(permit, redis_client.client())


def fire_run(event: dict, entry: dict) -> None:
    timeout = int(entry.get("timeout_s") or conf.HOOK_TIMEOUT_DEFAULT_S)
    result = runner.run_hook_command(entry["run"], event, timeout)
    if result.outcome != "ok":
        log.warning(
            "hook command for %s #%s: %s", event.get("kind"), event.get("seq"), result.error
        )
    deliveries.record(
        Delivery.RUN,
        entry["run"],
        event,
        result.outcome,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        error=result.error,
    )


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def fire_webhook(event: dict, entry: dict) -> None:
    url = entry["webhook"]
    target = deliveries.safe_url(url)
    body = json.dumps(event, separators=(",", ":")).encode()
    headers: dict[str, str] = {}
    secret_file = entry.get("hmac_secret_file")
    if secret_file:
        try:
            secret = Path(secret_file).expanduser().read_bytes()
        except OSError as exc:
            log.warning("hook webhook skipped: secret file unreadable (%s)", exc.strerror)
            deliveries.record(
                Delivery.WEBHOOK, target, event, Delivery.SKIPPED, error="secret file unreadable"
            )
            return
        headers["X-Mgmt-Signature"] = sign(secret, body)
    try:
        result = webhook_client.post_json(url, body, headers, conf.WEBHOOK_TIMEOUT_S)
    except ssrf.UrlRefused as exc:
        log.warning("hook webhook to %s refused: %s", target, exc)
        deliveries.record(Delivery.WEBHOOK, target, event, Delivery.REFUSED, error=str(exc))
        return
    ok = result.status is not None and 200 <= result.status < 300
    if not ok:
        log.warning("hook webhook to %s: %s", target, result.error or f"HTTP {result.status}")
    deliveries.record(
        Delivery.WEBHOOK,
        target,
        event,
        Delivery.OK if ok else Delivery.FAILED,
        http_status=result.status,
        duration_ms=result.duration_ms,
        error=result.error or ("" if ok else f"HTTP {result.status}"),
    )


def record_drop(event: dict, action: str, entry: dict) -> None:
    channel = Delivery.RUN if action == "run" else Delivery.WEBHOOK
    target = entry.get("run", "") if action == "run" else deliveries.safe_url(entry["webhook"])
    deliveries.record(
        channel,
        target,
        event,
        Delivery.DROPPED,
        error=f"{conf.HOOKS_MAX_IN_FLIGHT} firings already in flight",
    )


# -- the console's test-fire and delivery log -------------------------------------------------
DELIVERY_FIELDS = (
    "id",
    "channel",
    "target",
    "event_kind",
    "event_seq",
    "outcome",
    "attempt",
    "exit_code",
    "http_status",
    "duration_ms",
    "error",
)
DELIVERIES_MAX = 500


def test_event(entry: dict) -> dict:
    """A made-up event of a kind the entry listens to, marked `test: true` (no seq: it never
    went through the bus), so a hook script can tell a test from the real thing."""
    pattern = entry["on"].strip()
    kind = pattern
    if pattern.endswith(".*"):
        kind = next(k for k in sorted(event_kinds.KINDS) if event_kinds.pattern_matches(pattern, k))
    return {
        "seq": None,
        "ts_ms": int(time.time() * 1000),
        "schema": event_kinds.SCHEMA_VERSION,
        "kind": kind,
        "test": True,
    }


def test_fire(index: int) -> dict:
    """Hand hook `index` of the saved document to the hook worker now, whatever its filter
    and debounce say: `{queued: [actions], event}`. The outcome lands in the delivery log."""
    snapshot = hook_config.current()
    if not snapshot.valid:
        raise Conflict("hooks.json is invalid and every hook is disabled; fix it first")
    if not 0 <= index < len(snapshot.entries):
        raise NotFound("no hook at that index")
    entry = snapshot.entries[index]
    event = test_event(entry)
    client = redis_client.client()
    queued = []
    for action in ("run", "webhook"):
        if not entry.get(action):
            continue
        try:
            permit = dispatch.queue_firing(event, action, entry, client)
        except redis.RedisError:
            raise Unavailable("the event bus (Redis) is out of reach", retry_after=5) from None
        if permit is None:
            raise Unavailable(
                "the hook worker cannot take it now (8 firings in flight, or no broker)",
                retry_after=5,
            )
        queued.append(action)
    return {"queued": queued, "event": event}


def list_deliveries(limit: int = 100, channel: str | None = None) -> list[dict]:
    """The newest delivery records first (exit codes, HTTP statuses, durations)."""
    rows = Delivery.objects.all()
    if channel:
        rows = rows.filter(channel=channel)
    out = []
    for row in rows[: max(1, min(limit, DELIVERIES_MAX))]:
        item = {name: getattr(row, name) for name in DELIVERY_FIELDS}
        item["created"] = row.created.isoformat().replace("+00:00", "Z")
        out.append(item)
    return out
