"""The video loop's schedule (compat.engine.frameclock), on a simulated clock."""

from __future__ import annotations

from compat.engine.frameclock import FrameClock

INTERVAL = 1 / 60


def _run(work_s, seconds: float = 10.0, max_behind: float = 1.0) -> tuple[list[float], FrameClock]:
    """Frame start times of a loop whose frame k takes work_s(k) seconds, as the engine runs it."""
    now = 0.0
    clock = FrameClock(INTERVAL, now, max_behind)
    starts = []
    k = 0
    while now < seconds:
        starts.append(now)
        now += work_s(k)
        now += clock.wait_s(now)
        k += 1
    return starts, clock


def test_frames_late_by_less_than_a_frame_keep_the_rate():
    # Every third frame overruns by 8 ms (a slice or a wake-up waited for a core); the mean
    # stays under the interval. Restarting the schedule at each late frame sent ~55 fps here.
    starts, clock = _run(lambda k: INTERVAL + 0.008 if k % 3 == 0 else 0.010)
    assert len(starts) >= 599
    assert clock.restarts == 0


def test_the_old_rule_loses_every_lateness_for_good():
    """max_behind=0 is the schedule that restarted at every late frame: the same loop loses
    about 8 % of its frames, which is what the test above guards against coming back."""
    starts, clock = _run(lambda k: INTERVAL + 0.008 if k % 3 == 0 else 0.010, max_behind=0)
    assert len(starts) < 570
    assert clock.restarts > 150


def test_a_stall_drops_the_backlog_instead_of_bursting_stale_frames():
    starts, clock = _run(lambda k: 0.2 if k == 100 else 0.005, seconds=2.0)
    assert clock.restarts == 1
    after = [b - a for a, b in zip(starts[101:], starts[102:], strict=False)]
    # One frame goes at once (the one due during the stall), then the rate, never a burst.
    assert all(abs(gap - INTERVAL) < 1e-9 for gap in after[1:])
    assert len(starts) <= round(2.0 / INTERVAL) - 10  # the stall's 12 frames are not made up


def test_a_loop_that_cannot_keep_up_runs_flat_out_without_a_backlog():
    starts, clock = _run(lambda k: 0.025, seconds=5.0)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(abs(gap - 0.025) < 1e-9 for gap in gaps)  # no catch-up bursts
    assert clock.restarts > 0
