"""Which GameStream encryption a session uses: `lan_encryption_mode` / `wan_encryption_mode`.

Modes, per network class of the client (reference B.7, B.10):

* 0 off: plain ``rtsp://``; the DESCRIBE offers control v2 and audio only (what every client
  already enables), video stays in clear.
* 1 when supported: ``rtspenc://`` for a client that sent ``corever >= 1``; the DESCRIBE also
  offers video encryption, and Moonlight turns on whatever is offered.
* 2 required: a client without ``corever >= 1`` is refused at ``/launch`` and ``/resume``
  (403); the DESCRIBE *requests* control v2, video and audio, and an ANNOUNCE that leaves one
  of them off gets RTSP 403 and ends the session with the reason.

The layers themselves live beside their streams: encrypted RTSP in :mod:`compat.rtsp`, video
AES-GCM in :mod:`compat.video`, audio AES-CBC in :mod:`compat.audio`, control v2 in
:mod:`compat.control`. ``network_policy`` (``auto``/``lan``/``wan``) decides the class: ``auto``
calls loopback and the LAN ranges of :mod:`common.netranges` LAN (the console's
``access.origin`` uses the same table), anything else WAN.
"""

from __future__ import annotations

from dataclasses import dataclass

from common import netranges
from compat import rtsp

OFF, WHEN_SUPPORTED, REQUIRED = 0, 1, 2
ALL_LAYERS = rtsp.ENC_CONTROL_V2 | rtsp.ENC_VIDEO | rtsp.ENC_AUDIO
REFUSED_NO_COREVER = "This host requires encryption; the client does not support it"


def network_class(ip: str, policy: str = "auto") -> str:
    """``lan`` or ``wan`` for the client at ``ip`` under ``network_policy``."""
    if policy in ("lan", "wan"):
        return policy
    return "lan" if netranges.is_loopback_or_lan(ip) else "wan"  # not an address: the stricter


def corever(raw: object) -> int:
    """The client's ``corever`` query value; absent or malformed counts as 0 (no support)."""
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        return 0
    return value if 0 <= value < 1 << 16 else 0


@dataclass(frozen=True)
class Policy:
    """What one launch's encryption mode means for the session's four layers."""

    mode: int = OFF
    rtsp_encrypted: bool = False  # the sessionUrl0 scheme is rtspenc://

    @property
    def offered(self) -> int:
        """DESCRIBE `encryptionSupported`."""
        bits = rtsp.ENC_CONTROL_V2 | rtsp.ENC_AUDIO
        return bits | rtsp.ENC_VIDEO if self.mode >= WHEN_SUPPORTED else bits

    @property
    def requested(self) -> int:
        """DESCRIBE `encryptionRequested` (and what the ANNOUNCE must enable under mode 2)."""
        return ALL_LAYERS if self.mode == REQUIRED else rtsp.ENC_CONTROL_V2

    @property
    def required(self) -> int:
        """Layers an ANNOUNCE must enable, else 403 (none below mode 2)."""
        return ALL_LAYERS if self.mode == REQUIRED else 0


def mode_for(ip: str, policy: str, lan_mode: int, wan_mode: int) -> int:
    mode = lan_mode if network_class(ip, policy) == "lan" else wan_mode
    return mode if mode in (OFF, WHEN_SUPPORTED, REQUIRED) else REQUIRED


def decide(mode: int, client_corever: int) -> Policy:
    """The launch's policy; raises :class:`Refused` for mode 2 without client support."""
    if mode == REQUIRED and client_corever < 1:
        raise Refused(REFUSED_NO_COREVER)
    return Policy(mode, rtsp_encrypted=mode >= WHEN_SUPPORTED and client_corever >= 1)


class Refused(Exception):
    """Encryption is required and the client cannot do it (HTTP/RTSP 403)."""
