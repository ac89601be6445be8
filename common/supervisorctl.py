"""How any process of the host asks the supervisor to restart or stop the host: a signal to
the supervisor's pid, which it hands every child in `HOST_SUPERVISOR_PID`."""

from __future__ import annotations

import os
import signal


def request_restart() -> None:
    """Ask the supervisor to re-execute the host (SIGHUP)."""
    os.kill(int(os.environ["HOST_SUPERVISOR_PID"]), signal.SIGHUP)


def request_shutdown() -> None:
    """Ask the supervisor to stop the host (SIGTERM)."""
    os.kill(int(os.environ["HOST_SUPERVISOR_PID"]), signal.SIGTERM)
