"""Process liveness and the die-with-parent step every child the host starts takes.

A zombie counts as gone everywhere here: it runs nothing more, and whichever process started
it reaps it.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
try:  # resolved once here: a dlopen in a forked child of a threaded process can deadlock
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """In a forked child: get `sig` when the parent (`parent`, its pid) dies, even by SIGKILL
    (PR_SET_PDEATHSIG). A parent that died between the fork and the prctl is caught by the
    getppid check: the child exits at once (status 1)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os._exit(1)


def die_with_me(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen: the child dies with the calling process."""
    parent = os.getpid()
    return lambda: die_with_parent(parent, sig)


def state(pid: int) -> bytes:
    """The process's state letter from /proc/<pid>/stat (b"X" when there is no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"X"


def alive(pid: object) -> bool:
    """`pid` names a running process (not a zombie). Anything but a positive int is no process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    return state(pid) not in (b"Z", b"X")


def group_exists(pgid: int) -> bool:
    """Process group `pgid` still has a member, zombies included (one signal, no /proc scan:
    cheap enough to poll; a caller whose leader is its own child reaps it while it polls)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Process group `pgid` has a running (not zombie) member."""
    if not group_exists(pgid):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    want = str(pgid).encode()
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == want and fields[0] not in (b"Z", b"X"):
            return True
    return False
