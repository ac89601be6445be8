"""/launch parameter checks, without sockets: what a client may ask for and what is refused."""

from __future__ import annotations

import pytest

from compat.session import launch_channels
from compat.session_routes import DEFAULT_MODE, BadLaunch, parse_keys, parse_mode, parse_options


@pytest.mark.parametrize(
    "raw,want",
    [(None, DEFAULT_MODE), ("0x0x0", DEFAULT_MODE), ("1280x720x60", (1280, 720, 60)),
     ("3840x2160x120", (3840, 2160, 120)), ("320x200x10", (320, 200, 10))],
)  # fmt: skip
def test_modes_accepted(raw, want):
    assert parse_mode(raw) == want


@pytest.mark.parametrize(
    "raw",
    ["0x720x60", "100000x720x60", "1280x0x60", "1280x720x0", "1280x720x100000", "1280x720",
     "1280x720x60x1", "-1280x720x60", "axbxc", "319x200x60", "7681x4320x60", "1280x720x241"],
)  # fmt: skip
def test_absurd_modes_are_400(raw):
    with pytest.raises(BadLaunch) as exc:
        parse_mode(raw)
    assert exc.value.status == 400


def test_keys():
    assert parse_keys({"rikey": "00" * 15 + "AB", "rikeyid": "-5"}) == {
        "rikey": "00" * 15 + "ab",
        "rikeyid": -5,
    }
    for bad in ({"rikeyid": "1"}, {"rikey": "00" * 16}, {"rikey": "0" * 31, "rikeyid": "1"},
                {"rikey": "zz" * 16, "rikeyid": "1"}, {"rikey": "00" * 16, "rikeyid": "1.5"},
                {"rikey": "00" * 16, "rikeyid": str(2**31)}):  # fmt: skip
        with pytest.raises(BadLaunch):
            parse_keys(bad)


def test_audio_and_hdr_options():
    assert parse_options({"hdrMode": "0", "surroundAudioInfo": "196610"}) == {
        "hdrMode": 0,
        "surroundAudioInfo": 196610,
    }
    assert parse_options({"localAudioPlayMode": "0", "sops": ""}) == {"localAudioPlayMode": 0}
    for bad in ({"hdrMode": "2"}, {"localAudioPlayMode": "x"}, {"surroundAudioInfo": "3"},
                {"surroundAudioInfo": "-1"}):  # fmt: skip
        with pytest.raises(BadLaunch):
            parse_options(bad)


@pytest.mark.parametrize("info", [(0x3F << 16) | 6, (0x63F << 16) | 8])
def test_surround_launches_are_accepted_and_the_session_takes_their_channels(info):
    options = parse_options({"surroundAudioInfo": str(info)})
    assert options == {"surroundAudioInfo": info}
    assert launch_channels({"options": options}) == info & 0xFFFF
    assert launch_channels({"options": {}}) == 2


@pytest.mark.parametrize(
    "info,says",
    [
        ((0xFFF << 16) | 12, "2, 6 or 8 channels"),
        ((0x3F << 16) | 2, "channel mask 0x3f is not stereo's (0x3)"),
        ((0x3 << 16) | 6, "channel mask 0x3 is not 5.1's (0x3f)"),
        ((0xFF << 16) | 8, "channel mask 0xff is not 7.1's (0x63f)"),
    ],
)
def test_unknown_channel_counts_and_masks_are_400_with_the_reason(info, says):
    with pytest.raises(BadLaunch) as exc:
        parse_options({"surroundAudioInfo": str(info)})
    assert exc.value.status == 400 and says in exc.value.message


def test_hdr_is_refused_not_streamed_as_sdr():
    """The host offers no 10-bit mode: a launch asking for HDR is told so (a 400 the client
    shows), never streamed 8-bit SDR."""
    with pytest.raises(BadLaunch) as exc:
        parse_options({"hdrMode": "1", "localAudioPlayMode": "0"})
    assert exc.value.status == 400
    assert exc.value.message == "HDR is not available: this host streams 8-bit SDR only"


@pytest.mark.parametrize("raw", ["1281x720x60", "1280x721x60", "1365x767x30"])
def test_odd_sizes_are_refused_naming_the_limit(raw):
    """Every encoder here takes 4:2:0 video (media.encoder refuses an odd size): refused at
    /launch instead of a session that ends when its encoder will not open."""
    with pytest.raises(BadLaunch) as exc:
        parse_mode(raw)
    assert exc.value.status == 400
    assert "4:2:0 video needs an even size" in exc.value.message


def test_resume_hands_the_resuming_clients_address_to_the_engine(monkeypatch):
    """The resumed stream listens to whoever called /resume (compat.endpoint), so its arm
    request carries that client's address. Redis is replaced at the services boundary."""
    from compat import session_routes
    from compat.nvhttp.dispatch import ClientInfo, NvRequest
    from streaming import services

    pushed = []
    sessions = {"aa" * 32: {"id": "s1", "state": "streaming", "port_slot": 1}}
    monkeypatch.setattr(services, "current", lambda fp: sessions.get(fp))
    monkeypatch.setattr(services, "request_resume", lambda sid, arm: pushed.append((sid, arm)))
    monkeypatch.setattr(services, "wait_report", lambda arm, timeout: {"status": 200})
    req = NvRequest(path="/resume", query={"rikey": "00" * 16, "rikeyid": "3"}, https=True,
                    remote="192.168.1.20", local="192.168.1.2")  # fmt: skip
    req.client = ClientInfo("aa" * 32, "tv", "U")
    resp = session_routes.resume(req)
    assert b"<resume>1</resume>" in resp.body
    # The session's own port slot: its RTSP port is slot 0's + 20.
    from django.conf import settings

    assert f"rtsp://192.168.1.2:{settings.PORTS.rtsp + 20}".encode() in resp.body
    ((sid, arm),) = pushed
    assert sid == "s1" and arm["remote"] == "192.168.1.20" and arm["rikeyid"] == 3
    # Another client has no session of its own to resume, whatever else streams.
    req.client = ClientInfo("bb" * 32, "laptop", "V")
    assert b'status_code="503"' in session_routes.resume(req).body and len(pushed) == 1


def test_each_port_slot_streams_on_its_own_ports():
    """Slot k: every stream port + 20*k, and the launch a session arms binds exactly those
    (the SETUP replies hand them to the client)."""
    from django.conf import settings

    from common.ports import MAX_BASE_PORT, PortMap
    from compat.launchconfig import make_launch

    ports = PortMap(47989)
    s0 = ports.stream_ports(0)
    assert (s0.rtsp, s0.video, s0.control, s0.audio) == (48010, 47998, 47999, 48000)
    s2 = ports.stream_ports(2)
    assert (s2.rtsp, s2.video, s2.control, s2.audio) == (48050, 48038, 48039, 48040)
    assert PortMap(MAX_BASE_PORT).stream_ports(7).rtsp == 65535
    with pytest.raises(ValueError):
        ports.stream_ports(8)
    launch = make_launch({"rikey": "00" * 16, "rikeyid": 1}, slot=1)
    mine = settings.PORTS.stream_ports(1)
    assert (launch.rtsp_port, launch.video_port, launch.control_port, launch.audio_port) == (
        mine.rtsp, mine.video, mine.control, mine.audio)  # fmt: skip
