"""Answers of the admin API's Windows-only routes on this (Linux) host, and host restart."""

from __future__ import annotations

import logging
import os
import threading

from common import supervisorctl

log = logging.getLogger(__name__)

RESTART_DELAY_S = 0.5


def vigembus_status() -> dict:
    """Driver status with empty values: ViGEmBus is a Windows gamepad driver."""
    return {
        "status": False,
        "status_code": 200,
        "error": "ViGEmBus is a Windows driver; this host uses uinput on Linux",
        "installed": False,
        "version": "",
        "version_compatible": False,
        "packaged_version": "",
    }


NOT_ON_LINUX = {
    "vigembus": "ViGEmBus is a Windows driver; nothing to install on Linux",
    "display": "display device persistence is a Windows feature; nothing to reset on Linux",
}


def windows_only(feature: str) -> str:
    """The 404 message of a Windows-only admin route on this host."""
    return f"Windows only: {NOT_ON_LINUX[feature]}"


class RestartUnavailable(RuntimeError):
    pass


def schedule_restart() -> None:
    """Ask the supervisor to restart the host shortly, after this response has gone out."""
    if not os.environ.get("HOST_SUPERVISOR_PID", "").isdigit():
        raise RestartUnavailable("the host is not running under `manage.py runhost`")

    def fire():
        try:
            supervisorctl.request_restart()
        except OSError:
            log.exception("restart request failed")

    log.warning("restart requested through the admin API")
    threading.Timer(RESTART_DELAY_S, fire).start()
