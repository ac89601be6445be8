"""RTSP: the client's request sequence, replies its own parser reads, order and bad input."""

from __future__ import annotations

import pytest

from compat import codecs, rtsp
from compat.rtsp import RtspError, RtspSession

URL = "rtsp://192.168.1.5:48010"


def _req(method: str, target: str, cseq: int, extra: str = "", body: bytes = b"") -> bytes:
    head = f"{method} {target} RTSP/1.0\r\nCSeq: {cseq}\r\n"
    head += "X-GS-ClientVersion: 14\r\nHost: 192.168.1.5\r\n"
    if body:
        head += f"Content-type: application/sdp\r\nContent-length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode() + body


def _session() -> RtspSession:
    return RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 3735928559)


def _status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


ANNOUNCE = (
    b"v=0\r\no=android 0 14 IN IPv4 127.0.0.1\r\ns=NVIDIA Streaming Client\r\n"
    b"a=x-ml-general.featureFlags:3 \r\na=x-ss-general.encryptionEnabled:5 \r\n"
    b"a=x-nv-video[0].clientViewportWd:1280 \r\na=x-nv-video[0].clientViewportHt:720 \r\n"
    b"a=x-nv-video[0].maxFPS:60 \r\na=x-nv-video[0].packetSize:1392 \r\n"
    b"a=x-nv-vqos[0].bw.maximumBitrateKbps:8000 \r\n"
    b"a=x-nv-video[0].videoEncoderSlicesPerFrame:1 \r\n"
    b"a=x-nv-video[0].maxNumReferenceFrames:1 \r\na=x-nv-audio.surround.numChannels:2 \r\n"
    b"a=x-nv-audio.surround.channelMask:3 \r\na=x-nv-audio.surround.AudioQuality:0 \r\n"
    b"a=x-nv-general.featureFlags:167 \r\na=x-nv-vqos[0].fec.minRequiredFecPackets:2 \r\n"
    b"t=0 0\r\nm=video 47998  \r\n"
)


def _handshake(s: RtspSession, announce: bytes = ANNOUNCE) -> list[bytes]:
    return [
        s.handle(_req("OPTIONS", URL, 1)),
        s.handle(_req("DESCRIBE", URL, 2, "Accept: application/sdp\r\n")),
        s.handle(
            _req(
                "SETUP",
                "streamid=audio/0/0",
                3,
                "Transport: unicast;X-GS-ClientPort=50000-50001\r\n",
            )
        ),
        s.handle(_req("SETUP", "streamid=video/0/0", 4, "Session: DEADBEEFCAFE\r\n")),
        s.handle(_req("SETUP", "streamid=control/13/0", 5, "Session: DEADBEEFCAFE\r\n")),
        s.handle(
            _req("ANNOUNCE", "streamid=control/13/0", 6, "Session: DEADBEEFCAFE\r\n", announce)
        ),
        s.handle(_req("PLAY", "/", 7, "Session: DEADBEEFCAFE\r\n")),
    ]


def test_full_handshake_in_the_clients_order():
    s = _session()
    replies = _handshake(s)
    assert [_status(r) for r in replies] == [200] * 7
    assert s.playing
    p = s.params
    assert (p.width, p.height, p.fps, p.packet_size, p.bitrate_kbps) == (1280, 720, 60, 1392, 8000)
    assert p.audio_encrypted and p.control_v2 and not p.video_encrypted
    assert replies[2].startswith(b"RTSP/1.0 200 OK\r\nCSeq: 3\r\n")
    assert b"\r\nSession: DEADBEEFCAFE;timeout = 90\r\n" in replies[2]
    assert b"\r\nTransport: server_port=48000\r\n" in replies[2]
    assert b"\r\nX-SS-Ping-Payload: 0123456789ABCDEF\r\n" in replies[3]
    assert b"\r\nX-SS-Connect-Data: 3735928559\r\n" in replies[4]


def test_the_clients_parser_reads_our_replies(mcc_lib):
    s = _session()
    replies = _handshake(s)
    status, cseq, opts, body = mcc_lib.parse_rtsp_response(replies[1], ["Content-Type"])
    assert (status, cseq) == (200, 2)
    assert b"x-ss-general.encryptionSupported:5" in body
    assert b"x-ss-general.encryptionRequested:1" in body
    assert b"sprop-parameter-sets" not in body and b"AV1" not in body  # H.264 only
    status, cseq, opts, _ = mcc_lib.parse_rtsp_response(
        replies[4], ["Session", "Transport", "X-SS-Connect-Data"]
    )
    assert (status, cseq) == (200, 5)
    assert opts["Session"].split(";")[0] == "DEADBEEFCAFE"
    assert opts["Transport"] == "server_port=47999"
    assert int(opts["X-SS-Connect-Data"], 0) == 3735928559


