"""Reference-frame invalidation requests: which are answered with an IDR, and how often."""

from __future__ import annotations

import logging

import numpy as np

from compat.engine.recovery import Recovery

FPS = 30
FRAME = 1 / FPS


def streamed(frames: int, idr_at: tuple[int, ...] = (1,), t0: float = 100.0) -> Recovery:
    """A recovery that saw frames 1..frames sent, one per frame interval from t0."""
    r = Recovery(fps=FPS)
    for i in range(1, frames + 1):
        r.sent(i, i in idr_at, t0 + i * FRAME)
    return r


def test_a_request_for_frames_sent_since_the_last_idr_gets_one_idr():
    r = streamed(50)
    now = 100 + 50 * FRAME + 0.01
    assert r.request(40, 42, now) == "idr"
    assert r.due(now) and not r.due(now)  # the encoder is asked once
    r.sent(51, False, now + 0.001)  # the IDR may take a frame: still pending, not asked again
    assert not r.due(now + 0.002)
    r.sent(52, True, now + 0.015)
    assert r.stats.verdicts["idr"] == 1
    assert [round(v) for v in r.stats.answer_ms.values()] == [15]


def test_stale_future_and_inverted_ranges_are_ignored_and_logged_once(caplog):
    r = streamed(60, idr_at=(1, 50))
    now = 103.0
    with caplog.at_level(logging.INFO, logger="compat.engine"):
        for _ in range(3):
            assert r.request(40, 49, now) == "past"  # ends before the IDR at 50: recovered
            assert r.request(55, 61, now) == "future"  # frame 61 was never sent
            assert r.request(58, 57, now) == "inverted"
    assert not r.due(now)  # none of them asks for a key frame
    assert r.stats.requests == 9
    assert {k: r.stats.verdicts[k] for k in ("past", "future", "inverted", "idr")} == {
        "past": 3, "future": 3, "inverted": 3, "idr": 0,
    }  # fmt: skip
    for word in ("past", "future", "inverted"):
        assert sum(f": {word} (" in m for m in caplog.messages) == 1, caplog.messages
    # A range that reaches the last IDR (the IDR itself was lost) is a real request.
    assert r.request(45, 50, now) == "idr"


def test_a_request_before_any_frame_was_sent_is_ignored():
    r = Recovery(fps=FPS)
    assert r.request(0, 0, 1.0) == "future"
    assert not r.due(1.0)


def test_a_flood_is_coalesced_into_idrs_at_a_bounded_rate(caplog):
    """A client asking every millisecond for ten seconds gets at most one IDR per window."""
    r = streamed(30)
    frame, t, idrs = 31, 101.5, 0
    with caplog.at_level(logging.INFO, logger="compat.engine"):
        while t < 111.5:
            r.request(frame - 3, frame - 1, t)  # always frames already sent, after the IDR
            if r.due(t, rtt_ms=40):
                r.sent(frame, True, t)  # the encoder answers at once
                frame, idrs = frame + 1, idrs + 1
            elif round(t * 1000) % round(FRAME * 1000) == 0:
                r.sent(frame, False, t)
                frame += 1
            t += 0.001
    window = r.window_s(40)
    assert abs(window - (0.040 + FRAME)) < 1e-9
    assert 10 / window * 0.8 <= idrs <= 10 / window + 1, idrs  # bounded, and still answered
    assert r.stats.verdicts["coalesced"] > 9000
    assert sum("coalesced" in m for m in caplog.messages) == 1


def test_a_request_inside_the_window_is_answered_when_it_ends():
    """Deferred, never dropped: an RFI client waits for exactly this answer."""
    r = streamed(30, idr_at=(1, 30))
    last_idr_at = 100 + 30 * FRAME
    window = r.window_s(None)
    assert window == 2 * FRAME  # no RTT known yet: two frames
    assert r.request(29, 30, last_idr_at + 0.01) == "idr"
    assert not r.due(last_idr_at + window - 0.001)
    assert r.due(last_idr_at + window + 1e-6)


def test_two_datagrams_go_out_swapped_every_frame_of_the_first_second_then_once_a_second():
    r = Recovery(fps=FPS)
    rows = np.arange(10, dtype=np.uint8).reshape(10, 1)
    one = rows[:3]  # one data shard and two parity: whole at its first datagram
    assert r.reorder(one, 1, 5.0) is one
    swapped = [1, 0, 2, 3, 4, 5, 6, 7, 8, 9]
    sent = {}
    for i in range(90):  # three seconds at 30 fps
        t = 5.0 + i * FRAME
        out = r.reorder(rows, 2, t)
        assert sorted(out[:, 0].tolist()) == list(range(10))  # the same datagrams, all of them
        sent[i] = out[:, 0].tolist() == swapped
    assert all(sent[i] for i in range(30))  # the first second: every frame
    later = [i for i in range(30, 90) if sent[i]]
    assert len(later) == 2 and later[1] - later[0] >= 29, later  # then one a second


def test_a_client_whose_decoder_takes_invalidation_gets_its_datagrams_in_order():
    """Its early loss prediction only costs an IDR when it is wrong: no swap for it."""
    r = Recovery(fps=FPS)
    r.swap = False
    rows = np.arange(10, dtype=np.uint8).reshape(10, 1)
    assert all(r.reorder(rows, 2, 5.0 + i * FRAME) is rows for i in range(40))
