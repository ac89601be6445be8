"""Child processes the supervisor starts, watches and restarts."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field

from common import procs
from supervisor.sentinel import _environ

log = logging.getLogger("supervisor")

# Marks everything a child started (inherited through the environment, session or not) with
# the child's own run, so what outlives a child killed outright can be found and ended.
CHILD_RUN_ENV = "HOST_CHILD_RUN"


def kill_marked(run_mark: str) -> int:
    """SIGKILL every live process carrying `HOST_CHILD_RUN=<run_mark>`; returns how many."""
    mark = f"{CHILD_RUN_ENV}={run_mark}".encode()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        env = _environ(int(entry))
        if env is not None and mark in env:
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
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
    # Whether what this child starts in sessions of its own (hook commands) is ended when the
    # child dies outright: its process group is not theirs, and a restarted worker knows
    # nothing of its predecessor's commands.
    sweep_marked: bool = False
    run_mark: str = ""
    # Descriptors the child inherits (the shared web socket), under the same numbers.
    pass_fds: tuple[int, ...] = ()

    def start(self) -> None:
        """Every child of the supervisor goes through here (a new kind gets the same care):
        own process group, death signal, and the host's HOST_INSTANCE mark (sentinel.py)."""
        env = self.env
        if self.sweep_marked:
            self.run_mark = f"{self.name}:{secrets.token_hex(8)}"
            env = {**self.env, CHILD_RUN_ENV: self.run_mark}
        self.proc = subprocess.Popen(
            self.argv,
            env=env,
            start_new_session=True,
            preexec_fn=procs.die_with_me(),
            pass_fds=self.pass_fds,
        )
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
            # A child killed outright (kill -9, OOM) may leave its own children (a pool
            # worker, a helper) in its process group: they go before a new one starts, so a
            # restart never runs beside its predecessor's leftovers.
            _killpg(self.proc.pid, signal.SIGKILL)
            if self.sweep_marked and (n := kill_marked(self.run_mark)):
                log.warning("%s left %d processes of its own sessions; killed them", self.name, n)
            delay = min(30.0, 0.5 * (2**self.restarts))
            log.warning("%s exited with %s; restarting in %.1f s", self.name, code, delay)
            self.next_start = now + delay
        if now >= self.next_start:
            self.restarts += 1
            self.next_start = 0.0
            self.start()

    def terminate(self) -> None:
        """SIGTERM to the child's whole process group (its workers and forks too)."""
        self.stopping = True
        if self.proc is not None and self.proc.returncode is None:
            _killpg(self.proc.pid, signal.SIGTERM)

    def wait(self, deadline: float) -> None:
        """Until the child exits; SIGKILL for its whole group at `deadline`."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in time; killing it", self.name)
            _killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def group_alive(self) -> bool:
        return self.proc is not None and procs.group_exists(self.proc.pid)

    def kill_group(self) -> None:
        if self.proc is not None:
            _killpg(self.proc.pid, signal.SIGKILL)


GROUP_GRACE_S = 2.0


def finish_groups(children: list[Child], grace_s: float = GROUP_GRACE_S) -> None:
    """After the leaders exited: the rest of each child's process group (workers, forks) gets
    `grace_s` to go, then SIGKILL. A leader that exits first must not leave its workers."""
    deadline = time.monotonic() + grace_s
    while any(c.group_alive() for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    for child in children:
        if child.group_alive():
            log.warning("%s left processes in its group; killing them", child.name)
            child.kill_group()
