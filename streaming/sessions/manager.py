"""The session manager: a child of the supervisor that runs one process per session.

Why a process of its own: a session lives for hours and must survive what it does not
depend on (daphne restarting, the compat listener or a Celery worker dying) and still end
with the host. Both planes reach it through `runtime.spawn` (a unix socket, 0600 in a 0700
directory, same-user peers only).

It is a fork server: it sets Django up and imports both planes once (`process.warm_up`,
seconds of CPU on a busy host), then forks a child per request, so a /launch or an offer never
waits for an interpreter. It stays single-threaded and opens no database or Redis connection,
so a fork copies nothing a child could trip on. Each child gets SIGTERM when the manager dies
(PR_SET_PDEATHSIG) and sits in the manager's process group, so the supervisor's SIGTERM at
host stop reaches every session at once; the manager then waits for them (each runs its
cleanup: app group, undo steps, display, record) before it exits itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback

from common import procs
from streaming.sessions import process
from streaming.sessions.runtime import MAX_LINE, PLANES, socket_path

log = logging.getLogger("streaming.sessions.manager")

STOP_WAIT_S = 9.0  # under the supervisor's STOP_GRACE_S (10 s)
SPAWN_READ_S = 5.0  # the requester has this long to send its request


def listen() -> socket.socket:
    path = socket_path()
    path.parent.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path.parent, 0o700)
    if path.exists():
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.listen(16)
    sock.setblocking(False)
    return sock


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return struct.unpack("3i", creds)[1] == os.getuid()


def _request(buf: bytes) -> tuple[str, dict] | None:
    try:
        req = json.loads(buf.split(b"\n", 1)[0])
        plane, spec = req["plane"], req["spec"]
    except (ValueError, KeyError, TypeError):
        return None
    if plane not in PLANES or not isinstance(spec, dict):
        return None
    return plane, spec


class Manager:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.children: set[int] = set()
        self.recoveries: set[int] = set()  # children running `recover` (not sessions)
        self.pending: dict[socket.socket, tuple[bytes, float]] = {}
        self.stopping = False

    def serve(self) -> None:
        while not self.stopping:
            ready, _, _ = select.select([self.sock, *self.pending], [], [], 0.5)
            for s in ready:
                if s is self.sock:
                    self.accept()
                else:
                    self.read(s)
            now = time.monotonic()
            for conn, (_, deadline) in list(self.pending.items()):
                if now > deadline:
                    self.drop(conn)
            self.reap()

    def accept(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        if not _same_user(conn):
            conn.close()
            return
        conn.setblocking(False)
        self.pending[conn] = (b"", time.monotonic() + SPAWN_READ_S)

    def drop(self, conn: socket.socket) -> None:
        self.pending.pop(conn, None)
        conn.close()

    def read(self, conn: socket.socket) -> None:
        buf, deadline = self.pending[conn]
        try:
            chunk = conn.recv(65536)
        except OSError:
            chunk = b""
        if not chunk or len(buf) + len(chunk) > MAX_LINE:
            self.drop(conn)
            return
        buf += chunk
        if b"\n" not in buf:
            self.pending[conn] = (buf, deadline)
            return
        self.pending.pop(conn)
        req = _request(buf)
        if req is None:
            conn.close()
            return
        self.fork(conn, *req)

    def fork(self, conn: socket.socket, plane: str, spec: dict) -> None:
        manager_pid = os.getpid()
        pid = os.fork()
        if pid == 0:  # the session process
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                procs.die_with_parent(manager_pid)
                self.sock.close()
                for other in self.pending:
                    other.close()
                conn.setblocking(True)
                os.dup2(conn.fileno(), 1)  # the first answer line goes to the requester
                conn.close()
                code = process.run(plane, spec)
            except BaseException:  # a child never returns into the manager
                traceback.print_exc()
            finally:
                os._exit(code or 0)
        conn.close()
        self.children.add(pid)
        log.info("%s session process %d started", plane, pid)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            if pid in self.recoveries:
                self.recoveries.discard(pid)
            elif os.WIFSIGNALED(status) and not self.stopping:
                self.recover(pid, os.WTERMSIG(status))

    def recover(self, pid: int, signum: int) -> None:
        """A session process killed outright (SIGKILL, a crash) ran none of its cleanup: a
        child of its own hands back what the session's record says it held
        (`lifecycle.recover_lost`), so the manager stays single-threaded and free of
        database and Redis connections."""
        log.warning("session process %d was killed by signal %d; recovering", pid, signum)
        child = os.fork()
        if child == 0:
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                self.sock.close()
                for other in self.pending:
                    other.close()
                # Django app loading: lifecycle's imports need the app registry, which
                # process.warm_up set up (this module stays Django-free: native.media's
                # spawned encoder child imports it as its __mp_main__)
                from streaming.sessions import lifecycle

                lifecycle.recover_lost(pid, signum)
                code = 0
            except BaseException:  # never return into the manager
                traceback.print_exc()
            finally:
                os._exit(code)
        self.children.add(child)
        self.recoveries.add(child)

    def stop(self) -> None:
        """Host stop: every session ends through its own cleanup, then the manager exits."""
        self.sock.close()
        for conn in list(self.pending):
            self.drop(conn)
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)  # usually already sent to the whole group
        deadline = time.monotonic() + STOP_WAIT_S
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for pid in list(self.children):
            log.warning("session process %d did not end in time; killing it", pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.reap()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sessions %(message)s")
    os.environ["SESSION_MANAGER_PID"] = str(os.getpid())
    process.warm_up()
    manager = Manager(listen())

    def on_term(signum, frame):
        manager.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    manager.serve()
    manager.stop()
    with contextlib.suppress(OSError):
        socket_path().unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
