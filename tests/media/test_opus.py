"""Opus through PyAV's libopus: a 1 kHz tone survives encode and decode at the right
frequency and level, and each `host_opus_*` knob reaches the encoder."""

from __future__ import annotations

import numpy as np
import pytest

from media.audio.opus import OpusDecoder, OpusEncoder, OpusSettings
from tests.media.signals import blocks, db, noise, peak_hz_and_db, speechlike, tone


def roundtrip(signal, settings=None, frame_ms=5, block_ms=10, bitrate=96_000):
    enc, dec = OpusEncoder(settings, frame_ms=frame_ms, bitrate=bitrate), OpusDecoder()
    packets = [p for b in blocks(signal, block_ms) for p in enc.encode(b)]
    return packets, np.concatenate([dec.decode(p) for p in packets]).astype(np.float32) / 32768


@pytest.mark.parametrize("frame_ms", [5, 10, 20])
def test_tone_arrives_at_1khz_and_its_level(frame_ms):
    x = tone(1.0, -12.0)
    packets, y = roundtrip(x, frame_ms=frame_ms)
    assert len(packets) == 1000 // frame_ms
    # Default settings are CBR: every packet one size (GameStream audio FEC needs that).
    assert len({len(p) for p in packets}) == 1
    assert len(packets[0]) == 96_000 * frame_ms // 1000 // 8
    hz, level = peak_hz_and_db(y[4800:])  # past the codec's start-up
    assert abs(hz - 1000.0) <= 2.0, hz
    assert abs(level - -12.0) <= 0.5, level


@pytest.mark.parametrize("frame_ms", [5, 20])
def test_the_direct_path_gives_the_bytes_of_pyav_encode(frame_ms):
    """`OpusEncoder` skips PyAV's frame-size filter graph; libopus must get the same frames."""
    x = noise(0.5, -20.0)
    direct = OpusEncoder(frame_ms=frame_ms)
    assert direct._send != direct._ctx.encode  # the pinned PyAV still has the direct method
    plain = OpusEncoder(frame_ms=frame_ms)
    plain._send = plain._ctx.encode
    got = [p for b in blocks(x, 10) for p in direct.encode(b)]
    assert got and got == [p for b in blocks(x, 10) for p in plain.encode(b)]


def test_blocks_of_any_length_are_buffered_into_frames():
    enc = OpusEncoder(frame_ms=20)
    assert enc.encode(tone(0.015, -20)) == []
    assert len(enc.encode(tone(0.030, -20))) == 2  # 45 ms in: two 20 ms frames, 5 ms waits
    with pytest.raises(ValueError):
        OpusEncoder(frame_ms=7)


def test_wideband_only_cuts_a_12khz_tone():
    x = tone(0.5, -12.0, freq=12_000)
    _, full = roundtrip(x, OpusSettings(bandwidth_extension=True))
    _, wide = roundtrip(x, OpusSettings(bandwidth_extension=False))
    assert db(full[4800:]) > -13.0
    assert db(wide[4800:]) < -40.0


def test_vbr_setting_gives_varying_packet_sizes():
    x = np.concatenate([noise(0.3, -10), tone(0.3, -60)])
    cbr, _ = roundtrip(x, OpusSettings(vbr=0), frame_ms=20)
    vbr, _ = roundtrip(x, OpusSettings(vbr=2), frame_ms=20)
    assert len({len(p) for p in cbr}) == 1
    assert len({len(p) for p in vbr}) > 3


def test_settings_from_config_clamp_and_map():
    s = OpusSettings.from_config(
        {
            "host_opus_application": 7,
            "host_opus_vbr": -1,
            "host_opus_complexity": "99",
            "host_opus_fec": "off",
            "host_opus_expected_loss_pct": 250,
        }
    )
    assert (s.application, s.vbr, s.complexity, s.fec, s.expected_loss_pct) == (
        2,
        0,
        10,
        False,
        100,
    )
    assert s.codec_options(10) == {
        "application": "audio",
        "vbr": "off",
        "frame_duration": "10",
        "fec": "0",
        "packet_loss": "100",
    }
    assert OpusSettings.from_config({}) == OpusSettings()


@pytest.mark.parametrize("app", [0, 1, 2])
@pytest.mark.parametrize("complexity", [0, 10])
def test_every_application_and_complexity_edge_encodes(app, complexity):
    s = OpusSettings(application=app, complexity=complexity, fec=True, expected_loss_pct=100)
    _, y = roundtrip(tone(0.3, -20.0), s, frame_ms=10)
    hz, level = peak_hz_and_db(y[4800:])
    assert abs(hz - 1000) <= 4 and abs(level - -20) < 1.5


def test_application_reaches_libopus():
    """Restricted low-delay never uses SILK (TOC configs 0-15); VoIP does for speech at 16 kb/s."""
    x = speechlike(1.0, -20.0)

    def configs(app):
        enc = OpusEncoder(OpusSettings(application=app), frame_ms=20, bitrate=16_000)
        return {p[0] >> 3 for b in blocks(x, 20) for p in enc.encode(b)}

    assert min(configs(0)) >= 16
    assert min(configs(1)) < 16
