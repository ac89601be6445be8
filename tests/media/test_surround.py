"""5.1 and 7.1 on the GameStream plane: the DESCRIBE's surround-params lines, read as
moonlight-common-c reads them, give the client exactly the Opus config the host encodes with,
and a tone on one channel comes out of the client's decoder on that channel only.

`client_config` is a port of moonlight-common-c's `parseOpusConfigurations` (RtspConnection.c):
the first `a=fmtp:97 surround-params=<ch>` line, rotated (GFE lists LFE last), is normal
quality; a second one for the same count is high quality, not rotated.
"""

from __future__ import annotations

import numpy as np
import pytest

from compat import rtsp
from media.audio import layouts
from media.audio.chain import Chain
from media.audio.layouts import LayoutError
from media.audio.multistream import MultistreamDecoder, OpusLibraryError
from media.audio.opus import OpusEncoder, OpusSettings
from media.audiofeed import SessionSound
from tests.media.signals import blocks

RATE = 48_000
NAMES = {6: ["FL", "FR", "C", "LFE", "RL", "RR"]}
NAMES[8] = [*NAMES[6], "SL", "SR"]
# FFmpeg's Opus decoder (moonlight-python's AudioDecoder) treats a family-1 stream as Vorbis
# order (FL C FR RL RR LFE) and reorders it to its own (FL FR C LFE RL RR): the client's
# channel i comes out at FFMPEG_51[i]. Moonlight's own clients decode with libopus as is.
FFMPEG_51 = [0, 2, 1, 4, 5, 3]


def client_config(describe: bytes, channels: int, high_quality: bool) -> tuple[int, int, list]:
    """(streams, coupled, mapping) as moonlight-common-c derives them from a DESCRIBE."""
    if channels == 2:
        return 1, 1, [0, 1]
    body = describe.decode()
    prefix = f"a=fmtp:97 surround-params={channels}"
    first = body.find(prefix)
    assert first >= 0, "no surround-params line for this channel count"
    at = first + len(prefix)
    if high_quality:
        second = body.find(prefix, at)
        assert second >= 0, "no high-quality line"
        at = second + len(prefix)
    digits = body[at : at + 2 + channels]
    streams, coupled, mapping = int(digits[0]), int(digits[1]), [int(d) for d in digits[2:]]
    if not high_quality:  # GFE's normal-quality order: LFE last; the client moves it after C
        mapping = [*mapping[:3], mapping[channels - 1], *mapping[3 : channels - 1]]
    return streams, coupled, mapping


def test_the_describe_lines_normal_then_high_quality_per_count():
    assert layouts.describe_lines().splitlines() == [
        "a=fmtp:97 surround-params=642014235",  # known good: GFE's and the client's fallback
        "a=fmtp:97 surround-params=660012345",
        "a=fmtp:97 surround-params=85301623457",
        "a=fmtp:97 surround-params=88001234567",
    ]
    sdp = rtsp.describe_sdp()
    assert sdp.endswith(layouts.describe_lines().encode())


@pytest.mark.parametrize("channels", [2, 6, 8])
@pytest.mark.parametrize("high", [False, True])
def test_the_client_derives_the_encoders_config(channels, high):
    config = layouts.layout(channels).config(high)
    assert client_config(rtsp.describe_sdp(), channels, high) == (
        config.streams,
        config.coupled,
        list(config.mapping),
    )
    assert layouts.client_rotation(layouts.wire_mapping(config.mapping)) == config.mapping


def test_normal_51_pairs_fronts_and_rears_and_codes_c_and_lfe_alone():
    c = layouts.layout(6).normal
    # stream 0 = FL/FR, stream 1 = RL/RR (coupled: two decoded channels each), 2 = C, 3 = LFE
    assert (c.streams, c.coupled) == (4, 2)
    assert dict(zip(NAMES[6], c.mapping, strict=True)) == {
        "FL": 0, "FR": 1, "RL": 2, "RR": 3, "C": 4, "LFE": 5,
    }  # fmt: skip
    rates = {n: (lay.normal.bitrate, lay.high.bitrate) for n, lay in layouts.LAYOUTS.items()}
    assert rates == {2: (96_000, 512_000), 6: (256_000, 1_536_000), 8: (450_000, 2_048_000)}


def one_channel_tone(channels: int, channel: int, seconds: float = 0.5) -> np.ndarray:
    x = np.zeros((int(seconds * RATE), channels), np.float32)
    x[:, channel] = 0.3 * np.sin(2 * np.pi * 1000 * np.arange(x.shape[0]) / RATE)
    return x


def channel_db(y: np.ndarray) -> np.ndarray:
    y = y.astype(np.float64) / (32768.0 if y.dtype == np.int16 else 1.0)
    return 10 * np.log10(np.mean(np.square(y), axis=0) + 1e-12)


@pytest.mark.parametrize("channels", [6, 8])
@pytest.mark.parametrize("high", [False, True])
def test_a_tone_on_one_channel_reaches_that_channel_only(channels, high):
    config = layouts.layout(channels).config(high)
    streams, coupled, mapping = client_config(rtsp.describe_sdp(), channels, high)
    for channel in range(channels):
        enc = OpusEncoder(frame_ms=5, bitrate=config.bitrate, layout=config)
        dec = MultistreamDecoder(channels, streams, coupled, mapping)
        x = one_channel_tone(channels, channel)
        packets = [p for b in blocks(x, 10) for p in enc.encode(b)]
        assert len({len(p) for p in packets}) == 1  # CBR: audio FEC needs one size per block
        y = np.concatenate([dec.decode(p) for p in packets])[4800:]
        levels = channel_db(y)
        name = NAMES[channels][channel]
        assert levels[channel] > -14.0, (name, levels)  # sent at -13.5 dBFS
        others = np.delete(levels, channel)
        assert others.max() < levels[channel] - 50, (name, levels)


