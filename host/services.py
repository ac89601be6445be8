"""Host-level facts both APIs report: health and identity."""

from __future__ import annotations

import time

from django.conf import settings

from access import identity
from common.version import VERSION

_PROCESS_STARTED = time.time()


def uptime_s() -> int:
    started = settings.HOST_STARTED_AT or _PROCESS_STARTED
    return max(0, int(time.time() - started))


def health() -> dict:
    return {"status": "ok", "status_code": 200, "version": VERSION, "uptime": uptime_s()}


def host_info() -> dict:
    return {
        "hostname": identity.host_name(),
        "uniqueid": identity.unique_id(),
        "version": VERSION,
        "ports": settings.PORTS.as_dict(),
    }
