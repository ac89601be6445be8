"""The session manager: a child of the supervisor that starts one process per session.

Why a process of its own: a session lives for hours and must survive what it does not
depend on (daphne restarting, the compat listener or a Celery worker dying) and still end
with the host. Both planes reach it through `runtime.spawn` (a unix socket, 0600 in a 0700
directory, same-user peers only). Each session process gets SIGTERM when the manager dies
(PR_SET_PDEATHSIG) and sits in the manager's process group, so the supervisor's SIGTERM at
host stop reaches every session at once; the manager then waits for them (each runs its
cleanup: app group, undo steps, display, record) before it exits itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from streaming.sessions.runtime import PLANES, read_line, socket_path

log = logging.getLogger("streaming.sessions.manager")

ROOT = Path(__file__).resolve().parents[2]
STOP_WAIT_S = 9.0  # under the supervisor's STOP_GRACE_S (10 s)
SPAWN_READ_S = 5.0  # the requester has this long to send its spec
# Session processes kept warm (Django set up, both planes imported: seconds of CPU on a busy
# host), so a /launch right after another one still finds one ready.
STANDBYS = 2
_PR_SET_PDEATHSIG = 1


def _die_with_manager() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class Manager:
    def __init__(self):
        self.children: dict[int, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.sock: socket.socket | None = None
        self.standby: list[subprocess.Popen] = []
        # PR_SET_PDEATHSIG follows the thread that forked, not the process: a child forked by
        # a request thread would be killed when that thread ends. So the main thread forks
        # (`run_spawns`); request threads queue a reply box here.
        self.spawns: queue.Queue = queue.Queue()

    def listen(self) -> None:
        path = socket_path()
        path.parent.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path.parent, 0o700)
        if path.exists():
            path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.sock.bind(str(path))
        finally:
            os.umask(old)
        self.sock.listen(16)

    def serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                break
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                _pid, uid, _gid = struct.unpack("3i", creds)
                if uid != os.getuid():
                    return
                req = json.loads(read_line(conn, time.monotonic() + SPAWN_READ_S))
                plane, spec = req["plane"], req["spec"]
                if plane not in PLANES or not isinstance(spec, dict):
                    raise ValueError(plane)
            except (OSError, ValueError, KeyError, TypeError, TimeoutError):
                return
            if self.stopping.is_set():
                conn.sendall(b'{"error": "the host is stopping", "status": 503}\n')
                return
            box: queue.Queue = queue.Queue(maxsize=1)
            self.spawns.put(box)
            proc = box.get()
            if proc is None:
                conn.sendall(b'{"error": "the session process could not start", "status": 500}\n')
                return
            try:
                proc.stdin.write(json.dumps({"plane": plane, "spec": spec}).encode() + b"\n")
                proc.stdin.close()
                # The session's first line goes back as is; the requester bounds the wait.
                line = proc.stdout.readline(1 << 20)
            except OSError:
                line = b""
            finally:
                proc.stdout.close()
            if not line.strip():
                line = b'{"error": "the session process exited before answering", "status": 500}'
            try:
                conn.sendall(line.rstrip(b"\n") + b"\n")
            except OSError:
                pass

    def start(self) -> subprocess.Popen:
        """A session process, warming up until its request comes (`process.py`)."""
        env = dict(os.environ, SESSION_MANAGER_PID=str(os.getpid()))
        proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.sessions.process"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=_die_with_manager,
        )
        with self.lock:
            self.children[proc.pid] = proc
        threading.Thread(target=self.reap, args=(proc,), daemon=True).start()
        return proc

    def take(self) -> subprocess.Popen:
        """The oldest (warmest) live standby for a new session, and a new one behind it."""
        self.standby = [p for p in self.standby if p.poll() is None]
        proc = self.standby.pop(0) if self.standby else self.start()
        self.refill()
        log.info("session process %d taken", proc.pid)
        return proc

    def refill(self) -> None:
        while len(self.standby) < STANDBYS:
            self.standby.append(self.start())

    def run_spawns(self, done: threading.Event) -> None:
        """The main thread: hand out session processes (and fork new ones) until `done`."""
        self.refill()
        while not done.is_set():
            try:
                box = self.spawns.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                box.put(self.take())
            except OSError:
                log.exception("session process not started")
                box.put(None)

    def reap(self, proc: subprocess.Popen) -> None:
        proc.wait()
        with self.lock:
            self.children.pop(proc.pid, None)

    def stop(self) -> None:
        """Host stop: every session ends through its own cleanup, then the manager exits."""
        self.stopping.set()
        for proc in self.standby:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # an empty request: it exits
        with self.lock:
            procs = list(self.children.values())
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)  # usually already sent to the whole group
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_WAIT_S
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("session process %d did not end in time; killing it", proc.pid)
                proc.kill()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sessions %(message)s")
    manager = Manager()
    manager.listen()
    done = threading.Event()

    def on_term(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    threading.Thread(target=manager.serve, daemon=True, name="sessions-accept").start()
    manager.run_spawns(done)
    manager.stop()
    try:
        socket_path().unlink()
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
