"""The Wayland wire format: messages as bytes, and the unix socket that carries them.

A message is a 32-bit sender object id, a 32-bit word holding (size << 16 | opcode), then
the arguments, each padded to 32 bits, in host byte order. File descriptors travel beside the
bytes, as SCM_RIGHTS ancillary data, in argument order. Signatures use the letters of
libwayland's own: i int, u uint, f fixed (24.8), s string, o object, n new_id, a array, h fd;
a leading '?' makes a string or object nullable (sent as 0 / absent).
"""

from __future__ import annotations

import array
import os
import socket
import struct
from collections import deque

HEADER = struct.Struct("=II")
MAX_MESSAGE = 4096  # libwayland's limit for one message
MAX_FDS_PER_RECV = 28  # libwayland's MAX_FDS_OUT


class WireError(Exception):
    """A message that cannot be encoded or decoded (bad argument, truncated or oversized)."""


def parse_signature(signature: str) -> list[tuple[str, bool]]:
    """'?su' -> [('s', True), ('u', False)]: each argument's letter and whether it may be null."""
    out, nullable = [], False
    for ch in signature:
        if ch == "?":
            nullable = True
            continue
        if ch not in "iufsonah":
            raise WireError(f"unknown signature letter {ch!r}")
        out.append((ch, nullable))
        nullable = False
    return out


def to_fixed(value: float) -> int:
    """A float as 24.8 fixed point (a signed 32-bit int)."""
    return int(round(value * 256.0))


def from_fixed(raw: int) -> float:
    return raw / 256.0


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def encode(
    object_id: int, opcode: int, signature: str, args: tuple | list
) -> tuple[bytes, list[int]]:
    """One message: (bytes, fds to send with it). Object arguments are ids (0 for null)."""
    spec = parse_signature(signature)
    if len(spec) != len(args):
        raise WireError(f"signature {signature!r} takes {len(spec)} arguments, got {len(args)}")
    body, fds = bytearray(), []
    for (kind, nullable), value in zip(spec, args, strict=True):
        if kind == "i":
            body += struct.pack("=i", value)
        elif kind in "u":
            body += struct.pack("=I", value)
        elif kind == "f":
            body += struct.pack("=i", to_fixed(value))
        elif kind in "on":
            if value is None or value == 0:
                if not nullable and kind == "o":
                    raise WireError("null object for a non-nullable argument")
                value = 0
            body += struct.pack("=I", value)
        elif kind == "s":
            if value is None:
                if not nullable:
                    raise WireError("null string for a non-nullable argument")
                body += struct.pack("=I", 0)
                continue
            raw = value.encode() if isinstance(value, str) else bytes(value)
            if b"\0" in raw:
                raise WireError("a string argument may not hold NUL")
            raw += b"\0"
            body += struct.pack("=I", len(raw)) + _pad(raw)
        elif kind == "a":
            raw = bytes(value)
            body += struct.pack("=I", len(raw)) + _pad(raw)
        elif kind == "h":
            fds.append(int(value))
    size = HEADER.size + len(body)
    if size > MAX_MESSAGE:
        raise WireError(f"message of {size} bytes is over the {MAX_MESSAGE}-byte limit")
    return HEADER.pack(object_id, size << 16 | opcode) + bytes(body), fds


def decode_args(signature: str, body: bytes, fds: deque[int]) -> list:
    """The arguments of one message body; fds are taken from the front of `fds`."""
    out, pos = [], 0

    def word() -> int:
        nonlocal pos
        if pos + 4 > len(body):
            raise WireError("message body too short for its signature")
        (v,) = struct.unpack_from("=I", body, pos)
        pos += 4
        return v

    for kind, _nullable in parse_signature(signature):
        if kind == "i":
            out.append(struct.unpack("=i", struct.pack("=I", word()))[0])
        elif kind in "uon":
            out.append(word())
        elif kind == "f":
            out.append(from_fixed(struct.unpack("=i", struct.pack("=I", word()))[0]))
        elif kind in "sa":
            n = word()
            if pos + n > len(body):
                raise WireError("string or array runs past the message end")
            raw = body[pos : pos + n]
            pos += n + (-n % 4)
            if kind == "s":
                out.append(None if n == 0 else raw.rstrip(b"\0").decode("utf-8", "replace"))
            else:
                out.append(bytes(raw))
        elif kind == "h":
            if not fds:
                raise WireError("message expects a file descriptor that did not arrive")
            out.append(fds.popleft())
    return out


class Connection:
    """A Wayland socket: queued outgoing messages with their fds, and incoming bytes + fds."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._out = bytearray()
        self._out_fds: list[int] = []
        self._in = bytearray()
        self.in_fds: deque[int] = deque()

    def queue(self, data: bytes, fds: list[int]) -> None:
        if fds and self._out:
            self.flush()  # keep each batch of fds with the bytes that name them
        self._out += data
        self._out_fds += fds

    def flush(self) -> None:
        while self._out:
            anc = []
            if self._out_fds:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", self._out_fds))]
            sent = self.sock.sendmsg([bytes(self._out)], anc)
            self._out_fds = []
            del self._out[:sent]

    def fill(self, timeout: float | None) -> bool:
        """Read what the socket has (waiting up to `timeout`); False on timeout.
        Raises ConnectionError when the peer closed the socket."""
        self.sock.settimeout(timeout)
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(
                65536, socket.CMSG_SPACE(MAX_FDS_PER_RECV * 4)
            )
        except (TimeoutError, BlockingIOError):
            return False
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                self.in_fds.extend(fds)
        if not data:
            raise ConnectionError("the compositor closed the connection")
        self._in += data
        return True

    def next_message(self) -> tuple[int, int, bytes] | None:
        """(object id, opcode, body) of the next complete message in the buffer, or None."""
        if len(self._in) < HEADER.size:
            return None
        object_id, word = HEADER.unpack_from(self._in, 0)
        size, opcode = word >> 16, word & 0xFFFF
        if size < HEADER.size:
            raise WireError(f"message header says {size} bytes")
        if len(self._in) < size:
            return None
        body = bytes(self._in[HEADER.size : size])
        del self._in[:size]
        return object_id, opcode, body

    def close(self) -> None:
        for fd in self.in_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.in_fds.clear()
        self.sock.close()