def test_the_clients_own_announce_is_accepted(mcc_lib):
    sdp = mcc_lib.client_announce_sdp(1920, 1080, 60, 20000)
    params = rtsp.parse_announce(sdp)
    assert (params.width, params.height, params.fps, params.packet_size) == (1920, 1080, 60, 1392)
    assert params.reliable_udp == 13 and params.min_fec_packets == 2 and params.max_ref_frames == 1
    assert params.configured_bitrate_kbps == 20000


@pytest.mark.parametrize(
    "attr,value",
    [
        ("x-nv-video[0].clientViewportWd", "0"),
        ("x-nv-video[0].clientViewportWd", "100000"),
        ("x-nv-video[0].clientViewportHt", "-720"),
        ("x-nv-video[0].maxFPS", "0"),
        ("x-nv-video[0].maxFPS", "100000"),
        ("x-nv-video[0].packetSize", "1000"),  # not a multiple of 16
        ("x-nv-video[0].packetSize", "65536"),
        ("x-nv-vqos[0].bw.maximumBitrateKbps", "abc"),
    ],
)
def test_absurd_announce_values_are_400(attr, value):
    body = ANNOUNCE.replace(f"a={attr}:".encode(), f"a={attr}:{value} \r\na=old-{attr}:".encode())
    s = _session()
    replies = _handshake(s, body)
    assert _status(replies[5]) == 400
    assert s.params is None
    assert _status(replies[6]) == 455  # PLAY without an accepted ANNOUNCE
    assert s.refused_as == "refused" and attr.split(".")[-1] in s.refused  # ends, saying why


@pytest.mark.parametrize(
    "attr,value,why",
    [
        ("x-nv-video[0].dynamicRangeMode", "1", "HDR (dynamicRangeMode=1) was not offered"),
        ("x-ss-video[0].chromaSamplingType", "1", "YUV 4:4:4 (chromaSamplingType=1) was not"),
        ("x-nv-video[0].clientViewportWd", "1281", "1281x720 cannot be encoded: 4:2:0 video"),
        ("x-nv-video[0].clientViewportHt", "721", "1280x721 cannot be encoded: 4:2:0 video"),
    ],
)
def test_a_stream_the_host_does_not_make_is_refused_naming_it(attr, value, why):
    """HDR, 4:4:4 and odd sizes were never offered: 400 with the reason, and the session ends
    (`refused`) instead of streaming SDR, 4:2:0 or a stream whose encoder never opens."""
    body = ANNOUNCE.replace(b"t=0 0", f"a={attr}:{value} \r\nt=0 0".encode())
    if b"Viewport" in attr.encode():
        body = ANNOUNCE.replace(
            f"a={attr}:".encode(), f"a={attr}:{value} \r\na=old-{attr}:".encode()
        )
    s = _session()
    replies = _handshake(s, body)
    assert _status(replies[5]) == 400 and replies[5].split(b"\r\n\r\n", 1)[1].startswith(
        why.encode()
    )
    assert s.refused.startswith(why) and s.refused_as == "refused"
    assert s.params is None and _status(replies[6]) == 455


def test_sdr_420_even_sizes_are_accepted_and_not_refused():
    body = ANNOUNCE.replace(
        b"t=0 0",
        b"a=x-nv-video[0].dynamicRangeMode:0 \r\na=x-ss-video[0].chromaSamplingType:0 \r\nt=0 0",
    )
    s = _session()
    assert [_status(r) for r in _handshake(s, body)] == [200] * 7
    assert s.refused is None and s.refused_as == ""


@pytest.mark.parametrize("channels,status", [(2, 200), (6, 200), (8, 200), (1, 400), (4, 400)])
def test_announced_channel_counts_are_the_layouts(channels, status):
    """2, 6 or 8 (stereo, 5.1, 7.1); any other count the host has no Opus config for."""
    body = ANNOUNCE.replace(b"numChannels:2 ", f"numChannels:{channels} ".encode())
    s = _session()
    replies = _handshake(s, body)
    assert _status(replies[5]) == status
    if status == 400:
        assert b"only 2, 6 or 8 channels" in replies[5]
    else:
        assert s.params.audio_channels == channels


