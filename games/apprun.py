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

from common import procs
from common.env import without_secrets
from displays import sway
from games import appfields

log = logging.getLogger("streaming.sessions")


def session_env(
    base: Mapping, *, x_display: str, app, client: dict, mode: tuple, wayland: str = ""
) -> dict:
    """`base` (the host's environment) less its secret-named variables, as for hook commands,
    plus DISPLAY, the HOST_APP_* / HOST_CLIENT_* variables and the entry's own env (the
    operator wrote that one for this app, so it is kept whatever its names). `wayland`: the
    compositor socket the session runs on (absolute), kept as WAYLAND_DISPLAY."""
    env = without_secrets(base)
    env.update(app_vars(app, client, mode))
    env["DISPLAY"] = x_display
    env.pop("WAYLAND_DISPLAY", None)  # the app must land in our display, not another one
    if wayland:
        env["WAYLAND_DISPLAY"] = wayland
    if not x_display:
        env.pop("DISPLAY")
    return env


def app_vars(app, client: dict, mode: tuple) -> dict:
    """The session's own variables for the app: the entry's env and HOST_APP_* / HOST_CLIENT_*
    (all an app launched inside the headless compositor gets on top of the compositor's)."""
    width, height, fps = mode
    env = {str(k): str(v) for k, v in (app.env or {}).items()}
    env.update(
        {
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
    return env


class AppProcess:
    """`output_fd`: where stdout and stderr go (the entry's `output` file, opened append-only
    by the caller), else nowhere."""

    def __init__(self, cmd: str, env: dict, working_dir: str = "", exit_timeout: float = 5.0,
                 output_fd: int | None = None):  # fmt: skip
        self.exit_timeout = max(float(exit_timeout or 0), 0.5)
        self.proc = appfields.shell(cmd, env, working_dir, output_fd)
        self.started = time.monotonic()
        self.ended_at: float | None = None
        self.pgid = self.proc.pid
        log.info("app started: pid %d", self.proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exited(self) -> bool:
        return self.status() is not None

    def status(self) -> int | None:
        """The launched command's exit status (negative: the signal), None while it runs."""
        code = self.proc.poll()
        if code is not None and self.ended_at is None:
            self.ended_at = time.monotonic()
        return code

    def verdict(self, auto_detach: bool, wait_all: bool) -> str:
        """`appfields.exit_verdict` for this command: running, detached (a launcher) or ended."""
        code = self.status()
        ran = (self.ended_at or time.monotonic()) - self.started
        alive = code is not None and wait_all and procs.group_alive(self.pgid)
        return appfields.exit_verdict(
            code,
            ran,
            alive,
            auto_detach=auto_detach,
            wait_all=wait_all,
            window_s=appfields.AUTO_DETACH_WINDOW_S,
        )

    def terminate(self) -> None:
        """SIGTERM to the group, SIGKILL after exit_timeout; reaps the leader."""
        stop_group(self.pgid, self.exit_timeout, reap=self.proc.poll)
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            log.warning("app leader %d did not exit", self.proc.pid)


class CompositorApp:
    """The catalog command launched inside the host's headless compositor, on the session's
    output (`SwayCompositor.launch`), with AppProcess's interface. It runs as the compositor's
    user in a process group of its own (sway's exec starts a new session), which is what
    `terminate` signals; the compositor's token in its environment lets `stop` sweep it too."""

    def __init__(self, comp, output: str, cmd: str, env: dict, working_dir: str = "",
                 exit_timeout: float = 5.0):  # fmt: skip
        self.exit_timeout = max(float(exit_timeout or 0), 0.5)
        self._uid = comp.run_as[0] if comp.run_as else os.geteuid()
        self._pid = comp.launch(cmd, output, env=env, cwd=working_dir or "")
        try:
            self.pgid = os.getpgid(self._pid)
        except ProcessLookupError:
            self.pgid = self._pid
        self.proc = self  # finish() polls `.proc`
        log.info("app started in the compositor on %s: pid %d", output, self._pid)

    @property
    def pid(self) -> int:
        return self._pid

    def poll(self) -> int | None:
        return None if not self.exited() else 0

    def exited(self) -> bool:
        return not procs.alive(self._pid)

    def verdict(self, auto_detach: bool, wait_all: bool) -> str:
        """Not our child, so its exit status is unknown: never a detach (the compositor's
        launch already fails a command that exits before mapping a window); `wait_all` follows
        its process group."""
        if not self.exited() or (wait_all and procs.group_alive(self.pgid)):
            return appfields.RUNNING
        return appfields.ENDED

    def terminate(self) -> None:
        """SIGTERM to the group, SIGKILL after exit_timeout (not our child: nothing to reap).
        Each signal goes only while every member is the compositor user's: once the app's group
        has emptied its number may name someone else's."""
        stop_group(self.pgid, self.exit_timeout, only_uid=self._uid)


def stop_group(pgid: int, exit_timeout: float, reap=None, only_uid: int | None = None) -> None:
    """SIGTERM to a process group, SIGKILL when it outlives `exit_timeout`; `reap` (the
    leader's poll) runs while waiting, so a leader that is our child and already dead does not
    keep the group looking alive as a zombie. With `only_uid`, a signal goes only while every
    live member of the group runs as that uid (a group that is not our child's)."""
    for sig, grace in ((signal.SIGTERM, exit_timeout), (signal.SIGKILL, 2.0)):
        if only_uid is not None and not sway.group_only_of(pgid, only_uid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            if not procs.group_exists(pgid):
                return
            time.sleep(0.02)
