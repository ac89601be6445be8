"""The runtime snapshot (`GET /api/v1/status`, mgmt-api-records §1.3) an SSE consumer resyncs
from after `event: dropped`, and the console dashboard shows.

Each part belongs to another app; this module only asks. An app that does not (yet) answer
contributes its empty value, so the snapshot is always complete and never a 500.
"""

from __future__ import annotations

import importlib
import logging

from hostmgmt import services
from hostmgmt.version import VERSION

log = logging.getLogger(__name__)


def _ask(module: str, function: str, default):
    """`module.function()` when that app provides it, else `default`; never raises."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        return default
    try:
        fn = getattr(mod, function, None)
        if fn is None:
            return default
        value = fn()
    except Exception:  # noqa: BLE001 - one broken app must not take the snapshot down
        log.exception("runtime status: %s.%s failed", module, function)
        return default
    return value if value is not None else default


def _kept_display_rows() -> int:
    """Lingering and pinned rows of the display registry's model, while it has no reader."""
    try:
        from django.apps import apps

        model = apps.get_model("streaming", "VirtualDisplay")
        return model.objects.filter(state__in=("lingering", "pinned")).count()
    except Exception:  # noqa: BLE001 - no such model (yet) or no table: nothing is kept
        return 0


def snapshot() -> dict:
    # GAP: the pairing, streaming-session and display registries do not expose these yet; each
    # provider below is looked up by name and reports empty until its app adds it:
    #   pairing.services.runtime_counts() -> {"paired_clients", "native_paired_clients",
    #                                         "pin_pending"}
    #   streaming.services.runtime_status() -> {"video_streaming", "audio_streaming",
    #                                          "active_sessions", "session", "stream", "games"}
    #   streaming.services.kept_displays() -> int
    pairing = _ask("pairing.services", "runtime_counts", None)
    if pairing is None:  # the pairing app's general readers until it offers the counts
        pairing = {
            "paired_clients": len(_ask("pairing.services", "list_clients", [])),
            "pin_pending": bool(_ask("pairing.services", "pending_requests", [])),
        }
    stream = _ask("streaming.services", "runtime_status", {})
    kept = _ask("streaming.services", "kept_displays", None)
    if kept is None:
        kept = _kept_display_rows()
    return {
        "video_streaming": bool(stream.get("video_streaming", False)),
        "audio_streaming": bool(stream.get("audio_streaming", False)),
        "pin_pending": bool(pairing.get("pin_pending", False)),
        "paired_clients": int(pairing.get("paired_clients", 0)),
        "native_paired_clients": int(pairing.get("native_paired_clients", 0)),
        "active_sessions": int(stream.get("active_sessions", 0)),
        "session": stream.get("session"),
        "stream": stream.get("stream"),
        "games": list(stream.get("games", [])),
        "kept_displays": int(kept) if isinstance(kept, int) else 0,
        "host": {"version": VERSION, "uptime": services.uptime_s()},
    }
