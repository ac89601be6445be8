"""sway's IPC (the i3 IPC framing): "i3-ipc", payload length and message type as native 32-bit
words, then a JSON payload; the reply has the same header with the request's type.

One socket per `SwayIPC`, one request at a time (a lock serialises threads). A command sway
refuses raises SwayCommandError with sway's own error text.
"""

from __future__ import annotations

import json
import socket
import struct
import threading

MAGIC = b"i3-ipc"
HEADER = struct.Struct("=6sII")
MAX_REPLY = 64 * 1024 * 1024

RUN_COMMAND = 0
GET_WORKSPACES = 1
GET_OUTPUTS = 3
GET_TREE = 4
GET_VERSION = 7
GET_INPUTS = 100
GET_SEATS = 101


class SwayIPCError(Exception):
    """The IPC socket cannot be reached, or answered something that is not sway IPC."""


class SwayCommandError(SwayIPCError):
    """sway refused a command; `.errors` holds its messages."""

    def __init__(self, command: str, errors: list[str]):
        super().__init__(f"sway refused {command!r}: {'; '.join(errors)}")
        self.command, self.errors = command, errors


def encode(msg_type: int, payload: bytes | str = b"") -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return HEADER.pack(MAGIC, len(data), msg_type) + data


class SwayIPC:
    def __init__(self, path: str, timeout: float = 10.0, peer_pid: int | None = None):
        """`peer_pid`: the sway process that must be listening on `path`. The socket lives in
        a directory the compositor's user (and so every app in it) can write, so a host that
        trusts sway's answers checks who answers, not only where."""
        self.path = path
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
            if peer_pid is not None:
                cred = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                pid = struct.unpack("3i", cred)[0]
                if pid != peer_pid:
                    raise SwayIPCError(
                        f"the IPC socket {path} belongs to pid {pid}, not sway (pid {peer_pid})"
                    )
        except OSError as e:
            self._sock.close()
            raise SwayIPCError(f"no sway IPC at {path}: {e}") from e
        except SwayIPCError:
            self._sock.close()
            raise

    def request(self, msg_type: int, payload: bytes | str = b""):
        """Send one message; its decoded JSON reply."""
        with self._lock:
            try:
                self._sock.sendall(encode(msg_type, payload))
                head = self._read(HEADER.size)
                magic, length, reply_type = HEADER.unpack(head)
                if magic != MAGIC or length > MAX_REPLY:
                    raise SwayIPCError(f"{self.path} answered something that is not sway IPC")
                body = self._read(length)
            except OSError as e:
                raise SwayIPCError(f"sway IPC at {self.path} failed: {e}") from e
        if reply_type != msg_type:
            raise SwayIPCError(f"sway answered message type {reply_type} to {msg_type}")
        return json.loads(body)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise SwayIPCError(f"sway closed the IPC socket {self.path}")
            buf += chunk
        return bytes(buf)

    def run_command(self, command: str) -> list[dict]:
        """Run sway commands (';'- or ','-separated); SwayCommandError if any failed."""
        results = self.request(RUN_COMMAND, command)
        errors = [r.get("error") or "failed" for r in results if not r.get("success")]
        if errors:
            raise SwayCommandError(command, errors)
        return results

    def get_outputs(self) -> list[dict]:
        return self.request(GET_OUTPUTS)

    def get_tree(self) -> dict:
        return self.request(GET_TREE)

    def get_version(self) -> dict:
        return self.request(GET_VERSION)

    def get_workspaces(self) -> list[dict]:
        return self.request(GET_WORKSPACES)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> SwayIPC:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def views(tree: dict) -> list[dict]:
    """Every window (leaf container with a pid) in a get_tree() answer, with `output` added."""
    out: list[dict] = []

    def walk(node: dict, output: str | None) -> None:
        if node.get("type") == "output":
            output = node.get("name")
        children = node.get("nodes", []) + node.get("floating_nodes", [])
        if not children and node.get("type") in ("con", "floating_con") and node.get("pid"):
            out.append({**node, "output": output})
        for child in children:
            walk(child, output)

    walk(tree, None)
    return out
