"""How a plane starts a session: `spawn()`, the one way for both planes.

The session manager (`streaming.sessions.manager`, a child of the supervisor) forks one
process per session (`streaming.sessions.process.run`); `spawn` asks it over a
unix socket in a 0700 directory of the state dir, hands it the plane's spec and returns the
session process's first answer line (native: the SDP answer; compat: that it started).
"""

from __future__ import annotations

import json
import socket
import time

from hostmgmt.lib.statedir import state_path

PLANES = ("compat", "native")
MAX_LINE = 1 << 20


class SpawnError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def socket_path():
    return state_path("sessions", "manager.sock")


def read_line(sock: socket.socket, deadline: float) -> bytes:
    """One newline-terminated line (at most MAX_LINE bytes) before `deadline`."""
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_LINE:
            raise ValueError("line too long")
    return buf.split(b"\n", 1)[0]


def spawn(plane: str, spec: dict, timeout_s: float) -> dict:
    """Start a session of `plane` and return its first answer (a dict). SpawnError when the
    manager is unreachable (503), the session does not answer in time (504) or says nothing."""
    if plane not in PLANES:
        raise ValueError(plane)
    deadline = time.monotonic() + timeout_s
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(socket_path()))
            sock.sendall(json.dumps({"plane": plane, "spec": spec}).encode() + b"\n")
            line = read_line(sock, deadline)
    except TimeoutError:
        raise SpawnError(504, "the session did not start in time") from None
    except OSError:
        raise SpawnError(503, "the session manager is not running") from None
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise SpawnError(500, "the session process gave no answer")
    return answer
