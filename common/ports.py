"""Every port the host opens, derived from the one base port (config key `port`, env HOST_PORT).

Offsets follow the GameStream layout Moonlight clients expect, so two hosts with different
bases run side by side. Concurrent compat sessions each take a port slot k (0 for the first):
slot k streams on every stream port (RTSP, video, control, audio) + 20*k. Moonlight reads the
RTSP port from /launch's `sessionUrl0` and the media ports from the SETUP replies'
`server_port=`, so a client needs nothing but those answers to reach slot k.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass

DEFAULT_BASE_PORT = 47989
SLOT_STRIDE = 20  # slot k's stream ports: slot 0's + 20*k (never meets another slot's)
MAX_SLOTS = 8  # `max_sessions` at most
# The lowest and highest base that keep every derived port, of every slot, inside 1..65535.
MIN_BASE_PORT = 1029
MAX_BASE_PORT = 65535 - 21 - SLOT_STRIDE * (MAX_SLOTS - 1)  # 65374


@dataclass(frozen=True)
class StreamPorts:
    """One compat session's stream ports (its port slot's)."""

    rtsp: int
    video: int
    control: int
    audio: int


@dataclass(frozen=True)
class PortMap:
    base: int

    @property
    def http(self) -> int:  # nvhttp, plain
        return self.base

    @property
    def https(self) -> int:  # nvhttp, client-certificate pinned
        return self.base - 5

    @property
    def mgmt(self) -> int:  # web UI, admin API and management API (TLS)
        return self.base + 1

    @property
    def video(self) -> int:
        return self.base + 9

    @property
    def control(self) -> int:
        return self.base + 10

    @property
    def audio(self) -> int:
        return self.base + 11

    @property
    def rtsp(self) -> int:
        return self.base + 21

    def stream_ports(self, slot: int = 0) -> StreamPorts:
        """The stream ports of port slot `slot` (0 .. MAX_SLOTS-1)."""
        if not 0 <= slot < MAX_SLOTS:
            raise ValueError(f"port slot must be 0 to {MAX_SLOTS - 1}, got {slot}")
        shift = SLOT_STRIDE * slot
        return StreamPorts(self.rtsp + shift, self.video + shift, self.control + shift,
                           self.audio + shift)  # fmt: skip

    def as_dict(self) -> dict[str, int]:
        return {
            "mgmt": self.mgmt,
            "http": self.http,
            "https": self.https,
            "rtsp": self.rtsp,
            "video": self.video,
            "control": self.control,
            "audio": self.audio,
        }

    def tcp_ports(self) -> list[int]:
        return [self.https, self.http, self.mgmt, self.rtsp]

    def udp_ports(self) -> list[int]:
        return [self.video, self.control, self.audio]


def slot_udp_held(bind: str, ports: PortMap, slot: int) -> bool:
    """Whether a process holds one of the UDP stream ports (video, control, audio) of port
    slot `slot` on `bind`: a live session does from its start to its end."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    stream = ports.stream_ports(slot)
    for number in (stream.video, stream.control, stream.audio):
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((bind, number))
            except OSError:
                return True
    return False


def busy_ports(bind: str, ports: PortMap, slots: int = 1) -> list[tuple[int, socket.SocketKind]]:
    """The host's ports that something already holds on `bind`, as (port, socket kind):
    the fixed ones and the stream ports of the first `slots` session slots."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    wanted = [(p, socket.SOCK_STREAM) for p in ports.tcp_ports()]
    wanted += [(p, socket.SOCK_DGRAM) for p in ports.udp_ports()]
    for k in range(1, min(slots, MAX_SLOTS)):
        extra = ports.stream_ports(k)
        wanted += [(extra.rtsp, socket.SOCK_STREAM)]
        wanted += [(p, socket.SOCK_DGRAM) for p in (extra.video, extra.control, extra.audio)]
    busy = []
    for number, kind in wanted:
        with socket.socket(family, kind) as sock:
            if kind == socket.SOCK_STREAM:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((bind, number))
            except OSError:
                busy.append((number, kind))
    return busy


def validate_base_port(port: int) -> int:
    if not MIN_BASE_PORT <= port <= MAX_BASE_PORT:
        raise ValueError(f"base port must be {MIN_BASE_PORT} to {MAX_BASE_PORT}, got {port}")
    return port


__all__ = ["DEFAULT_BASE_PORT", "PortMap", "validate_base_port", "asdict"]
