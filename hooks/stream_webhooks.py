"""The admin API's stream webhooks: `webhook_url_N` targets get a POST at stream start and end.

`notify()` is what the streaming engine calls; it queues one Celery task per target and
returns at once. Each attempt: 5 s timeout, no redirects, TLS verified, `X-Host-Signature`
when `webhook_secret` is set; 2 retries with backoff on network errors and 5xx, none on 4xx.
"""

from __future__ import annotations

import json
import logging
import os

from hooks import conf, deliveries, ssrf, webhook_client
from hooks.models import Delivery
from hooks.services import sign
from hostconfig import schema, store

log = logging.getLogger("hooks.stream_webhooks")

START = "stream.start"
END = "stream.end"
RECORD_FIELDS = (
    "session_id",
    "t_start",
    "t_end",
    "app_name",
    "client_name",
    "client_address",
    "codec",
    "width",
    "height",
    "fps",
    "avg_bitrate_kbps",
    "avg_rtt_ms",
    "avg_encode_ms",
    "dropped_frames",
    "error",
)


def configured_urls() -> list[str]:
    """Every valid webhook_url_N of the host config, in N order."""
    raw = store.read_raw()
    names = [n for n in raw if n.startswith("webhook_url_") and schema.key(n) is not None]
    urls = []
    for name in sorted(names, key=lambda n: int(n.rsplit("_", 1)[1])):
        value = (raw.get(name) or "").strip()
        if not value:
            continue
        try:
            ssrf.url_host(value)
        except ssrf.UrlRefused as exc:
            log.warning("%s ignored: %s", name, exc)
            continue
        urls.append(value)
    return urls


def body_for(event_name: str, record: dict) -> bytes:
    doc = {"event": event_name}
    doc.update({field: record.get(field) for field in RECORD_FIELDS})
    return json.dumps(doc, separators=(",", ":"), default=str).encode()


def notify(event_name: str, record: dict) -> int:
    """Queue the POSTs for one stream start/end; returns how many targets were queued."""
    if event_name not in (START, END):
        raise ValueError(f"unknown stream webhook event {event_name!r}")
    try:
        urls = configured_urls()
        if not urls:
            return 0
        body = body_for(event_name, record)
        secret = store.get("webhook_secret") or ""
        signature = sign(secret.encode(), body) if secret else None
        from hostmgmt.celery import app  # the wiring's, a layer above: lazy (pyproject.toml)

        for url in urls:
            app.send_task(
                "hooks.stream_webhook",
                args=[url, body.decode(), signature],
                queue=conf.HOOKS_QUEUE,
                retry=False,
            )
        return len(urls)
    except Exception as exc:  # a webhook must never disturb the stream
        log.warning("stream webhooks not queued (%s)", exc.__class__.__name__)
        return 0


def backoff_s(retries_done: int) -> float:
    base = float(os.environ.get("HOST_STREAM_WEBHOOK_BACKOFF_S", "") or 1.0)
    return base * (3**retries_done)


def deliver(url: str, body: bytes, signature: str | None, attempt: int = 1) -> bool:
    """One attempt; True when it is worth retrying (network error or 5xx)."""
    headers = {"X-Host-Signature": signature} if signature else {}
    target = deliveries.safe_url(url)
    try:
        result = webhook_client.post_json(
            url, body, headers, conf.STREAM_WEBHOOK_TIMEOUT_S, guard=False
        )
    except ssrf.UrlRefused as exc:
        deliveries.record(Delivery.STREAM_WEBHOOK, target, _event(body), Delivery.REFUSED,
                          attempt=attempt, error=str(exc))  # fmt: skip
        return False
    status = result.status
    ok = status is not None and 200 <= status < 300
    retry = status is None or status >= 500
    deliveries.record(
        Delivery.STREAM_WEBHOOK,
        target,
        _event(body),
        Delivery.OK if ok else Delivery.FAILED,
        attempt=attempt,
        http_status=status,
        duration_ms=result.duration_ms,
        error=result.error or ("" if ok else f"HTTP {status}"),
    )
    if not ok:
        log.warning("stream webhook to %s attempt %d: %s", target, attempt,
                    result.error or f"HTTP {status}")  # fmt: skip
    return retry


def _event(body: bytes) -> dict:
    try:
        return {"kind": json.loads(body).get("event", "")}
    except ValueError:
        return {}
