"""The low-latency video path, peer side: the encoder's H.264 Annex-B access units go to the
page over a WebSocket (decoded there by WebCodecs) instead of RTP.

Why this shape: the WebSocket terminates in daphne (same origin, the page's HTTPS port), the
encoder lives in this session's peer process. Daphne's relay (`wsrelay.py`) connects to a
Unix socket this process serves and forwards each frame as one binary message. Who may
connect: the page learns a one-time token over the WebRTC data channel, whose DTLS proves the
paired device, so the token is the device's authority; the relay finds the socket by token
in the session registry. Audio and input stay on WebRTC.

Frames on the socket: 4-byte little-endian length, then the encoder header
(`media.HEADER`: keyframe, capture monotonic time, encode ms) and the access unit. A consumer that
falls behind (its socket buffer over `BACKLOG_BYTES`) gets no more frames until the next
keyframe, which is requested at once: the page is never fed a growing delay.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import stat
import struct
from pathlib import Path

from common.statedir import state_path
from native.media import HEADER

log = logging.getLogger("native")

LENGTH = struct.Struct("<I")
BACKLOG_BYTES = 512 * 1024


SOCKET_DIR = "native-ws"


class UnsafeSocketDir(RuntimeError):
    """The socket directory is not a 0700 directory of ours: refuse to serve frames in it."""


def socket_dir() -> Path:
    """`<state dir>/native-ws`, a 0700 directory owned by this user.

    Why not /tmp: there another user can create the directory first (or a link by that name)
    and then read the frames or stand in for the socket. Created fresh with 0700; one that
    exists must be a real directory (no link) of ours with mode 0700, else UnsafeSocketDir.
    """
    path = state_path(SOCKET_DIR)
    try:
        path.mkdir(mode=0o700)
        os.chmod(path, 0o700)  # mkdir's mode goes through the umask
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UnsafeSocketDir(f"{path} is not a directory owned by this user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        raise UnsafeSocketDir(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, not 0700")
    return path


class WsVideo:
    """Feeds the newest encoder output to at most one relay connection."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.token = secrets.token_urlsafe(24)
        self.path = str(socket_dir() / f"{os.getpid()}.sock")
        self.queue: asyncio.Queue = asyncio.Queue()
        self.frames = self.bytes = self.skipped = 0
        self.encode_ms = 0.0
        self.writer: asyncio.StreamWriter | None = None
        self.server: asyncio.AbstractServer | None = None
        self.task: asyncio.Task | None = None
        self._want_key = True

    async def start(self) -> None:
        Path(self.path).unlink(missing_ok=True)
        self.server = await asyncio.start_unix_server(self._client, path=self.path)
        os.chmod(self.path, 0o600)
        self.encoder.pump(asyncio.get_running_loop(), self.queue)
        self.task = asyncio.create_task(self._forward())

    def request_keyframe(self) -> None:
        self.encoder.keyframe.set()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        old, self.writer = self.writer, writer
        if old is not None:  # a reconnect replaces the previous viewer
            old.close()
        self._want_key = True
        self.request_keyframe()
        try:
            await reader.read()  # the relay never writes; EOF = it went away
        finally:
            if self.writer is writer:
                self.writer = None
            writer.close()

    async def _forward(self) -> None:
        while True:
            raw = await self.queue.get()
            if raw is None:
                return
            keyframe, _t, encode_ms = HEADER.unpack_from(raw)
            self.encode_ms = encode_ms
            writer = self.writer
            if writer is None or writer.is_closing():
                continue
            if writer.transport.get_write_buffer_size() > BACKLOG_BYTES:
                self._want_key = True
            if self._want_key and not keyframe:
                self.skipped += 1
                self.request_keyframe()
                continue
            self._want_key = False
            writer.write(LENGTH.pack(len(raw)) + raw)
            self.frames += 1
            self.bytes += len(raw) - HEADER.size

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()
        if self.server is not None:
            self.server.close()
        Path(self.path).unlink(missing_ok=True)
