"""Writing delivery records, and pruning old ones as a side effect (no scheduler needed)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

from django.db import close_old_connections
from django.utils import timezone

from hooks import conf
from hooks.models import Delivery

log = logging.getLogger("hooks.deliveries")

PRUNE_EVERY_S = 600.0
_last_prune = 0.0
_prune_lock = threading.Lock()


def safe_url(url: str) -> str:
    """URL without credentials, query or fragment: fit for records and logs."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))[:512]
    except ValueError:
        return "<invalid url>"


def record(channel: str, target: str, event: dict | None, outcome: str, **fields) -> None:
    """Store one record; failures are logged, never raised (the firing already happened)."""
    try:
        close_old_connections()
        Delivery.objects.create(
            channel=channel,
            target=target[:512],
            event_kind=(event or {}).get("kind", "")[:64],
            event_seq=(event or {}).get("seq"),
            outcome=outcome,
            **fields,
        )
        maybe_prune()
    except Exception:  # bookkeeping must not turn into a hook failure
        log.exception("could not store a delivery record")


def maybe_prune(now: float | None = None) -> int:
    global _last_prune
    now = time.monotonic() if now is None else now
    with _prune_lock:
        if _last_prune and now - _last_prune < PRUNE_EVERY_S:
            return 0
        _last_prune = now
    return prune()


def prune(days: int | None = None) -> int:
    days = conf.DELIVERY_RETENTION_DAYS if days is None else days
    cutoff = timezone.now() - timedelta(days=days)
    deleted, _ = Delivery.objects.filter(created__lt=cutoff).delete()
    return deleted
