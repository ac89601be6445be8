"""How a plane starts a session: `spawn()`, the one way for both planes.

The session manager (`streaming.sessions.manager`, a child of the supervisor) forks one
process per session (`streaming.sessions.process.run`); `spawn` asks it over a
unix socket in a 0700 directory of the state dir, hands it the plane's spec and returns the
session process's first answer line (native: the SDP answer; compat: that it started).

The manager imports both planes before it listens (seconds on a loaded machine), so a client
arriving while it starts waits for its socket (`MANAGER_WAIT_S`) instead of a 503.
"""

from __future__ import annotations

import json
import socket
import time

from common.statedir import state_path

PLANES = ("compat", "native")
MAX_LINE = 1 << 20
MANAGER_WAIT_S = 10.0  # a manager that is still starting gets this long to listen


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


def _connect(wait_s: float) -> socket.socket:
    """A socket connected to the manager, waiting up to `wait_s` for a manager that is still
    starting (no socket file yet, or not listening on it yet); OSError when it never does."""
    path = str(socket_path())
    deadline = time.monotonic() + wait_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
        except OSError:
            sock.close()
            raise


def spawn(plane: str, spec: dict, timeout_s: float, manager_wait_s: float = MANAGER_WAIT_S) -> dict:
    """Start a session of `plane` and return its first answer (a dict). SpawnError when the
    manager does not listen within `manager_wait_s` (503), the session does not answer in
    time (504) or says nothing."""
    if plane not in PLANES:
        raise ValueError(plane)
    try:
        with _connect(manager_wait_s) as sock:
            deadline = time.monotonic() + timeout_s
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
