"""Between layouts: a 5.1/7.1 sink streamed to a stereo client is downmixed with the BS.775
weights and never clips; a stereo sink streamed as 5.1 lands on FL/FR only."""

from __future__ import annotations

import numpy as np
import pytest

from media.audio.remix import Remix, matrix
from tests.media.signals import db

RATE = 48_000


def one(channels: int, channel: int, amp: float = 0.5, frames: int = 4800) -> np.ndarray:
    x = np.zeros((frames, channels), np.float32)
    x[:, channel] = amp * np.sin(2 * np.pi * 1000 * np.arange(frames) / RATE)
    return x


def test_51_to_stereo_centre_in_both_rears_on_their_side_lfe_left_out():
    r = Remix(6, 2)
    norm = 1 + 0.70710677 * 2  # each row's coefficients sum to this before normalising
    centre = r(one(6, 2))
    assert np.allclose(centre[:, 0], centre[:, 1])
    assert (
        abs(db(centre[:, :1]) - (db(one(6, 2)[:, 2:3]) + 20 * np.log10(0.70710677 / norm))) < 0.01
    )
    rear_left = r(one(6, 4))
    assert db(rear_left[:, 1:]) < -100 and db(rear_left[:, :1]) > -20
    assert db(r(one(6, 3))) < -100  # LFE


def test_a_full_scale_surround_mix_does_not_clip_when_downmixed():
    x = np.full((480, 8), 32767, np.int16)
    for src, dst in ((8, 2), (6, 2), (8, 6)):
        y = Remix(src, dst)(x[:, :src])
        assert y.dtype == np.int16 and y.shape == (480, dst)
        assert y.max() <= 32767 and y.min() >= 32766  # full scale, not wrapped round
    assert (matrix(8, 2).sum(axis=1) <= 1.0 + 1e-6).all()


def test_71_to_51_folds_each_side_into_its_rear():
    y = Remix(8, 6)(one(8, 6))  # SL
    assert db(y[:, 4:5]) > -20 and db(np.delete(y, 4, axis=1)) < -100


@pytest.mark.parametrize("src,dst", [(2, 6), (2, 8), (6, 8)])
def test_an_upmix_puts_each_channel_on_its_name_and_the_rest_silent(src, dst):
    for channel in range(src):
        y = Remix(src, dst)(one(src, channel))
        assert np.array_equal(y[:, channel], one(src, channel)[:, channel])
        assert not np.delete(y, channel, axis=1).any()


def test_the_same_layout_passes_the_block_itself():
    x = one(6, 1)
    assert Remix(6, 6)(x) is x
