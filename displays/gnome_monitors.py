"""Virtual monitors on the desktop user's GNOME (`headless_mode` with `compositor_backend`
`mutter`, or `auto` on a GNOME session): one per display of the state machine, each held by
a keeper process (media/mutter/monitor_keeper.py) whose D-Bus connection owns it.

Keepers run in their own session (a signal to the host's process group never reaches them)
and carry `HOST_DISPLAY_OWNER=<state dir>` like the Xvfb servers, so the host finds and ends
every keeper it owns even when its database rows are gone. Whichever process starts one keeps
a thread waiting on it, so a keeper ended from another process is reaped, not left a zombie.

Mutter decides where a new monitor sits (to the right of the others) and moves the rest up
when one goes; the host does not rearrange the person's desktop. Its virtual monitors run at
60 Hz, so a faster mode is refused rather than served at 60.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

from common import procs
from common.statedir import state_dir
from displays import ownedproc

log = logging.getLogger(__name__)

BACKEND = "mutter"
OWNER_ENV = "HOST_DISPLAY_OWNER"
MODULE = "media.mutter.monitor_keeper"
MAX_REFRESH = 60  # mutter 43's virtual monitors
START_TIMEOUT_S = 10.0
STOP_GRACE_S = 3.0
LOCK = "gnome-monitors.lock"
_ROOT = Path(__file__).resolve().parent.parent  # where `python -m media...` finds the package


class MonitorError(RuntimeError):
    pass


def _owner() -> str:
    return str(state_dir())


@contextlib.contextmanager
def _locked():
    """One monitor comes up at a time: a keeper names its monitor as the one that appeared."""
    with open(state_dir() / LOCK, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _env() -> dict:
    """The keeper reaches the user's session bus and PipeWire, nothing else of the host's."""
    keep = ("PATH", "HOME", "LANG", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR",
            "PIPEWIRE_REMOTE")  # fmt: skip
    env = {k: os.environ[k] for k in keep if os.environ.get(k)}
    env["PYTHONPATH"] = str(_ROOT)
    env[OWNER_ENV] = _owner()
    return env


def start(width: int, height: int, refresh: int) -> dict:
    """A new virtual monitor at width x height: {pid, connector, node, x, y}. MonitorError
    with the reason when mutter cannot make it."""
    if refresh > MAX_REFRESH:
        raise MonitorError(f"GNOME's virtual monitors run at {MAX_REFRESH} Hz (mutter 43); "
                           f"{refresh} Hz was asked: set the client to {MAX_REFRESH} fps or "
                           "less")  # fmt: skip
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        raise MonitorError("no D-Bus session bus: the host does not run in a GNOME session")
    with _locked():
        proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, str(width), str(height)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=_env(), cwd=str(_ROOT), start_new_session=True,
        )  # fmt: skip
        line = _first_line(proc)
    try:
        record = json.loads(line) if line else {"error": "the keeper exited without a word"}
    except ValueError:
        record = {"error": "the keeper answered something unreadable"}
    if "error" in record or not record.get("connector"):
        _end(proc)
        raise MonitorError(str(record.get("error"))[:300])
    threading.Thread(target=proc.wait, name=f"monitor-keeper-{proc.pid}", daemon=True).start()
    return {"pid": proc.pid, "connector": str(record["connector"])[:32],
            "node": int(record["node"]), "x": int(record["x"]), "y": int(record["y"])}  # fmt: skip


def _first_line(proc: subprocess.Popen) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline().decode(errors="replace") if ready else ""
    proc.stdout.close()
    if not ready:
        _end(proc)
        raise MonitorError(f"the monitor keeper gave no answer in {START_TIMEOUT_S:g} s")
    return line


def _end(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def is_ours(pid: int) -> bool:
    """True when `pid` is a live keeper this host (this state dir) started."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return MODULE.encode() in argv and ownedproc.marked(pid, f"{OWNER_ENV}={_owner()}")


def alive(pid: int | None) -> bool:
    return procs.alive(pid) and is_ours(pid)


def stop(pid: int | None) -> None:
    """End one of our keepers (mutter removes its monitor) and wait until it is gone."""
    if pid and is_ours(pid) and not ownedproc.terminate(pid, STOP_GRACE_S):
        log.warning("monitor keeper %d did not exit", pid)


def owned_pids() -> list[int]:
    return ownedproc.scan(alive)


def stop_all() -> int:
    pids = owned_pids()
    for pid in pids:
        stop(pid)
    return len(pids)
