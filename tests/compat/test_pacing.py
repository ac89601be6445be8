"""Video pacing: the client's link speed, rate_cap_pct of it, max_send_mbps, and the spread."""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest

from compat.engine.stream import PACING_BATCH, StreamSession
from media import pacing
from tests.compat.loopback import black, loopback_launch

# /proc/net/route as x86 prints it: network-order u32s shown as host-order hex.
ROUTES = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
wg0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0
eth1\t0005000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
down0\t0009000A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0
broken\tzz\n"""


def test_route_interface_is_the_longest_prefix_then_lowest_metric(tmp_path):
    routes = tmp_path / "route"
    routes.write_text(ROUTES)
    r = str(routes)
    assert pacing.route_interface("192.168.1.40", r) == "eth0"  # 192.168.1.0/24
    assert pacing.route_interface("10.0.5.9", r) == "eth1"  # /24 beats wg0's 10.0.0.0/8
    assert pacing.route_interface("10.7.0.1", r) == "wg0"
    assert pacing.route_interface("10.0.9.1", r) == "wg0"  # down0 is not up
    assert pacing.route_interface("8.8.8.8", r) == "eth0"  # default, metric 100 beats 600
    assert pacing.route_interface("::ffff:192.168.1.2", r) == "eth0"  # dual-stack form
    assert pacing.route_interface("127.0.0.1", r) == "lo"  # local table: loopback by rule
    assert pacing.route_interface("fe80::1", r) is None  # IPv6: not looked up
    assert pacing.route_interface("not an ip", r) is None
    assert pacing.route_interface("8.8.8.8", str(tmp_path / "missing")) is None
    (tmp_path / "noroute").write_text(ROUTES.splitlines()[0] + "\n")
    assert pacing.route_interface("8.8.8.8", str(tmp_path / "noroute")) is None


def test_route_interface_on_this_host():
    # Whatever the host has, the lookup must not fail; loopback is always lo.
    assert pacing.route_interface("127.0.0.1") == "lo"
    iface = pacing.route_interface("192.0.2.1")
    assert iface is None or isinstance(iface, str)


def test_link_speed_reads_sysfs_and_knows_when_it_does_not_know(tmp_path):
    for name, text in {"eth0": "1000\n", "eth1": "-1\n", "wl0": "garbage", "e2": "2500"}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "speed").write_text(text)
    (tmp_path / "lo").mkdir()  # no speed file (the kernel answers EINVAL for lo)
    root = str(tmp_path)
    assert pacing.link_speed_mbps("eth0", root) == 1000
    assert pacing.link_speed_mbps("e2", root) == 2500
    assert pacing.link_speed_mbps("eth1", root) is None  # virtual / unknown: -1
    assert pacing.link_speed_mbps("wl0", root) is None
    assert pacing.link_speed_mbps("lo", root) is None
    assert pacing.link_speed_mbps("nope", root) is None
    assert pacing.link_speed_mbps(None, root) is None
    assert pacing.link_speed_mbps("../eth0", root) is None  # a name, not a path
    assert pacing.link_speed_mbps("lo") is None  # the real loopback reports no speed


@pytest.mark.parametrize(
    ("max_send", "pct", "link", "want"),
    [
        (0, 80, 1000, 800.0),  # the key alone: 80 % of a gigabit
        (500, 80, 1000, 500.0),  # a tighter ceiling wins
        (900, 80, 1000, 800.0),  # a looser one does not
        (20, 80, None, 20.0),  # unknown link: the ceiling alone
        (0, 80, None, 0.0),  # neither: one burst per frame
        (0, 0, 1000, 0.0),  # pct 0 (a Launch not built from config): no link cap
        (0, 95, 100, 95.0),
    ],
)
def test_the_tighter_cap_wins(max_send, pct, link, want):
    assert pacing.send_cap_mbps(max_send, pct, link) == want


def test_a_session_paces_at_the_share_of_the_client_link(monkeypatch):
    seen = []
    monkeypatch.setattr(pacing, "route_interface", lambda ip: seen.append(ip) or "eth9")
    monkeypatch.setattr(pacing, "link_speed_mbps", lambda iface: 100 if iface == "eth9" else None)
    assert pacing.pacing_for("192.168.1.9", 0, 80) == 80.0
    assert pacing.pacing_for("192.168.1.9", 30, 80) == 30.0
    assert seen == ["192.168.1.9", "192.168.1.9"]
    assert pacing.pacing_for("127.0.0.1", 0, 0) == 0.0  # rate_cap_pct 0 looks nothing up
    assert len(seen) == 2


def test_make_launch_carries_rate_cap_pct_clamped(monkeypatch):
    from compat import launchconfig

    arm = {"rikey": "00" * 16, "rikeyid": 1}
    for value, want in ((None, 80), (70, 70), (10, 50), (200, 95), ("x", 80), ("60", 60)):
        monkeypatch.setattr(
            launchconfig,
            "_config",
            lambda name, default, v=value: default if name != "rate_cap_pct" or v is None else v,
        )
        assert launchconfig.make_launch(arm).rate_cap_pct == want


class _Recorder:
    """Stands in for the video socket: when each datagram left."""

    def __init__(self):
        self.times: list[float] = []

    def sendto(self, row, addr) -> None:
        self.times.append(time.monotonic())

    def sendmsg(self, buffers, control, flags, addr) -> None:
        """A UDP GSO batch (engine.send_datagrams): the kernel sends its segments at once."""
        ((level, kind, data),) = control
        assert (level, kind) == (socket.SOL_UDP, 103)
        size = struct.unpack("=H", data)[0]
        now = time.monotonic()
        self.times += [now] * sum(-(-memoryview(b).nbytes // size) for b in buffers)


def _send_timed(session: StreamSession, rows: np.ndarray) -> list[float]:
    real, rec = session._video_sock, _Recorder()
    session._video_sock = rec
    try:
        session._send_video(rows, ("192.0.2.1", 9))
    finally:
        session._video_sock = real  # stop() must close the real one
    return rec.times


def test_pacing_spreads_a_frames_packets_over_time():
    session = StreamSession(loopback_launch(rate_cap_pct=80), black)
    try:
        rows = np.zeros((300, 1408), np.uint8)  # 422 KB, an IDR's worth
        assert session.pace_mbps == 0.0  # the link is not known before the client pings
        burst = _send_timed(session, rows)
        assert burst[-1] - burst[0] < 0.05  # unpaced: back to back

        session.pace_mbps = 80.0  # 80 % of a 100 Mbit/s link: 10 MB/s, 7 datagrams a ms
        times = _send_timed(session, rows)
        span = times[-1] - times[0]
        ideal = rows.nbytes / 10e6  # 42 ms
        assert ideal * 0.9 < span < ideal * 3 + 0.05
        # Spread, not a burst and a wait: every 5 ms window carries a share near 5 ms worth.
        per_ms = 10e6 * 1e-3 / 1408
        start = times[0]
        for t in np.arange(0.0, ideal - 0.005, 0.005):
            n = sum(start + t <= x < start + t + 0.005 for x in times)
            assert n <= 5 * per_ms + 2 * 7 + 1, (t, n)  # at most slots + a late slot's catch-up
        # And the packets are sent in slots of ~1 ms, not in PACING_BATCH runs.
        gaps = np.diff(times)
        assert (gaps > 0.0005).sum() >= 300 // 7 * 0.5
    finally:
        session.stop()


def test_a_fast_link_keeps_the_batch_at_its_ceiling():
    session = StreamSession(loopback_launch(), black)
    try:
        session.pace_mbps = 8000.0  # 80 % of 10 Gbit/s: a slot would hold ~710 datagrams
        rows = np.zeros((4 * PACING_BATCH, 1408), np.uint8)
        times = _send_timed(session, rows)
        assert len(times) == rows.shape[0]
        assert times[-1] - times[0] < 0.2
    finally:
        session.stop()
