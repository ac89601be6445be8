"""Who a compat session listens to, and where its video and audio may go (no sockets here).

GameStream clients tell the host where to send video and audio by pinging the media ports from
their receive sockets. Trusting any ping lets one spoofed datagram redirect a live stream, so a
session is bound to one client IP (the nvhttp peer that called /launch or /resume, else the
first RTSP peer) and the rules below decide which datagram may set the destination:

* only datagrams from the client's IP count; anything else is ignored;
* a client whose ANNOUNCE has ``x-ml-general.featureFlags`` bit 0x02 (session-id pings, every
  Moonlight that speaks to Sunshine-style hosts) must send the 20-byte ping that starts with
  the payload its SETUP replies handed out; the legacy ``PING`` is accepted only from clients
  that never promised one;
* until the first datagram of the stream has gone out a later ping from the client's IP may
  move the destination port (NAT rebinding during the handshake); from then on the
  destination never changes for the rest of the stream.

A refused datagram from anyone but the stream's own destination is counted and logged once
per endpoint, with the sender's address but never the datagram (it may hold the payload).
"""

from __future__ import annotations

import logging
import struct
import threading

log = logging.getLogger("compat.engine")

LEGACY_PING = b"PING"
PING_SIZE = 20  # 16 ASCII payload bytes, then a u32 BE counter
ML_FF_SESSION_ID_V1 = 0x02  # x-ml-general.featureFlags: payload pings and connect data


def normalize_ip(host: str | bytes | None) -> str:
    """An address as the session compares it: IPv4-mapped IPv6 reduced to plain IPv4."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = (host or "").strip()
    return host[7:] if host.lower().startswith("::ffff:") and "." in host else host


def payload_pings_required(ml_feature_flags: int) -> bool:
    """Whether the client's ANNOUNCE promised payload pings (then legacy PINGs are refused)."""
    return bool(ml_feature_flags & ML_FF_SESSION_ID_V1)


def is_session_ping(data: bytes, payload: bytes, legacy_ok: bool) -> bool:
    """The ping this session's client sends: ``payload || u32 counter``, or ``PING`` if allowed."""
    if len(data) == PING_SIZE and len(payload) == 16:
        return data[:16] == payload
    return legacy_ok and data == LEGACY_PING


class SessionClient:
    """The one IP a session serves: RTSP connections and the ENet peer must come from it.

    Known from /launch (the nvhttp peer) in the host; a session started without one (tests,
    the bench) takes the IP of its first RTSP connection. Thread-safe: RTSP handlers and the
    ENet loop ask at once.
    """

    def __init__(self, ip: str | None):
        self._ip = normalize_ip(ip) or None
        self._lock = threading.Lock()
        self._logged: set[str] = set()
        self.refused = 0

    @property
    def ip(self) -> str | None:
        with self._lock:
            return self._ip

    def admit(self, kind: str, host: str | bytes | None, pin: bool = False) -> bool:
        """Whether traffic of ``kind`` from ``host`` belongs to this session's client.

        ``pin`` adopts ``host`` when no client IP is known yet (the first RTSP connection).
        """
        ip = normalize_ip(host)
        with self._lock:
            if self._ip is None and pin and ip:
                self._ip = ip
            if ip and ip == self._ip:
                return True
            self.refused += 1
            first = kind not in self._logged
            self._logged.add(kind)
        if first:
            log.warning("compat %s: refused %s, not the session's client (logged once)", kind, ip)
        return False


class MediaEndpoint:
    """Where one media stream (video or audio) of a session goes, decided from the pings.

    ``offer`` every datagram the media socket receives; ``addr`` is the destination once one
    was accepted; call ``went_live`` when the first stream datagram has been sent to it.
    """

    def __init__(self, kind: str, client_ip: str | None, payload: str, legacy_ok: bool):
        self.kind = kind
        self.client_ip = normalize_ip(client_ip) or None
        self.payload = payload.encode("ascii")
        self.legacy_ok = legacy_ok
        self.addr: tuple[str, int] | None = None
        self.live = False
        self.ignored = 0
        self._logged = False

    def offer(self, data: bytes, source: tuple) -> bool:
        """One received datagram; True when it set or moved the destination."""
        sender = (normalize_ip(source[0]), int(source[1]))
        if sender == self.addr:
            return False  # the client's own pings (or noise) after it was accepted
        if self.client_ip is None or sender[0] != self.client_ip:
            self._refuse(sender, "a sender that is not the session's client")
            return False
        if not is_session_ping(data, self.payload, self.legacy_ok):
            self._refuse(sender, "a datagram that is not this session's ping")
            return False
        if self.live:
            self._refuse(sender, "a ping from a new port after the stream started")
            return False
        self.addr = sender
        return True

    def went_live(self) -> None:
        """The first datagram went to ``addr``: the destination is fixed from now on."""
        if self.addr is not None:
            self.live = True

    def _refuse(self, sender: tuple[str, int], why: str) -> None:
        self.ignored += 1
        if not self._logged:
            self._logged = True
            log.warning(
                "compat %s stream: ignoring %s:%d, %s (logged once per stream)",
                self.kind,
                sender[0],
                sender[1],
                why,
            )


def ping(payload: str, counter: int) -> bytes:
    """The client's ping datagram (what Moonlight sends; for tests and tools)."""
    return payload.encode("ascii")[:16] + struct.pack(">I", counter & 0xFFFFFFFF)
