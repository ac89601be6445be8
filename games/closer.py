"""Ending a game as the host, from any process: signal, wait, kill.

The watcher's own process closes through `GameWatcher.terminate`; every other process (the
API answering `POST /game/end`, the supervisor expiring a grace window, a worker that took
over a dead one's games) has only the recorded pid. These helpers make that safe: the pid is
signalled only while its start time is the recorded one, the wait uses a pidfd (an orphan
that a slow PID 1 has not reaped yet counts as gone), and SIGKILL follows `exit-timeout`.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import time

import psutil

from common import procs
from games.detect import Found
from games.watcher import _signal_game as signal_game

log = logging.getLogger("games")


def verified(game: dict) -> Found | None:
    """The recorded game process if it still is that process (same start time)."""
    pid = game.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None  # psutil.Process(None) would be this very process
    try:
        proc = psutil.Process(pid)
        if game.get("created") is not None and abs(proc.create_time() - game["created"]) > 1.0:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return Found(pid, game.get("name", ""), (), proc.create_time(), os.getsid(pid))
    except (TypeError, ValueError, OSError, psutil.Error):
        return None


def signal_and_wait(found: Found, pgid: int | None, timeout: float) -> None:
    try:
        pidfd = os.pidfd_open(found.pid)
    except (OSError, AttributeError):
        pidfd = None
    try:
        signal_game(found, signal.SIGTERM, pidfd, pgid)
        if not wait_gone(found.pid, pidfd, timeout):
            log.warning("game %s ignored SIGTERM for %.1fs; killing it", found.name, timeout)
            signal_game(found, signal.SIGKILL, pidfd, pgid)
            wait_gone(found.pid, pidfd, 2.0)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def wait_gone(pid: int, pidfd: int | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pidfd is not None:
            if select.select([pidfd], [], [], min(0.2, max(deadline - time.monotonic(), 0)))[0]:
                return True
        elif not procs.alive(pid):
            return True
        else:
            time.sleep(0.01)
    return False


def end_group(pgid: int, launched_at: float, timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout`, to a launched group whose game never showed.

    Linux never hands out a pid while a process group of that number exists, so the group is
    ours as long as its leader is gone or was created before the launch was recorded."""
    try:
        if psutil.Process(pgid).create_time() > launched_at + 1.0:
            return  # the number was reused by someone else's process
    except psutil.Error:
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.02)


def created(pid: int | None) -> float | None:
    try:
        return psutil.Process(pid).create_time() if pid else None
    except psutil.Error:
        return None