def test_describe_offers_the_surround_configs():
    s = _session()
    describe = _handshake(s)[1]
    assert b"a=fmtp:97 surround-params=642014235\n" in describe
    assert describe.index(b"surround-params=6420") < describe.index(b"surround-params=6600")


def test_missing_required_attribute_is_400():
    body = ANNOUNCE.replace(b"a=x-nv-video[0].maxFPS:60 \r\n", b"")
    with pytest.raises(RtspError) as e:
        rtsp.parse_announce(body)
    assert e.value.status == 400 and "maxFPS" in e.value.reason


def test_out_of_order_requests_are_455():
    s = _session()
    assert _status(s.handle(_req("PLAY", "/", 1))) == 455
    assert _status(s.handle(_req("SETUP", "streamid=video/0/0", 2))) == 455  # before DESCRIBE
    s.handle(_req("DESCRIBE", URL, 3))
    assert _status(s.handle(_req("ANNOUNCE", "streamid=control/13/0", 4, body=ANNOUNCE))) == 455
    assert _status(s.handle(_req("SETUP", "streamid=bogus/0/0", 5))) == 404


def test_malformed_requests_get_400_not_an_exception():
    s = _session()
    for junk in [
        b"",
        b"\x00\xff\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"OPTIONS * RTSP/1.0\r\n\r\n",
        b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nBroken header\r\n\r\n",
        b"ANNOUNCE x RTSP/1.0\r\nCSeq: 1\r\nContent-length: 999\r\n\r\nshort",
    ]:
        assert _status(s.handle(junk)) == 400
    assert _status(s.handle(_req("TEARDOWN", URL, 9))) == 501


def test_request_complete_waits_for_the_body():
    req = _req("ANNOUNCE", "streamid=control/13/0", 1, body=ANNOUNCE)
    assert not rtsp.request_complete(req[:-10])
    assert rtsp.request_complete(req)
    assert not rtsp.request_complete(b"OPTIONS x RTSP/1.0\r\nCSeq: 1\r\n")


def test_encrypted_rtsp_round_trip_and_direction():
    key = bytes(range(16))
    sealed = rtsp.seal(key, 1, b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n", b"H")
    assert sealed[:4] == (0x80000000 | 28).to_bytes(4, "big")  # 28 plaintext bytes
    assert rtsp.unseal(key, sealed, b"H") == (1, b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n")
    with pytest.raises(RtspError):
        rtsp.unseal(key, sealed, b"C")  # a host message replayed as the client's
    with pytest.raises(RtspError):
        rtsp.unseal(key, b"OPTIONS rtsp://x RTSP/1.0\r\nCSeq: 1\r\n\r\n")


def test_an_rtspenc_session_seals_replies_and_refuses_plaintext():
    key = bytes(range(16))
    s = RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, key=key)
    request = _req("OPTIONS", URL, 1)
    sealed = rtsp.seal(key, 1, request, b"C")
    assert rtsp.request_complete(sealed) and not rtsp.request_complete(sealed[:-1])
    seq, reply = rtsp.unseal(key, s.handle(sealed), b"H")
    assert (seq, reply) == (1, b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n")
    seq, _ = rtsp.unseal(key, s.handle(rtsp.seal(key, 2, _req("DESCRIBE", URL, 2), b"C")), b"H")
    assert seq == 2
    assert _status(s.handle(request)) == 400  # plaintext on an encrypted session
    assert _status(s.handle(rtsp.seal(bytes(16), 3, request, b"C"))) == 400  # wrong key


@pytest.mark.parametrize("offer", [codecs.H264_ONLY, codecs.Offer(("h264", "hevc", "av1"))])
def test_describe_offers_reference_frame_invalidation_for_every_codec(offer):
    body = rtsp.describe_sdp(offer=offer)
    # moonlight-common-c looks for this name anywhere in the reply (RtspConnection.c).
    assert body.count(b"x-nv-video[0].refPicInvalidation") == 1
    attrs = rtsp.parse_sdp_attributes(body)
    assert attrs["x-nv-video[0].refPicInvalidation"] == "1"
