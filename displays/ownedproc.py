"""Processes the host starts outside its own process group (Xvfb servers, GNOME monitor
keepers) and finds again by a mark in their environment: whether one is gone, ending one and
waiting for it, and finding every one still alive (`common.procs.alive`: a zombie
counts as gone)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from common import procs


def marked(pid: int, mark: str) -> bool:
    """`mark` (NAME=value) is in the process's environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return mark.encode() in environ


def terminate(pid: int, grace: float) -> bool:
    """SIGTERM, then SIGKILL, each given `grace` seconds; True once the process is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not procs.alive(pid):
                return True
            time.sleep(0.02)
    return False


def scan(alive: Callable[[int], bool]) -> list[int]:
    """Every pid in /proc that `alive` accepts."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and alive(int(e))]
