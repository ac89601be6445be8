"""The runtime snapshot (`GET /api/v1/status`, mgmt-api-records §1.3) an SSE consumer resyncs
from after `event: dropped`, and the console dashboard shows.

Each part belongs to another app; this module only asks their services. One app failing
(say Redis is down for the session registry) costs only its part, never the whole snapshot.
"""

from __future__ import annotations

import logging

from common.version import VERSION
from host import services
from pairing import services as pairing_services
from streaming import services as streaming_services

log = logging.getLogger(__name__)


def _safe(fn, default):
    try:
        value = fn()
    except Exception:  # one broken part must not take the snapshot down
        log.exception("runtime status: %s failed", getattr(fn, "__qualname__", fn))
        return default
    return default if value is None else value


def snapshot() -> dict:
    pairing = _safe(pairing_services.runtime_counts, {})
    stream = _safe(streaming_services.runtime_status, {})
    kept = _safe(streaming_services.kept_displays, 0)
    return {
        "video_streaming": bool(stream.get("video_streaming", False)),
        "audio_streaming": bool(stream.get("audio_streaming", False)),
        "pin_pending": bool(pairing.get("pin_pending", False)),
        "paired_clients": int(pairing.get("paired_clients", 0)),
        "native_paired_clients": int(pairing.get("native_paired_clients", 0)),
        "active_sessions": int(stream.get("active_sessions", 0)),
        "max_sessions": stream.get("max_sessions"),
        "session": stream.get("session"),
        "stream": stream.get("stream"),
        "games": list(stream.get("games", [])),
        "sessions": list(stream.get("sessions", [])),
        "kept_displays": int(kept),
        "host": {"version": VERSION, "uptime": services.uptime_s()},
    }
