"""Adaptive bitrate for one compat stream: the client's loss reports move the rate and the FEC.

Inputs, all from the control stream (fed by the ENet thread):

* ``0x5502`` frame FEC status (moonlight-common-c sends one per FEC block that needed recovery
  or was lost, to Sunshine-style hosts): ``missing_before_highest`` datagrams of that block
  never arrived. Set against the datagrams the host sent, this is the stream's loss, and it is
  what ``loss_pct`` reports (``/api/stream/network-stats``) whether or not the rate adapts.
* lost frames: an IDR request or a reference-frame invalidation after the stream started means
  a frame could not be rebuilt.
* RTT: ENet's smoothed round trip at each client ping; a queue building up shows as RTT far
  above the best one seen before loss does.

:class:`AdaptiveRate` is AIMD with hysteresis, deciding at most once per ``interval_s`` (1 s):
loss above ``HIGH_LOSS_PCT``, a lost frame or an inflated RTT cuts the wire rate by
``DECREASE`` and adds ``FEC_STEP`` points of FEC (the client then rebuilds more of what is
lost); ``CLEAN_WINDOWS`` windows in a row under ``LOW_LOSS_PCT`` add ``INCREASE_PCT`` of the
ceiling and give back FEC; anything between holds. The rate stays within
``[adaptive_bitrate_min, min(adaptive_bitrate_max, negotiated)]``: never above what the client
asked for. The encoder gets the wire rate less the FEC share, so more FEC never means more
bytes on a link that is already losing them. Each change reopens libx264 (see
``media.encoder.VideoEncoder.set_bitrate``), hence the one-a-second limit: no IDR storm.

Plain Python, no sockets: the engine calls :meth:`tick` from its video loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

HIGH_LOSS_PCT = 2.0  # above: decrease
LOW_LOSS_PCT = 0.5  # below (for CLEAN_WINDOWS windows): increase; between: hold
CLEAN_WINDOWS = 3
DECREASE = 0.7  # multiplicative cut of the wire rate
INCREASE_PCT = 5  # additive step, % of the ceiling
FEC_STEP = 10  # FEC points added on a cut; half of it given back on a raise
MAX_FEC_PCT = 50
RTT_INFLATION_MS = 40  # smoothed RTT this far above the best seen counts as congestion
MIN_KBPS = 500


@dataclass(frozen=True)
class Change:
    kbps: int  # the wire rate (video incl. FEC)
    fec_pct: int

    @property
    def encoder_kbps(self) -> int:
        return max(self.kbps * (100 - self.fec_pct) // 100, MIN_KBPS)


def bounds(negotiated_kbps: int, min_kbps: int, max_kbps: int) -> tuple[int, int]:
    """(floor, ceiling): the ceiling is the negotiated rate under ``adaptive_bitrate_max``
    (0: none); the floor is ``adaptive_bitrate_min`` (0: a fifth of the ceiling), never above
    the ceiling and never under ``MIN_KBPS``."""
    ceiling = max(min(negotiated_kbps, max_kbps) if max_kbps else negotiated_kbps, MIN_KBPS)
    floor = min_kbps if min_kbps else ceiling // 5
    return min(max(floor, MIN_KBPS), ceiling), ceiling


class LossMeter:
    """Datagrams sent and reported lost; thread-safe counters the stats sampler reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.lost = 0
        self.lost_frames = 0

    def sent_datagrams(self, n: int) -> None:
        with self._lock:
            self.sent += n

    def fec_status(self, status) -> None:
        """One 0x5502 report (``compat.control.FrameFecStatus``)."""
        with self._lock:
            self.lost += int(status.missing_before_highest)

    def frame_lost(self) -> None:
        with self._lock:
            self.lost_frames += 1

    def snapshot(self) -> tuple[int, int, int]:
        with self._lock:
            return self.sent, self.lost, self.lost_frames


def loss_pct(sent: int, lost: int) -> float:
    return round(100.0 * min(lost, sent) / sent, 2) if sent else 0.0


class AdaptiveRate:
    """The AIMD controller of one stream (see the module docstring)."""

    def __init__(
        self,
        meter: LossMeter,
        negotiated_kbps: int,
        min_kbps: int = 0,
        max_kbps: int = 0,
        fec_pct: int = 20,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.meter = meter
        self.floor, self.ceiling = bounds(negotiated_kbps, min_kbps, max_kbps)
        self.base_fec = max(0, min(int(fec_pct), 90))  # the schema's fec_percentage range
        self.max_fec = max(MAX_FEC_PCT, self.base_fec)
        self.kbps, self.fec_pct = self.ceiling, self.base_fec
        self.interval_s = interval_s
        self.clock = clock
        self._at = clock()
        self._seen = meter.snapshot()
        self._clean = 0
        self._best_rtt: float | None = None
        self._rtt: float | None = None
        self.changes = 0
        self.last_loss_pct = 0.0

    @property
    def current(self) -> Change:
        return Change(self.kbps, self.fec_pct)

    def rtt(self, ms: float) -> None:
        self._rtt = ms
        if ms > 0 and (self._best_rtt is None or ms < self._best_rtt):
            self._best_rtt = ms

    def tick(self) -> Change | None:
        """At most once per interval: the new rate and FEC, or None to keep them."""
        now = self.clock()
        if now - self._at < self.interval_s:
            return None
        sent, lost, frames = self.meter.snapshot()
        d_sent, d_lost = sent - self._seen[0], lost - self._seen[1]
        d_frames = frames - self._seen[2]
        self._at, self._seen = now, (sent, lost, frames)
        pct = loss_pct(d_sent, d_lost)
        self.last_loss_pct = pct
        inflated = (
            self._rtt is not None
            and self._best_rtt is not None
            and self._rtt > self._best_rtt + RTT_INFLATION_MS
        )
        kbps, fec = self.kbps, self.fec_pct
        if pct > HIGH_LOSS_PCT or d_frames > 0 or inflated:
            self._clean = 0
            kbps = max(self.floor, int(kbps * DECREASE))
            fec = min(self.max_fec, fec + FEC_STEP)
        elif pct < LOW_LOSS_PCT:
            self._clean += 1
            if self._clean >= CLEAN_WINDOWS:
                self._clean = 0
                kbps = min(self.ceiling, kbps + max(self.ceiling * INCREASE_PCT // 100, 100))
                fec = max(self.base_fec, fec - FEC_STEP // 2)
        else:
            self._clean = 0  # hysteresis: between the thresholds, hold
        if (kbps, fec) == (self.kbps, self.fec_pct):
            return None
        self.kbps, self.fec_pct = kbps, fec
        self.changes += 1
        return self.current
