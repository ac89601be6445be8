"""The native RTP track skips to a keyframe when its sender falls behind (native/media.py)."""

from __future__ import annotations

import asyncio
import threading
import time

from native.media import HEADER, MAX_BEHIND, MAX_WAIT_S, EncodedVideoTrack


class Encoder:
    def __init__(self):
        self.keyframe = threading.Event()


def frame(key: bool, n: int, age_s: float = 0.0) -> bytes:
    """Frame `n`, captured `age_s` before now (its encode took 2 ms)."""
    return HEADER.pack(key, time.monotonic() - age_s, 2.0) + bytes([n % 256]) * 10


def test_a_backlog_is_skipped_up_to_a_fresh_keyframe():
    async def run():
        enc = Encoder()
        track = EncodedVideoTrack(enc, feed=False)
        track.queue.put_nowait(frame(True, 0))
        assert bytes(await track.recv()) == frame(True, 0)[HEADER.size :]
        assert not enc.keyframe.is_set()
        # The sender stalled: a full backlog of P-frames (and an old keyframe) waits.
        for n in range(1, MAX_BEHIND + 4):
            track.queue.put_nowait(frame(n == 3, n))
        track.queue.put_nowait(frame(False, 50))  # the newest frames, still not a keyframe
        pending = asyncio.ensure_future(track.recv())
        await asyncio.sleep(0.05)
        assert not pending.done(), "a P-frame after a skip would decode against lost frames"
        assert enc.keyframe.is_set(), "the skip must ask the encoder for a keyframe"
        assert track.queue.qsize() == 0
        track.queue.put_nowait(frame(False, 51))
        track.queue.put_nowait(frame(True, 52))  # the keyframe asked for
        packet = await asyncio.wait_for(pending, 1)
        assert bytes(packet) == frame(True, 52)[HEADER.size :]
        assert track.skipped == MAX_BEHIND + 3 + 2
        track.queue.put_nowait(frame(False, 53))  # and the stream goes on from there
        assert bytes(await track.recv()) == frame(False, 53)[HEADER.size :]

    asyncio.run(run())


def test_a_short_queue_delivers_every_frame_in_order():
    async def run():
        track = EncodedVideoTrack(Encoder(), feed=False)
        for n in range(MAX_BEHIND):
            track.queue.put_nowait(frame(n == 0, n))
        got = [bytes(await track.recv())[0] for _ in range(MAX_BEHIND)]
        assert got == list(range(MAX_BEHIND)) and track.skipped == 0

    asyncio.run(run())


def test_a_frame_that_waited_too_long_is_skipped_up_to_a_keyframe_in_a_short_queue():
    """The backlog the queue cannot count (frames still in the pipe from the encoder): a
    P-frame older than MAX_WAIT_S is skipped although the queue is short; a late keyframe is
    still sent, so a peer starved for good shows a picture now and then."""

    async def run():
        enc = Encoder()
        track = EncodedVideoTrack(enc, feed=False)
        track.queue.put_nowait(frame(False, 1, age_s=MAX_WAIT_S + 0.2))
        track.queue.put_nowait(frame(False, 2, age_s=MAX_WAIT_S + 0.2))
        pending = asyncio.ensure_future(track.recv())
        await asyncio.sleep(0.05)
        assert not pending.done() and enc.keyframe.is_set() and track.skipped == 2
        track.queue.put_nowait(frame(False, 3))  # fresh, but it decodes against skipped ones
        track.queue.put_nowait(frame(True, 4, age_s=MAX_WAIT_S + 0.2))
        packet = await asyncio.wait_for(pending, 1)
        assert bytes(packet) == frame(True, 4)[HEADER.size :] and track.skipped == 3
        track.queue.put_nowait(frame(False, 5))
        assert bytes(await track.recv()) == frame(False, 5)[HEADER.size :]

    asyncio.run(run())
