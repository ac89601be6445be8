"""Child processes the supervisor starts, watches and restarts."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field

log = logging.getLogger("hostmgmt.supervisor")

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Children get SIGTERM when the supervisor dies, even by SIGKILL: nothing is orphaned."""
    os.setsid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    critical: bool = True
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    next_start: float = 0.0
    stopping: bool = field(default=False)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=self.env, preexec_fn=_die_with_parent)
        self.started_at = time.monotonic()
        log.info("started %s (pid %d)", self.name, self.proc.pid)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Restart a child that died, with backoff so a crash loop does not spin."""
        if self.stopping or self.proc is None:
            return
        code = self.proc.poll()
        now = time.monotonic()
        if code is None:
            if self.restarts and now - self.started_at > 60:
                self.restarts = 0
            return
        if self.next_start == 0.0:
            delay = min(30.0, 0.5 * (2**self.restarts))
            log.warning("%s exited with %s; restarting in %.1f s", self.name, code, delay)
            self.next_start = now + delay
            # A child killed outright (kill -9, OOM) may leave its own children (a pool
            # worker, a helper) in its process group: they go before a new one starts, so a
            # restart never runs beside its predecessor's leftovers.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if now >= self.next_start:
            self.restarts += 1
            self.next_start = 0.0
            self.start()

    def terminate(self) -> None:
        self.stopping = True
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait(self, deadline: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in time; killing it", self.name)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
