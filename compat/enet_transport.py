"""A thin host-side ENet endpoint for the control stream, over pyenet 1.3.17.

Moonlight's ENet fork keeps upstream's wire format, so plain ENet 1.3.17 serves it (IPv4 only).
What matters for the client: accept 0x30 channels (channel limit 0 = the maximum), leave
checksums and the range coder off, send every host message reliably on channel 0, and read the
CONNECT event's data (the ``X-SS-Connect-Data`` value) to bind the peer to its session.

pyenet's ``service()`` holds the GIL while it waits, so callers poll with short timeouts (or
wait on :meth:`fileno` first). A datagram over 4096 bytes makes 1.3.17 raise IOError; that is
caught here and treated as noise, not a dead listener.
"""

from __future__ import annotations

import select
from dataclasses import dataclass
from typing import Any

try:
    import enet
except ImportError:  # pragma: no cover - pyenet is in requirements.txt
    enet = None

MAX_PEERS = 128
HOST_CHANNEL = 0


@dataclass
class EnetEvent:
    kind: str  # "connect" | "receive" | "disconnect"
    peer: Any
    data: bytes = b""
    connect_data: int = 0
    channel: int = 0
    address: str = ""  # the peer's IP (connect events), for the session's client check


class EnetHost:
    """Bind ``address:port`` (UDP) and turn ENet events into :class:`EnetEvent`."""

    def __init__(self, port: int, address: str = "0.0.0.0", peers: int = MAX_PEERS):
        if enet is None:
            raise RuntimeError("pyenet is not installed")
        self._host = enet.Host(enet.Address(address.encode(), port), peers, 0, 0, 0)
        self.port = port

    def fileno(self) -> int:
        return self._host.socket.fileno()

    def service(self, timeout_ms: int = 0) -> EnetEvent | None:
        """One ENet event, waiting up to ``timeout_ms``.

        The wait happens in ``select`` (which releases the GIL), then ENet is serviced without
        blocking: pyenet's own blocking wait would freeze the encoder thread meanwhile.
        """
        if timeout_ms > 0:
            ev = self._service(0)
            if ev is not None:
                return ev
            select.select([self.fileno()], [], [], timeout_ms / 1000)
        return self._service(0)

    def _service(self, timeout_ms: int) -> EnetEvent | None:
        try:
            ev = self._host.service(timeout_ms)
        except OSError:
            return None  # oversized or truncated datagram: drop it, keep serving
        if ev is None or ev.type == enet.EVENT_TYPE_NONE:
            return None
        if ev.type == enet.EVENT_TYPE_CONNECT:
            return EnetEvent(
                "connect",
                ev.peer,
                connect_data=int(ev.data) & 0xFFFFFFFF,
                address=_peer_ip(ev.peer),
            )
        if ev.type == enet.EVENT_TYPE_RECEIVE:
            return EnetEvent("receive", ev.peer, data=bytes(ev.packet.data), channel=ev.channelID)
        return EnetEvent("disconnect", ev.peer)

    def send(self, peer: Any, data: bytes) -> bool:
        """Reliable, channel 0: how every host control message travels."""
        return peer.send(HOST_CHANNEL, enet.Packet(data, enet.PACKET_FLAG_RELIABLE)) == 0

    def flush(self) -> None:
        self._host.flush()

    @staticmethod
    def disconnect_now(peer: Any) -> None:
        peer.disconnect_now(0)

    def close(self) -> None:
        # pyenet frees the ENetHost when the object is collected; drop our reference.
        self._host = None


def _peer_ip(peer: Any) -> str:
    """The peer's IP as text ('' when pyenet cannot say: the session then refuses it)."""
    try:
        host = peer.address.host
    except (AttributeError, OSError):
        return ""
    return host.decode("ascii", "replace") if isinstance(host, bytes) else str(host or "")
