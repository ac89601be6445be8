"""Adaptive bitrate: the AIMD controller on a fake clock, and the encoder really moving."""

from __future__ import annotations

import numpy as np
import pytest

from compat.control import FrameFecStatus
from compat.engine import adaptive
from compat.engine.adaptive import AdaptiveRate, LossMeter, bounds
from media.encoder import VideoEncoder
from tests.support.state_api import state  # noqa: F401 - fixture


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _status(missing: int) -> FrameFecStatus:
    return FrameFecStatus(1, 10, 5, missing, 20, 4, 18, 4, 20, 0, 1)


def _window(meter: LossMeter, clock: Clock, sent: int, lost: int) -> None:
    meter.sent_datagrams(sent)
    if lost:
        meter.fec_status(_status(lost))
    clock.t += 1.0


def test_bounds_never_exceed_the_negotiated_rate():
    assert bounds(8000, 0, 0) == (1600, 8000)
    assert bounds(8000, 2000, 6000) == (2000, 6000)
    assert bounds(8000, 2000, 20000) == (2000, 8000)  # max above the ask: the ask
    assert bounds(8000, 9000, 0) == (8000, 8000)  # min above the ceiling: no room
    assert bounds(300, 0, 0) == (500, 500)


def test_loss_cuts_the_rate_and_raises_fec_at_most_once_a_second():
    clock, meter = Clock(), LossMeter()
    rate = AdaptiveRate(meter, 10_000, 2000, 0, fec_pct=20, clock=clock)
    assert rate.current == adaptive.Change(10_000, 20) and rate.current.encoder_kbps == 8000
    meter.sent_datagrams(1000)
    meter.fec_status(_status(30))  # 3 %
    assert rate.tick() is None  # under a second since the start
    clock.t += 1.0
    assert rate.tick() == adaptive.Change(7000, 30) and rate.last_loss_pct == 3.0
    for _ in range(10):  # more loss within the same second: no second change
        meter.fec_status(_status(50))
        clock.t += 0.05
        assert rate.tick() is None
    steps = []
    for _ in range(6):
        clock.t += 0.5
        _window(meter, clock, 1000, 30)
        steps.append(rate.tick())
    assert rate.current == adaptive.Change(2000, 50)  # at the floor, FEC at its cap
    assert steps[-1] is None  # and nothing left to change
    assert rate.changes == 1 + len([s for s in steps if s])


def test_hysteresis_holds_between_thresholds_and_recovers_slowly_to_the_ceiling():
    clock, meter = Clock(), LossMeter()
    rate = AdaptiveRate(meter, 10_000, 0, 8000, fec_pct=10, clock=clock)
    assert rate.kbps == 8000  # adaptive_bitrate_max under the ask
    _window(meter, clock, 1000, 50)
    assert rate.tick() == adaptive.Change(5600, 20)
    for _ in range(5):  # 1 %: between the thresholds, held
        _window(meter, clock, 1000, 10)
        assert rate.tick() is None
    got = []
    for _ in range(60):  # clean: +5 % of the ceiling every third second, FEC given back
        _window(meter, clock, 1000, 0)
        if change := rate.tick():
            got.append(change)
    assert got[0] == adaptive.Change(6000, 15) and got[1] == adaptive.Change(6400, 10)
    assert got[-1] == adaptive.Change(8000, 10) and rate.kbps == 8000  # never above
    assert all(b.kbps > a.kbps for a, b in zip(got, got[1:], strict=False))


def test_lost_frames_and_rtt_inflation_count_as_congestion():
    clock, meter = Clock(), LossMeter()
    rate = AdaptiveRate(meter, 10_000, fec_pct=20, clock=clock)
    meter.frame_lost()
    _window(meter, clock, 1000, 0)
    assert rate.tick().kbps == 7000
    rate.rtt(5)
    rate.rtt(80)
    _window(meter, clock, 1000, 0)
    assert rate.tick().kbps == 4900
    rate.rtt(6)
    _window(meter, clock, 1000, 0)
    assert rate.tick() is None  # RTT back near its best, no loss: the first clean window


def test_loss_pct_is_bounded():
    assert adaptive.loss_pct(0, 5) == 0.0
    assert adaptive.loss_pct(100, 3) == 3.0
    assert adaptive.loss_pct(10, 50) == 100.0


@pytest.mark.parametrize("codec", ["libx264"])
def test_set_bitrate_really_moves_the_encoder_with_one_idr(codec):
    """An open libx264 context ignores a new bit_rate in PyAV (measured), so set_bitrate
    reopens it: the output falls to the new rate, and only the first frame after is an IDR."""
    rng = np.random.default_rng(1)

    def frames(n):
        for i in range(n):
            img = np.zeros((360, 640, 4), np.uint8)
            img[..., :3] = rng.integers(0, 255, (360, 640, 3), np.uint8) // 4 + (i % 50)
            yield img

    def kbps(out):
        return sum(len(f.data) for f in out[10:]) * 8 / (len(out) - 10) * 30 / 1000

    enc = VideoEncoder(640, 360, 30, bitrate_kbps=4000, codec=codec)
    try:
        before = [f for f in map(enc.encode, frames(40)) if f]
        assert enc.set_bitrate(4000) == 0.0  # no change, no reopen
        took = enc.set_bitrate(500)
        after = [f for f in map(enc.encode, frames(40)) if f]
    finally:
        enc.close()
    assert kbps(before) > 3000 and kbps(after) < 800, (kbps(before), kbps(after))
    assert after[0].keyframe and sum(f.keyframe for f in after) == 1
    assert 0 < took < 1000 and enc.bitrate_kbps == 500


@pytest.mark.usefixtures("state")
def test_adaptive_keys_reach_the_launch_and_bound_the_controller():
    """`adaptive_bitrate_enabled`, `_min` and `_max` from the config file (read at each arm)
    switch the controller on and set its range (the e2e test shows the engine acting on it)."""
    from compat.launchconfig import make_launch
    from hostconfig import store

    arm = {"rikey": "00" * 16, "rikeyid": 1, "remote": "192.168.1.20"}
    before = make_launch(arm)
    assert not before.adaptive_bitrate and before.adaptive_min_kbps == 0
    store.write({"adaptive_bitrate_enabled": "true", "adaptive_bitrate_min": "3000",
                 "adaptive_bitrate_max": "12000"})  # fmt: skip
    launch = make_launch(arm)
    assert launch.adaptive_bitrate and (launch.adaptive_min_kbps, launch.adaptive_max_kbps) == (
        3000, 12000)  # fmt: skip
    rate = AdaptiveRate(LossMeter(), 20_000, launch.adaptive_min_kbps, launch.adaptive_max_kbps)
    assert (rate.floor, rate.ceiling, rate.kbps) == (3000, 12000, 12000)
    assert bounds(8000, launch.adaptive_min_kbps, launch.adaptive_max_kbps) == (3000, 8000)
