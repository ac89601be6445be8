"""Recovery from lost video: invalidation requests answered with a key frame, and the
swapped datagrams that keep a client without RFI from freezing (figures: docs/reliability.md).

The host offers RFI in its DESCRIBE reply (``x-nv-video[0].refPicInvalidation``): a client
whose decoder can recover from an invalidated reference then sends 0x0301 the moment it loses
a frame, instead of running in moonlight-common-c's strict IDR mode. None of the encoders here
can invalidate references, so every request that holds is answered with an IDR, which
recovers any loss (the client also takes an IDR as its "post-invalidation frame").

A request is checked against what the host sent: a range that ends before the last IDR sent is
already recovered (stale: it left the client before that IDR arrived); one that reaches past
the last frame sent, or whose first frame is after its last, is nonsense. Both are ignored,
counted, and logged once a session. Requests are answered at a bounded rate: while an IDR is
pending, or within ``window_s`` of the last one, they are coalesced into one IDR that goes out
when the window ends (an RFI client repeats its request each frame until it recovers, and the
window must never swallow the one answer it waits for). Two threads meet here (the control
loop asks, the video loop sends), hence the lock.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from common.samples import Samples

log = logging.getLogger("compat.engine")

# The shortest gap between two IDRs that answer invalidations (with one round trip plus a
# frame). Only a flood needs it: stale requests are "past" already. Measured at 10 % loss,
# longer windows lengthen every freeze (200 ms: +0.15 s) and save few IDRs.
MIN_WINDOW_FRAMES = 2

VERDICTS = ("idr", "coalesced", "past", "future", "inverted")

# How often two datagrams of one frame go out swapped. moonlight-common-c predicts a frame lost
# from the shards missing so far ("speculative" loss) only until it sees a datagram out of
# order, and again after 300 s of in-order video (RtpVideoQueue.c); in strict IDR mode (a
# client without RFI) a prediction that a late datagram then proves wrong leaves it dropping
# frames until its 120-frame limit. A swap in every frame of the stream's first second (the
# link may drop a swapped datagram, and its own first reordering must not come first), then
# one a second, keeps it out of that mode: it then reports a loss only once the frame is really
# unrecoverable, and asks for an IDR at the next whole frame. Same datagrams, same bytes; any
# client takes reordering.
REORDER_START_S = 1.0
REORDER_EVERY_S = 1.0


@dataclass
class RecoveryStats:
    """Per session: each request's verdict, and the request-heard -> IDR-sent delay."""

    requests: int = 0
    verdicts: dict = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    answer_ms: Samples = field(default_factory=Samples)


class Recovery:
    def __init__(self, stats: RecoveryStats | None = None, fps: int = 60):
        self.frame_s = 1.0 / max(fps, 1)  # the video loop sets the negotiated rate
        # Whether `reorder` swaps: the video loop clears it for a client whose ANNOUNCE says its
        # decoder takes invalidation (moonlight-common-c sends maxNumReferenceFrames 0 then).
        self.swap = True
        self.stats = stats if stats is not None else RecoveryStats()
        self._lock = threading.Lock()
        self._last_sent: int | None = None  # frame index of the last frame sent
        self._last_idr: int | None = None  # ... and of the last IDR
        self._last_idr_at: float | None = None
        self._heard_at: float | None = None  # the first request of the pending IDR
        self._asked = False  # the encoder was told to make that IDR
        self._logged: set[str] = set()
        self._first_swap_at: float | None = None
        self._swapped_at = 0.0

    def window_s(self, rtt_ms: float | None) -> float:
        """One round trip plus a frame, and never under MIN_WINDOW_FRAMES frames."""
        rtt_s = (rtt_ms or 0) / 1000
        return max(MIN_WINDOW_FRAMES * self.frame_s, rtt_s + self.frame_s)

    def request(self, first: int, last: int, now: float) -> str:
        """Judge one invalidation request; an ``idr`` or ``coalesced`` one will get an IDR."""
        with self._lock:
            verdict = self._judge(first, last)
            if verdict == "idr":  # the first request of a pending IDR (_judge: none pending)
                self._heard_at = now
            self.stats.requests += 1
            self.stats.verdicts[verdict] += 1
        if verdict != "idr" and verdict not in self._logged:
            self._logged.add(verdict)
            if verdict == "coalesced":
                log.info("invalidation requests coalesced while a key frame is due (flood)")
            else:
                log.info("ignoring invalidation request %d..%d: %s (last sent %s, last IDR %s)",
                         first, last, verdict, self._last_sent, self._last_idr)  # fmt: skip
        return verdict

    def _judge(self, first: int, last: int) -> str:
        if first > last:
            return "inverted"
        if self._last_sent is None or last > self._last_sent:
            return "future"
        if self._last_idr is not None and last < self._last_idr:
            return "past"
        return "coalesced" if self._heard_at is not None else "idr"

    # GAP: NVENC answers an invalidation with an IDR too: FFmpeg (so PyAV) exposes no
    # NvEncInvalidateRefFrames, so a P frame that skips the lost references (frame type 5,
    # smaller than an IDR) is out of reach for every encoder here. docs/gaps.md.
    def due(self, now: float, rtt_ms: float | None = None) -> bool:
        """True once per pending IDR, when the encoder should make it (the window allows)."""
        with self._lock:
            if self._heard_at is None or self._asked:
                return False
            if self._last_idr_at is not None and now - self._last_idr_at < self.window_s(rtt_ms):
                return False
            self._asked = True
            return True

    def sent(self, frame_index: int, keyframe: bool, now: float) -> None:
        """The video loop sent a frame; an IDR answers every request heard before it."""
        with self._lock:
            self._last_sent = frame_index
            if not keyframe:
                return
            self._last_idr, self._last_idr_at = frame_index, now
            if self._heard_at is not None:
                self.stats.answer_ms.append((now - self._heard_at) * 1000)
            self._heard_at, self._asked = None, False

    def reorder(self, rows: np.ndarray, data_shards: int, now: float) -> np.ndarray:
        """`rows`, its first two datagrams swapped when a swap is due (REORDER_EVERY_S).

        Both must be data shards (`data_shards`: how many of the first rows are): a frame of
        one data shard is whole at its first datagram, and the client never sees the other.
        Only for a client in strict IDR mode (`swap`): one whose decoder takes invalidation
        keeps its early loss prediction, which then only costs an IDR when it is wrong."""
        if not self.swap or data_shards < 2:
            return rows
        if self._first_swap_at is None:
            self._first_swap_at = now
        elif (
            now - self._first_swap_at >= REORDER_START_S
            and now - self._swapped_at < REORDER_EVERY_S
        ):
            return rows
        self._swapped_at = now
        return rows[[1, 0, *range(2, rows.shape[0])]]
