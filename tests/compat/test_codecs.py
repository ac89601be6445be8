"""The codec offer (streaming.sessions.encoding) as GameStream says it (compat.codecs): one
answer for /serverinfo, DESCRIBE and the ANNOUNCE check.

Byte-level facts from moonlight-common-c: `ServerCodecModeSupport` bits (SCM_*), the DESCRIBE
markers it searches for, `bitStreamFormat` in its ANNOUNCE. The real client's own RTSP parser
reads the DESCRIBE reply (`mcc_lib`); tests/compat/test_codecs_e2e.py streams to it.
"""

from __future__ import annotations

import pytest

from compat import rtsp
from compat.codecs import Offer
from streaming.sessions import encoding
from tests.compat.test_rtsp import ANNOUNCE, _handshake, _status
from tests.support.state_api import state  # noqa: F401 - fixture

NONE: set[str] = set()
SOFTWARE = {"h264", "hevc", "av1"}


def test_auto_offers_hevc_and_av1_only_where_a_gpu_encoder_opened():
    assert encoding.decide(0, 0, NONE, SOFTWARE) == ("h264",)
    assert encoding.decide(0, 0, {"h264", "hevc"}, SOFTWARE) == ("h264", "hevc")
    assert encoding.decide(0, 0, {"h264", "hevc", "av1"}, SOFTWARE) == ("h264", "hevc", "av1")


def test_modes_2_and_3_offer_software_and_1_never_offers():
    assert encoding.decide(2, 3, NONE, SOFTWARE) == ("h264", "hevc", "av1")
    assert encoding.decide(1, 1, SOFTWARE, SOFTWARE) == ("h264",)
    assert encoding.decide(2, 1, NONE, SOFTWARE) == ("h264", "hevc")
    # Asked for, but nothing here encodes it: still not offered.
    assert encoding.decide(2, 2, NONE, {"h264"}) == ("h264",)
    # Out-of-range (a hand edit) reads as auto.
    assert encoding.decide(9, "x", NONE, SOFTWARE) == ("h264",)


def test_serverinfo_bits_and_luma_follow_the_offer():
    assert Offer(("h264",)).codec_mode_support == 0x1
    assert Offer(("h264",)).max_luma_pixels_hevc == 0
    full = Offer(("h264", "hevc", "av1"))
    assert full.codec_mode_support == 0x1 | 0x100 | 0x10000
    assert full.max_luma_pixels_hevc == 1869449984
    # Every capture is 8-bit SDR: no Main10 bit even under mode 3.
    assert not Offer(encoding.decide(3, 3, NONE, SOFTWARE)).codec_mode_support & (0x200 | 0x20000)


def test_describe_carries_the_markers_the_client_looks_for(mcc_lib):
    for offer, hevc, av1 in (
        (Offer(("h264",)), False, False),
        (Offer(("h264", "hevc")), True, False),
        (Offer(("h264", "av1")), False, True),
    ):
        s = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, offer=offer)
        replies = _handshake(s)
        status, _, _, body = mcc_lib.parse_rtsp_response(replies[1], ["Content-Type"])
        assert status == 200
        assert (b"sprop-parameter-sets=AAAAAU" in body) is hevc
        assert (b"a=rtpmap:98 AV1/90000" in body) is av1


def _announce(fmt: int) -> bytes:
    return ANNOUNCE.replace(b"t=0 0", f"a=x-nv-vqos[0].bitStreamFormat:{fmt} \r\nt=0 0".encode())


@pytest.mark.parametrize("fmt,name", [(1, b"HEVC"), (2, b"AV1")])
def test_announce_of_a_codec_not_offered_is_400_naming_it(fmt, name):
    s = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1)  # H.264 only
    replies = _handshake(s, _announce(fmt))
    assert _status(replies[5]) == 400
    assert replies[5].endswith(name + b" was not offered by this host")
    assert s.params is None and _status(replies[6]) == 455  # no PLAY without an ANNOUNCE
    # The refusal ends the session (compat.engine.stream), with the reason session.ended carries.
    assert (s.refused_as, s.refused) == ("refused", f"{name.decode()} was not offered by this host")


@pytest.mark.parametrize("fmt,codec", [(0, "h264"), (1, "hevc"), (2, "av1")])
def test_announce_of_an_offered_codec_is_what_the_session_encodes(fmt, codec):
    s = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1,
                         offer=Offer(("h264", "hevc", "av1")))  # fmt: skip
    replies = _handshake(s, _announce(fmt))
    assert [_status(r) for r in replies] == [200] * 7
    assert s.params.codec == codec


def test_probe_table_splits_gpu_from_software():
    table = {"nvenc": {"h264": True, "hevc": True, "av1": False},
             "software": {"h264": True, "hevc": True, "av1": True}}  # fmt: skip
    assert encoding.probed_codecs(table) == ({"h264", "hevc"}, {"h264", "hevc", "av1"})


@pytest.mark.django_db
def test_serverinfo_and_the_offer_follow_modes_profiles_and_the_probe(state, monkeypatch):  # noqa: F811
    from compat.nvhttp_backend import NvhttpBackend
    from hostconfig import store
    from media import encoders

    table = {"nvenc": {"h264": True, "hevc": False, "av1": False},
             "software": {"h264": True, "hevc": True, "av1": True}}  # fmt: skip
    monkeypatch.setattr(encoders, "available", lambda: table)
    facts = NvhttpBackend().server_facts()
    assert (facts["codec_mode_support"], facts["max_luma_pixels_hevc"]) == (
        0x1,
        0,
    )  # auto, no GPU HEVC
    table["nvenc"]["hevc"] = True  # a GPU encoder for HEVC opened
    facts = NvhttpBackend().server_facts()
    assert (facts["codec_mode_support"], facts["max_luma_pixels_hevc"]) == (0x101, 1869449984)
    store.write({"hevc_mode": "1", "av1_mode": "2", "client_profile_tv_av1_mode": "1",
                 "client_profile_tv_hevc_mode": "2"})  # fmt: skip
    assert NvhttpBackend().server_facts()["codec_mode_support"] == 0x10001
    assert NvhttpBackend().server_facts("tv")["codec_mode_support"] == 0x101  # its profile
    store.write({"encoder": "software"})  # pinned to software: auto counts no GPU
    store.write({"hevc_mode": "0", "av1_mode": "0"})
    assert encoding.offered() == ("h264",)
