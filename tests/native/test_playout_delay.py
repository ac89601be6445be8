"""native.media.use_playout_delay: the host answers a browser's playout-delay extension and
stamps (min, max) = (0, 0) on its video packets, so Chrome renders each frame once decoded
instead of holding it in its jitter buffer. aiortc on both ends, no browser: the
browser's side of it is checked by tests/native/test_player.py (jitter buffer delay)."""

from __future__ import annotations

import asyncio
import struct

from aiortc import RTCPeerConnection
from aiortc.rtcrtpparameters import RTCRtpHeaderExtensionParameters, RTCRtpParameters
from aiortc.rtp import HeaderExtensions, HeaderExtensionsMap, RtpPacket, unpack_header_extensions

from native.media import PLAYOUT_DELAY_URI, playout_delay_value, use_playout_delay

MID = "urn:ietf:params:rtp-hdrext:sdes:mid"


def test_value_is_two_12_bit_fields_in_10_ms_units():
    assert playout_delay_value(0, 0) == b"\x00\x00\x00"
    assert playout_delay_value(100, 250) == bytes((0x00, 0xA0, 0x19))  # 10, 25
    assert playout_delay_value(10**6, 10**6) == b"\xff\xff\xff"  # clamped to 12 bits


def _map(*extensions: tuple[int, str]) -> HeaderExtensionsMap:
    m = HeaderExtensionsMap()
    m.configure(RTCRtpParameters(headerExtensions=[
        RTCRtpHeaderExtensionParameters(id=i, uri=u) for i, u in extensions]))  # fmt: skip
    return m


def test_every_packet_carries_zero_playout_delay_when_negotiated():
    use_playout_delay()
    m = _map((1, MID), (6, PLAYOUT_DELAY_URI))
    packet = RtpPacket(payload_type=102, sequence_number=7, timestamp=1500)
    packet.extensions = HeaderExtensions(mid="0")
    packet.payload = b"\x65" * 40
    raw = packet.serialize(m)
    parsed = RtpPacket.parse(raw, m)
    assert parsed.extensions.mid == "0" and parsed.payload == packet.payload
    assert raw[0] & 0x10  # the X bit: a header extension block follows the 12-byte header
    profile, words = struct.unpack_from("!HH", raw, 12)
    found = dict(unpack_header_extensions(profile, raw[16 : 16 + 4 * words]))
    assert found == {1: b"0", 6: b"\x00\x00\x00"}
    # Not negotiated (an answer without the URI): nothing new on the wire.
    plain = _map((1, MID))
    profile, value = plain.set(HeaderExtensions(mid="0"))
    assert dict(unpack_header_extensions(profile, value)) == {1: b"0"}
    use_playout_delay()  # idempotent: still one extension, not two
    assert list(unpack_header_extensions(*m.set(HeaderExtensions()))) == [(6, b"\x00\x00\x00")]


def test_the_answer_names_the_extension_with_the_offers_id():
    async def negotiate() -> tuple[str, str]:
        use_playout_delay()
        browser, host = RTCPeerConnection(), RTCPeerConnection()
        try:
            browser.addTransceiver("video", direction="recvonly")
            await browser.setLocalDescription(await browser.createOffer())
            # A browser picks its own ids: move ours to 9 in the offer.
            offer = browser.localDescription
            sdp = "\r\n".join(
                f"a=extmap:9 {PLAYOUT_DELAY_URI}" if PLAYOUT_DELAY_URI in line else line
                for line in offer.sdp.split("\r\n")
            )
            host.addTransceiver("video", direction="sendonly")
            await host.setRemoteDescription(type(offer)(sdp=sdp, type="offer"))
            await host.setLocalDescription(await host.createAnswer())
            return sdp, host.localDescription.sdp
        finally:
            await browser.close()
            await host.close()

    offer, answer = asyncio.run(negotiate())
    assert f"a=extmap:9 {PLAYOUT_DELAY_URI}" in offer
    assert f"a=extmap:9 {PLAYOUT_DELAY_URI}" in answer
