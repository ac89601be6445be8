"""A stream session's launch on loopback with free ports, for the engine tests."""

from __future__ import annotations

import socket

import numpy as np

from compat.engine.stream import Launch


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rtsp_request(port: int, data: bytes, timeout: float = 5) -> bytes:
    """One RTSP request on its own connection, the reply read to EOF (as the client does)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(data)
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
    return reply


def loopback_launch(**kw) -> Launch:
    """The client is 127.0.0.1, as /launch would have recorded it (override with client_ip)."""
    kw.setdefault("client_ip", "127.0.0.1")
    return Launch(
        rikey=bytes(range(16)),
        rikeyid=1,
        host="127.0.0.1",
        rtsp_port=free_port(socket.SOCK_STREAM),
        video_port=free_port(socket.SOCK_DGRAM),
        control_port=free_port(socket.SOCK_DGRAM),
        audio_port=free_port(socket.SOCK_DGRAM),
        **kw,
    )


def black(w: int, h: int) -> np.ndarray:
    return np.zeros((h, w, 4), np.uint8)
