"""Refuse, don't substitute, on a real host: a client asking for a stream the host does not make
is told why and gets nothing else.

Moonlight itself never asks for a codec that was not offered (moonlight-common-c falls back to
H.264 in its ANNOUNCE when DESCRIBE offers no HEVC/AV1), so the client here is a scripted one:
the real /launch over HTTPS, then the RTSP requests moonlight-common-c sends, in its order, with
an ANNOUNCE naming HEVC while the host offers H.264 alone (`hevc_mode = 1`).
"""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest

from tests.compat.loopback import rtsp_request
from tests.compat.test_launch_control import KEYS, app_id, status_of
from tests.compat.test_rtsp import ANNOUNCE, _req, _status
from tests.streaming.conftest import events, pair, wait_for
from tests.streaming.test_session_parity_e2e import admin
from tests.support.moonlight import host_config

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HEVC_ANNOUNCE = ANNOUNCE.replace(b"t=0 0", b"a=x-nv-vqos[0].bitStreamFormat:1 \r\nt=0 0")


def test_a_codec_not_offered_ends_the_session_with_the_reason_and_sends_no_video(
    stream_host, tmp_path
):
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="7531", name="Asks for HEVC")
    port = host.base_port + 21
    with host_config(host, {"hevc_mode": "1", "av1_mode": "1"}):  # H.264 alone is offered
        desktop = app_id(ml, "Desktop")
        # HDR is refused at /launch with a message the client shows, before anything starts.
        xml = ml.https("launch", f"appid={desktop}&mode=640x360x30&{KEYS}&hdrMode=1")
        assert status_of(xml) == 400 and "this host streams 8-bit SDR only" in xml, xml
        xml = ml.https("launch", f"appid={desktop}&mode=640x360x30&{KEYS}")
        assert status_of(xml) == 200 and f"rtsp://127.0.0.1:{port}<" in xml, xml
        replies = [
            rtsp_request(port, _req("OPTIONS", "rtsp://127.0.0.1", 1)),
            rtsp_request(port, _req("DESCRIBE", "rtsp://127.0.0.1", 2)),
            rtsp_request(port, _req("SETUP", "streamid=audio/0/0", 3)),
            rtsp_request(port, _req("SETUP", "streamid=video/0/0", 4)),
            rtsp_request(port, _req("SETUP", "streamid=control/13/0", 5)),
        ]
        assert [_status(r) for r in replies] == [200] * 5, replies
        assert b"sprop-parameter-sets" not in replies[1]  # no HEVC offered
        video_port = int(re.search(rb"server_port=(\d+)", replies[3]).group(1))
        ping = re.search(rb"X-SS-Ping-Payload: (\w+)", replies[3]).group(1)
        # The client's video socket, pinging as moonlight-common-c does from here on: if the
        # host streamed anything, it would come back to this port.
        video = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        video.bind(("127.0.0.1", 0))
        video.settimeout(0.2)
        try:
            announce = _req("ANNOUNCE", "streamid=control/13/0", 6, body=HEVC_ANNOUNCE)
            reply = rtsp_request(port, announce)
            assert reply.startswith(b"RTSP/1.0 400 Bad Request\r\nCSeq: 6\r\n"), reply
            assert reply.endswith(b"HEVC was not offered by this host"), reply
            received = []
            deadline = time.monotonic() + 3
            counter = 0
            while time.monotonic() < deadline:
                counter += 1
                video.sendto(ping + struct.pack(">I", counter), ("127.0.0.1", video_port))
                try:
                    received.append(video.recvfrom(2048)[0])
                except TimeoutError:
                    pass
        finally:
            video.close()
        seen = events(host, "session.ended", lambda ev: any(
            e.get("reason") == "refused" for e in ev), timeout=30)  # fmt: skip
    assert received == []  # no video datagram of any codec went out
    ended = [e for e in seen if e.get("reason") == "refused"]
    assert ended and ended[-1]["error"] == "HEVC was not offered by this host", seen
    assert wait_for(lambda: "<currentgame>0<" in ml.https("serverinfo"), 15)  # nothing kept
    with admin(host) as c:
        record = c.get("/api/sessions?limit=1").json()["sessions"][0]
    assert record["session_id"] == ended[-1]["session"]["id"], (record, ended[-1])
    assert record["error"] == "HEVC was not offered by this host", record
    assert record["avg_bitrate_kbps"] == 0, record


def test_a_hand_edited_encoder_that_cannot_open_refuses_the_launch_with_the_reason(
    stream_host, tmp_path
):
    """`encoder = vaapi` written into the file by hand (the config APIs refuse it): /launch
    answers the reason and nothing streams, rather than encoding in software."""
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="8531", name="Hand-edited encoder")

    def idle() -> bool:  # an earlier test's session may still be handing its place back
        with host.mgmt() as c:
            return c.get("/api/v1/status").json()["session"] is None

    assert wait_for(idle, 15)
    with host_config(host, {"encoder": "vaapi"}):
        xml = ml.https("launch", f"appid={app_id(ml, 'Desktop')}&mode=640x360x30&{KEYS}")
        assert status_of(xml) == 503, xml
        assert "The configured encoder cannot be used: vaapi: this PyAV/FFmpeg build has no " in (
            xml
        )
        assert "<currentgame>0<" in ml.https("serverinfo")  # nothing was started
