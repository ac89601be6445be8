"""The host's last line against orphans: a tiny process that outlives the supervisor by a moment.

Why: PR_SET_PDEATHSIG reaches only the supervisor's direct children, and the processes the host
runs further down (session processes, Xvfb, sway, pulseaudio, apps, hook commands) sit in their
own sessions, out of reach of a process-group kill. When the supervisor is `kill -9`ed, nothing
would stop them. Every one of them carries the host's marks in its environment: HOST_INSTANCE
(one value per supervisor run, inherited by everything the host spawns) and the display servers'
owner variables (per state directory). The sentinel holds the read end of a pipe whose write end
only the supervisor has; when that pipe closes (the supervisor exited, however it died), it gives
the marked processes a short grace to finish their own cleanup, then SIGKILLs what is left.

The next start does the same for a run whose sentinel was killed too (`sweep_stale`).

Stdlib only: it starts in a few tens of milliseconds and needs neither Django nor Redis.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

from common import procs

INSTANCE_ENV = "HOST_INSTANCE"
GRACE_S = 2.0  # the children got SIGTERM (PR_SET_PDEATHSIG); their cleanup gets this long
DISPLAY_OWNER_ENV = "HOST_DISPLAY_OWNER"  # displays/xvfb.py OWNER_ENV
COMPOSITOR_OWNER_ENV = "HOST_COMPOSITOR_OWNER"  # displays/sway.py OWNER_ENV


def compositor_owner(state_dir: str) -> str:
    """displays.headless.owner(): the compositor token prefix of one state directory."""
    return "host-" + hashlib.sha256(state_dir.encode()).hexdigest()[:16] + ":"


def _environ(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return None  # gone, or another user's process (never ours then)


def host_pids(
    state_dir: str, instance: str | None, *, exclude: set[int] = frozenset()
) -> list[int]:
    """Live processes of the host of `state_dir`: those of run `instance` (None: of any run
    other than this process's), and the display servers owned by that state directory."""
    mine = os.environ.get(INSTANCE_ENV)
    display = f"{DISPLAY_OWNER_ENV}={state_dir}".encode()
    compositor = f"{COMPOSITOR_OWNER_ENV}={compositor_owner(state_dir)}".encode()
    in_dir = f"HOST_STATE_DIR={state_dir}".encode()
    run_prefix = f"{INSTANCE_ENV}=".encode()
    skip = {os.getpid(), *exclude}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        env = _environ(int(entry))
        if not env:
            continue
        run = next((v[len(run_prefix) :].decode() for v in env if v.startswith(run_prefix)), None)
        if instance is not None:
            ours = run == instance
        else:
            ours = run is not None and run != mine and in_dir in env
        marked = ours or display in env or any(v.startswith(compositor) for v in env)
        if marked and procs.alive(int(entry)):
            found.append(int(entry))
    return found


def kill_all(state_dir: str, instance: str | None, grace_s: float, exclude=frozenset()) -> int:
    """Wait up to `grace_s` for the host's processes to exit, then SIGKILL the rest (a few
    rounds: a dying parent may still fork). Returns how many were killed."""
    deadline = time.monotonic() + grace_s
    while host_pids(state_dir, instance, exclude=exclude) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed: set[int] = set()
    for _ in range(5):
        pids = host_pids(state_dir, instance, exclude=exclude)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return len(killed)


def sweep_stale(state_dir: str) -> int:
    """Host start: SIGKILL what an earlier run of this state directory left (its supervisor
    and sentinel were both killed, or the machine's init never reaped them)."""
    return kill_all(state_dir, None, 0.0)


class Sentinel:
    """The supervisor's side: start it first, `release()` it last."""

    def __init__(self, state_dir: str, instance: str):
        self.state_dir, self.instance = state_dir, instance
        self.proc: subprocess.Popen | None = None

    def start(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor.sentinel", self.state_dir, self.instance],
            stdin=subprocess.PIPE,
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C or a group kill must not take it too
        )

    def release(self, timeout_s: float = GRACE_S + 3.0) -> None:
        """Close the pipe (the sweep starts) and wait for the sweep to finish: a restart must
        not start new processes the old run's sweep would take for its own, and an update's
        backup (supervisor/launcher.py) must come after the last write of this run. A sweep
        that does not finish in time is finished here."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
            kill_all(self.state_dir, self.instance, 0.0)


def main(argv: list[str]) -> int:
    state_dir, instance = argv
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    supervisor = os.getppid()
    while True:  # until EOF: the supervisor closed the pipe or died
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    # An orderly stop left nothing, so no grace is spent there; after a crash the children
    # are already handling their SIGTERM.
    started = time.monotonic()
    left = host_pids(state_dir, instance, exclude={supervisor})
    killed = kill_all(state_dir, instance, GRACE_S, exclude={supervisor})
    if left:
        names = []
        for pid in left[:8]:
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    names.append(f"{pid} {fh.read().strip()}")
            except OSError:
                names.append(str(pid))
        sys.stderr.write(
            f"host sentinel: {len(left)} process(es) outlived the supervisor ({', '.join(names)}); "
            f"{killed} killed after {time.monotonic() - started:.1f} s\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
