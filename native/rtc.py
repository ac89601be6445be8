"""The native plane's peer connection: the answer to the browser's offer (`answer`), and the
browser's identity. The offer names a certificate fingerprint in plain text, so anyone can
copy a paired device's; only the DTLS handshake proves the key behind it. `prove` waits for
that proof before the session starts anything."""

from __future__ import annotations

import asyncio

from aioice import ice
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.rtcrtpsender import RTCRtpSender
from cryptography.hazmat.primitives import hashes


def allow_loopback_candidates() -> None:
    """aioice skips 127.0.0.1; a browser on the same machine needs it."""
    original = ice.get_host_addresses

    def with_loopback(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        found = original(use_ipv4, use_ipv6)
        return (["127.0.0.1"] + found) if use_ipv4 else found

    ice.get_host_addresses = with_loopback


def sendonly():
    """A peer connection that sends H.264 video and audio: (pc, its video transceiver, its
    audio sender). The tracks come after the proof (`replaceTrack`); the answer needs only
    the kinds. Codec preferences before setRemoteDescription, or aiortc falls back to VP8."""
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    video = pc.addTransceiver("video", direction="sendonly")
    wanted = ("video/H264", "video/rtx")
    video.setCodecPreferences(
        [c for c in RTCRtpSender.getCapabilities("video").codecs if c.mimeType in wanted]
    )
    return pc, video, pc.addTransceiver("audio", direction="sendonly").sender


async def answer(pc, video, sdp: str) -> str:
    """The SDP answer to the browser's offer; ValueError when it cannot receive H.264 video."""
    await pc.setRemoteDescription(RTCSessionDescription(sdp, "offer"))
    if video.mid is None:
        raise ValueError("the offer has no video to receive")
    codecs = [c.mimeType for c in video._codecs]
    if not codecs or codecs[0] != "video/H264":
        raise ValueError("the browser offered no H.264 (constrained baseline)")
    await pc.setLocalDescription(await pc.createAnswer())
    return pc.localDescription.sdp


def peer_fingerprint(transport) -> str:
    """SHA-256 of the certificate the DTLS peer presented (lowercase hex), "" when none.
    aiortc keeps the TLS connection private; `_ssl` is its pyOpenSSL connection."""
    ssl = getattr(transport, "_ssl", None)
    cert = ssl.get_peer_certificate(as_cryptography=True) if ssl is not None else None
    return cert.fingerprint(hashes.SHA256()).hex() if cert is not None else ""


def transports(pc) -> list:
    """The peer connection's DTLS transports (media and data channel), each once."""
    found = [t.sender.transport for t in pc.getTransceivers()]
    if pc.sctp is not None:
        found.append(pc.sctp.transport)
    return list({id(t): t for t in found if t is not None}.values())


async def prove(pc, fingerprint: str, done: asyncio.Event) -> bool:
    """True once every DTLS transport of `pc` has completed its handshake with a certificate
    whose SHA-256 is `fingerprint`; False when one fails or closes, or `done` is set first
    (the connect timeout, SIGTERM, unpaired)."""
    while not done.is_set():
        found = transports(pc)
        states = {t.state for t in found}
        if states & {"failed", "closed"}:
            return False
        if found and states == {"connected"}:
            return all(peer_fingerprint(t) == fingerprint for t in found)
        try:
            await asyncio.wait_for(done.wait(), 0.02)
        except TimeoutError:
            pass
    return False