def test_moonlight_pythons_decoder_hears_51_in_ffmpegs_order():
    """The library the e2e client uses: same packets, FFmpeg's fixed reorder on top."""
    from moonlight_python.audio_decoder import AudioDecoder

    config = layouts.layout(6).normal
    streams, coupled, mapping = client_config(rtsp.describe_sdp(), 6, False)
    for channel in range(6):
        enc = OpusEncoder(frame_ms=5, bitrate=config.bitrate, layout=config)
        dec = AudioDecoder(RATE, 6, streams, coupled, mapping)
        out = [a for b in blocks(one_channel_tone(6, channel), 10) for p in enc.encode(b)
               for a in dec.decode(p)]  # fmt: skip
        levels = channel_db(np.concatenate(out)[4800:])
        assert int(np.argmax(levels)) == FFMPEG_51[channel], (channel, levels)
        assert np.delete(levels, FFMPEG_51[channel]).max() < levels.max() - 50


def test_the_encoder_buffers_any_block_length_and_checks_the_shape():
    config = layouts.layout(6).normal
    enc = OpusEncoder(frame_ms=10, bitrate=config.bitrate, layout=config)
    assert enc.channels == 6
    assert enc.encode(np.zeros((300, 6), np.int16)) == []
    assert len(enc.encode(np.zeros((700, 6), np.int16))) == 2
    with pytest.raises(ValueError):
        enc.encode(np.zeros((480, 2), np.int16))


@pytest.mark.parametrize(
    "info,ok",
    [
        ((0x3 << 16) | 2, True),
        ((0x3F << 16) | 6, True),
        ((0x63F << 16) | 8, True),
        ((0x3F << 16) | 2, False),  # a 5.1 mask on two channels
        ((0xFF << 16) | 6, False),
        (6, True),  # no mask: the count's own layout
        ((0x3F << 16) | 12, False),
    ],
)
def test_surround_info_names_a_known_layout(info, ok):
    if ok:
        assert layouts.from_surround_info(info).channels == info & 0xFFFF
    else:
        with pytest.raises(LayoutError):
            layouts.from_surround_info(info)


class FakeCapture:
    """A session capture of `channels` that plays `signal` (int16) block by block."""

    def __init__(self, signal: np.ndarray):
        self.channels = signal.shape[1]
        self._blocks = [b for b in blocks((signal * 32767).astype(np.int16), 10)]

    def read(self, frames: int, timeout: float = 1.0):
        return self._blocks.pop(0) if self._blocks else None


@pytest.mark.parametrize(
    "sink,stream,heard",
    [
        (6, 2, [0, 1]),  # 5.1 sink, stereo client: the centre in both fronts (downmix)
        (2, 6, [0, 1]),  # stereo sink, 5.1 client: the stereo on FL/FR, the rest silent
        (6, 8, [2]),  # 5.1 sink, 7.1 client: the centre stays the centre
    ],
)
def test_the_feed_converts_the_sinks_layout_to_the_streams(sink, stream, heard):
    x = np.zeros((24000, sink), np.float32)
    sine = 0.5 * np.sin(2 * np.pi * 1000 * np.arange(24000) / RATE)
    for channel in [0, 1] if sink == 2 else [2]:  # stereo: both fronts; surround: the centre
        x[:, channel] = sine
    sound = SessionSound(FakeCapture(x), Chain(), OpusSettings())
    config = layouts.layout(stream).normal
    feed = sound.stream(5, config.bitrate, config)
    assert feed.encoder.channels == stream
    packets = [p for _ in range(50) for p in feed.next_packets()]
    dec = MultistreamDecoder(stream, config.streams, config.coupled, config.mapping)
    levels = channel_db(np.concatenate([dec.decode(p) for p in packets])[4800:])
    assert all(levels[c] > -30 for c in heard), levels
    assert (np.delete(levels, heard) < -80).all(), levels


def test_the_host_opus_settings_reach_the_multistream_encoder():
    config = layouts.layout(6).normal
    x = np.zeros((24000, 6), np.float32)
    x[:, 2] = 0.3 * np.sin(2 * np.pi * 12_000 * np.arange(24000) / RATE)  # 12 kHz on C

    def run(settings, frame_ms=5):
        enc = OpusEncoder(settings, frame_ms=frame_ms, bitrate=config.bitrate, layout=config)
        dec = MultistreamDecoder(6, config.streams, config.coupled, config.mapping)
        packets = [p for b in blocks(x, 10) for p in enc.encode(b)]
        return packets, channel_db(np.concatenate([dec.decode(p) for p in packets])[4800:])

    packets, full = run(OpusSettings())
    assert {len(p) for p in packets} == {config.bitrate * 5 // 1000 // 8}
    assert full[2] > -14.0
    _, wide = run(OpusSettings(bandwidth_extension=False))  # wideband: an 8 kHz cutoff
    assert wide[2] < -40.0
    x[:12000, 2] = 0.0  # half silence: VBR spends less on it
    vbr, _ = run(OpusSettings(vbr=2), frame_ms=20)
    assert len({len(p) for p in vbr}) > 3
    with pytest.raises(OpusLibraryError):  # libopus refuses complexity 11: said, not ignored
        OpusEncoder(OpusSettings(complexity=11), bitrate=config.bitrate, layout=config)
