"""The video loop's schedule: frame k is due at start + k * interval.

Why not restart the schedule at every late frame: on a shared 2-core machine a frame often
comes out a few milliseconds late (a slice thread or the wake-up waited for a core), and each
restart lost that lateness for good, so two concurrent 720p60 sessions sent 47-48 fps while
neither used its frame time. A frame that is late by less than `max_behind` frames is followed
at once by the next, which brings the stream back onto its schedule; further behind than that
(a stall, a machine out of CPU) the backlog is dropped and the schedule starts again from now,
so a loop that cannot keep up never bursts stale frames out.
"""

from __future__ import annotations


class FrameClock:
    def __init__(self, interval_s: float, now: float, max_behind: float = 1.0):
        self.interval = interval_s
        self.max_behind_s = max_behind * interval_s
        self.next_at = now
        self.restarts = 0  # backlogs dropped (the loop fell more than max_behind frames back)

    def wait_s(self, now: float) -> float:
        """After a frame: the seconds to sleep before the next one (0: it is due now)."""
        self.next_at += self.interval
        delay = self.next_at - now
        if delay > 0:
            return delay
        if delay < -self.max_behind_s:
            self.next_at = now  # behind: drop the backlog, don't spiral
            self.restarts += 1
        return 0.0
