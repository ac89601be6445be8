"""The catalog entry's command, started inside the session's virtual display.

Its own session and process group (``start_new_session``), so the whole tree it spawns can be
signalled at once at the end and nothing is left behind; SIGTERM first, SIGKILL after the
entry's ``exit_timeout``. Desktop (no ``cmd``) starts nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping

from hostmgmt.lib.env import without_secrets

log = logging.getLogger("streaming.sessions")


def session_env(base: Mapping, *, x_display: str, app, client: dict, mode: tuple) -> dict:
    """`base` (the host's environment) less its secret-named variables, as for hook commands,
    plus DISPLAY, the HOST_APP_* / HOST_CLIENT_* variables and the entry's own env (the
    operator wrote that one for this app, so it is kept whatever its names)."""
    width, height, fps = mode
    env = without_secrets(base)
    env.update({str(k): str(v) for k, v in (app.env or {}).items()})
    env.update(
        {
            "DISPLAY": x_display,
            "HOST_APP_ID": str(app.id),
            "HOST_APP_NAME": app.name,
            "HOST_CLIENT_NAME": client.get("name", ""),
            "HOST_CLIENT_UUID": client.get("uuid", ""),
            "HOST_CLIENT_FINGERPRINT": client.get("fingerprint", ""),
            "HOST_CLIENT_WIDTH": str(width),
            "HOST_CLIENT_HEIGHT": str(height),
            "HOST_CLIENT_FPS": str(fps),
            "PF_APP_TITLE": app.name,
        }
    )
    env.pop("WAYLAND_DISPLAY", None)  # the app must land in our X display, not the operator's
    return env


class AppProcess:
    def __init__(self, cmd: str, env: dict, working_dir: str = "", exit_timeout: float = 5.0):
        self.exit_timeout = max(float(exit_timeout or 0), 0.5)
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", cmd],
            env=env,
            cwd=working_dir or None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pgid = self.proc.pid
        log.info("app started: pid %d", self.proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def terminate(self) -> None:
        """SIGTERM to the group, SIGKILL after exit_timeout; reaps the leader."""
        for sig, grace in ((signal.SIGTERM, self.exit_timeout), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                self.proc.poll()
                if not self._group_alive():
                    break
                time.sleep(0.02)
            else:
                continue
            break
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            log.warning("app leader %d did not exit", self.proc.pid)
