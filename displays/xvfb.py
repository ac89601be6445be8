"""The Xvfb backend: one X server per virtual display, at the display's mode.

Servers run in their own session (a terminal's Ctrl-C or the supervisor's signal to its process
group never reaches them) and carry `HOST_DISPLAY_OWNER=<state dir>` in their environment, so the
host can find and kill every server it owns even when its database rows are gone. Whichever
process starts a server keeps a thread waiting on it, so a server killed from another process
is reaped rather than left as a zombie.

Every server requires the host's cookie (`-auth`, displays/xauth.py) and admits the host's own
uid without it (`localuser`, added with the cookie before the display is handed out): the
host's capture, input and clipboard and the apps it launches get in, another local user does
not.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

from common import procs
from common.statedir import state_dir
from displays import ownedproc, xauth

log = logging.getLogger(__name__)

BACKEND = "xvfb"
OWNER_ENV = "HOST_DISPLAY_OWNER"
START_TIMEOUT_S = 10.0
STOP_GRACE_S = 3.0
DEPTH = 24


class BackendError(RuntimeError):
    pass


def binary() -> str | None:
    return shutil.which("Xvfb")


def available() -> bool:
    return binary() is not None


def _owner() -> str:
    return str(state_dir())


def start(width: int, height: int) -> tuple[int, str]:
    """Start a server and return (pid, ":N") once it accepts connections."""
    exe = binary()
    if exe is None:
        raise BackendError("Xvfb is not installed (Debian package xvfb)")
    try:
        auth = xauth.ensure()
    except xauth.XauthError as exc:
        raise BackendError(f"no X cookie for Xvfb: {exc}") from None
    read_fd, write_fd = os.pipe()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), OWNER_ENV: _owner()}
    argv = [
        exe,
        "-screen",
        "0",
        f"{width}x{height}x{DEPTH}",
        "-nolisten",
        "tcp",
        "-noreset",
        "-auth",
        str(auth),
        "-displayfd",
        str(write_fd),
    ]
    try:
        proc = subprocess.Popen(
            argv,
            pass_fds=(write_fd,),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise BackendError(f"cannot start Xvfb: {exc}") from None
    os.close(write_fd)
    threading.Thread(target=proc.wait, name=f"xvfb-reaper-{proc.pid}", daemon=True).start()
    # Read up to the newline: Xvfb writes the number and the newline separately and dies if the
    # reader closes in between.
    buf = b""
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                break
            chunk = os.read(read_fd, 32)
            if not chunk:
                break
            buf += chunk
    finally:
        os.close(read_fd)
    number = buf.decode(errors="replace").strip()
    if not number.isdigit():
        stop(proc.pid)
        raise BackendError(f"Xvfb did not start at {width}x{height}")
    try:
        _admit_own_uid(f":{number}", auth)
    except Exception as exc:  # whatever it was, the display is of no use
        stop(proc.pid)
        raise BackendError(f"Xvfb :{number} refused the host's cookie: {exc}") from None
    return proc.pid, f":{number}"


def _admit_own_uid(x_display: str, auth) -> None:
    """Admit the host's own uid without a cookie (server-interpreted `localuser:#uid`, checked
    by the socket's peer credentials; what Xwayland does for its user): every process of the
    host (capture, XTEST input, clipboard, apps) gets in whatever its XAUTHORITY, and no other
    uid does. Done over the X protocol with the cookie, before the display is handed out."""
    cookie = next(e[4] for e in xauth.parse(auth.read_bytes()) if e[3] == xauth.AUTH_NAME)
    name = xauth.AUTH_NAME
    setup = struct.pack("<BxHHHHxx", ord("l"), 11, 0, len(name), len(cookie))
    setup += _pad(name) + _pad(cookie)
    host = _pad(b"localuser\0#%d" % os.geteuid())
    address_len = len(b"localuser\0#%d" % os.geteuid())
    # ChangeHosts(Insert, ServerInterpreted), then GetInputFocus: its reply says the first
    # request was done (an error would come back in its place)
    change = struct.pack("<BBHBxH", 109, 0, 2 + len(host) // 4, 5, address_len) + host
    sync = struct.pack("<BxH", 43, 1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(START_TIMEOUT_S)
        sock.connect(f"/tmp/.X11-unix/X{x_display.lstrip(':')}")
        sock.sendall(setup)
        head = _recv(sock, 8)
        if head[0] != 1:
            raise BackendError("the X server refused the cookie")
        _recv(sock, 4 * struct.unpack_from("<H", head, 6)[0])
        sock.sendall(change + sync)
        reply = _recv(sock, 32)
    if reply[0] != 1:
        raise BackendError(f"ChangeHosts failed (X error {reply[1]})")


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise BackendError("the X server closed the connection")
        buf += chunk
    return buf


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def is_ours(pid: int) -> bool:
    """True when `pid` is a live Xvfb this host (this state dir) started."""
    argv = _cmdline(pid)
    if not argv or os.path.basename(argv[0]) != b"Xvfb":
        return False
    return ownedproc.marked(pid, f"{OWNER_ENV}={_owner()}")


def alive(pid: int | None) -> bool:
    return procs.alive(pid) and is_ours(pid)


def stop(pid: int | None) -> None:
    """Terminate one of our servers and wait until it is gone (zombie counts as gone)."""
    if pid and is_ours(pid) and not ownedproc.terminate(pid, STOP_GRACE_S):
        log.warning("Xvfb %d did not exit", pid)


def owned_pids() -> list[int]:
    """Every live Xvfb this state dir owns, found by scanning /proc."""
    return ownedproc.scan(alive)


def stop_all() -> int:
    pids = owned_pids()
    for pid in pids:
        stop(pid)
    return len(pids)
