"""Per-session capture with a real PulseAudio: a tone played by "the app" (pacat with the
session's app_env) arrives in the capture at 1 kHz and its level; sessions are isolated."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import numpy as np
import pytest

from media.audio import layouts
from media.audio.capture import (
    AudioUnavailable,
    SessionAudio,
    SinkRefused,
    VirtualSink,
    audio_enabled,
    availability,
    sink_name,
)
from media.audio.layouts import LayoutError
from streaming.sessions import sound
from tests.media.signals import peak_hz_and_db, silence, tone

pytestmark = pytest.mark.skipif(
    shutil.which("pulseaudio") is None or shutil.which("parec") is None,
    reason="pulseaudio and pulseaudio-utils are needed (scripts/system-deps.sh installs them)",
)


def play(
    env: dict, signal: np.ndarray, buffer_ms: int = 200, channel_map: str = ""
) -> subprocess.Popen:
    """The session's app: plays `signal` to its default sink, as a game would.

    A 200 ms playback buffer by default: on a loaded machine a 20 ms one underruns and puts
    gaps of silence into the tone, which the level checks would (rightly) see.
    """
    p = subprocess.Popen(
        [
            "pacat",
            "--playback",
            f"--latency-msec={buffer_ms}",
            "--raw",
            "--rate=48000",
            f"--channels={signal.shape[1]}",
            *([f"--channel-map={channel_map}"] if channel_map else []),
            "--format=s16le",
        ],
        stdin=subprocess.PIPE,
        env={**os.environ, **env},
    )
    p.stdin.write((signal * 32767).astype("<i2").tobytes())
    p.stdin.close()
    return p


def capture(audio: SessionAudio, seconds: float) -> np.ndarray:
    got = []
    for _ in range(int(seconds * 100)):
        b = audio.read(480, timeout=1.0)
        assert b is not None, "capture stalled"
        got.append(b)
    return np.concatenate(got).astype(np.float32) / 32768


@pytest.fixture
def session():
    audio = SessionAudio.from_config({"virtual_sink": "game sink/1"}, "s1", reuse=False)
    started = time.monotonic()
    audio.start()
    audio.startup_s = time.monotonic() - started
    yield audio
    audio.close()


def test_tone_played_into_the_session_sink_arrives_in_the_capture(session):
    assert session.server.owned and session.startup_s < 3.0
    assert session.sink_name == "game_sink_1_s1"
    env = session.app_env()
    assert env["PULSE_SINK"] == "game_sink_1_s1" and env["PULSE_SERVER"].startswith("unix:")
    player = play(env, np.concatenate([tone(1.0, -12.0), silence(0.2)]))
    y = capture(session, 1.2)
    player.wait(5)
    levels = np.array([peak_hz_and_db(b)[1] for b in y.reshape(-1, 480, 2)])
    loud = y.reshape(-1, 480, 2)[levels > -20]
    assert 0.8 * 100 <= len(loud) <= 1.05 * 100, len(loud)  # ~1 s of tone came through
    hz, level = peak_hz_and_db(np.concatenate(loud[5:-5]))
    assert abs(hz - 1000.0) <= 3.0, hz
    assert abs(level - -12.0) <= 0.3, level


def test_a_second_session_does_not_hear_the_first(session):
    other = SessionAudio({"virtual_sink": "game sink/1"}, "s2", server=session.server).start()
    try:
        assert other.sink_name == "game_sink_1_s2"
        player = play(session.app_env(), tone(0.5, -12.0))
        mine, theirs = capture(session, 0.5), capture(other, 0.5)
        player.wait(5)
        assert peak_hz_and_db(mine)[1] > -20
        assert peak_hz_and_db(theirs)[1] < -90
    finally:
        other.close()
    assert session.server.proc.poll() is None  # a shared server outlives the other session
    sinks = session.server.pactl("list", "short", "sinks")
    assert "game_sink_1_s1" in sinks and "game_sink_1_s2" not in sinks


@pytest.mark.parametrize("channels", [6, 8])
def test_a_surround_sink_keeps_each_channel_in_its_column(channels):
    """The app plays a tone on the rear-left speaker only: the capture has it in column 4
    (the client's order: FL FR C LFE RL RR SL SR) and nothing elsewhere."""
    audio = SessionAudio({}, f"surround{channels}", reuse=False, channels=channels).start()
    try:
        assert audio.sink.channel_map == layouts.layout(channels).pulse_map
        x = np.zeros((int(0.8 * 48000), channels), np.float32)
        x[:, 4] = tone(0.8, -12.0)[:, 0]
        player = play(audio.app_env(), x, channel_map=audio.sink.channel_map)
        got = []
        for _ in range(60):
            b = audio.read(480, timeout=1.0)
            assert b is not None and b.shape == (480, channels)
            got.append(b)
        player.wait(5)
        y = np.concatenate(got).astype(np.float32) / 32768
        assert peak_hz_and_db(y[:, 4:5])[1] > -20
        assert max(peak_hz_and_db(np.delete(y, 4, axis=1))[1], -200) < -90
    finally:
        audio.close()


def test_a_sound_server_that_refuses_a_surround_sink_says_so():
    audio = SessionAudio({}, "refused", reuse=False, channels=6).start()
    try:
        sink = VirtualSink(audio.server, "bad", channels=6)
        sink.channel_map = "front-left,nonsense"  # what an old or odd server would refuse
        with pytest.raises(SinkRefused, match="refused a 5.1 sink"):
            sink.load()
        stereo = VirtualSink(audio.server, "bad2")
        stereo.channel_map = "nonsense"
        with pytest.raises(AudioUnavailable):  # stereo keeps the silence policy
            stereo.load()
    finally:
        audio.close()
    with pytest.raises(LayoutError):
        SessionAudio({}, "x", channels=12)


def test_close_stops_the_server_it_started():
    audio = SessionAudio({}, 3, reuse=False).start()
    pid = audio.server.proc.pid
    socket = audio.server.env["PULSE_SERVER"].removeprefix("unix:")
    assert os.path.exists(socket)
    audio.close()
    assert not os.path.exists(socket)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_preflight_reports_audio_available(monkeypatch):
    assert availability() == (True, "ok")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert availability() == (False, "pulseaudio-utils (pactl, parec) is not installed")
    with pytest.raises(AudioUnavailable):
        SessionAudio({}, 9, reuse=False).start()


def test_stream_audio_false_means_no_audio_at_all():
    assert SessionAudio.from_config({"stream_audio": False}) is None
    assert SessionAudio.from_config({"stream_audio": "off"}) is None
    assert audio_enabled({}) and audio_enabled({"stream_audio": None})
    assert sink_name({"audio_sink": "x"}, None) == "x"
    assert sink_name({}, 5) == "session_5"


@pytest.mark.exclusive  # levels read at set times: a starved player shifts them
def test_agc_lifts_a_quiet_tone_through_capture_chain_and_opus(session):
    """The host's whole audio path: sink -> parec -> AGC -> Opus -> decode (the client's side)."""
    from media.audio.chain import Chain
    from media.audio.opus import OpusDecoder, OpusEncoder

    chain = Chain.from_config(
        {"host_audio_agc": True, "host_audio_agc_attack_ms": 100, "host_audio_agc_max_gain_db": 30}
    )
    enc, dec = OpusEncoder(frame_ms=10), OpusDecoder()
    # Its settled level is read 0.3-0.6 s into the tone, every block within 1 dB: in a full
    # CI run the tone once went silent there (the player starved past its 200 ms buffer), so
    # this player keeps 500 ms and the tone runs a second past the window.
    signal = np.concatenate([silence(0.2), tone(1.6, -40.0)])
    player = play(session.app_env(), signal, buffer_ms=500)
    out = []
    for _ in range(190):
        block = session.read(480, timeout=1.0)
        assert block is not None
        out.extend(dec.decode(p) for p in enc.encode(chain.process(block)))
    player.wait(5)
    y = np.concatenate(out).astype(np.float32) / 32768
    levels = np.array([peak_hz_and_db(b)[1] for b in y[: len(y) // 480 * 480].reshape(-1, 480, 2)])
    onset = int(np.argmax(levels > -70))
    assert onset > 0, levels[:5]
    at_attack = levels[onset + 10]  # 100 ms after the tone arrived
    assert -22.5 <= at_attack <= -19.0, at_attack
    settled = levels[onset + 30 : onset + 60]
    off = [round(float(v), 1) for v in settled if abs(v - -20.0) > 1.0]
    assert not off, (off, levels[onset : onset + 70].round(1).tolist())
    hz, _ = peak_hz_and_db(y[(onset + 30) * 480 : (onset + 60) * 480])
    assert abs(hz - 1000) <= 4


def test_a_surround_launch_is_refused_only_when_a_running_server_refuses_its_sink(monkeypatch):
    """Sound server up, surround sink refused: the launch is refused with the reason. No
    sound server at all: silence, as for stereo (the engine sends it in the agreed layout)."""

    def refuse(sink):
        raise SinkRefused("the sound server refused a 5.1 sink: pactl said no")

    with monkeypatch.context() as m:
        m.setattr(VirtualSink, "load", refuse)
        with pytest.raises(sound.SoundRefused, match="refused a 5.1 sink: pactl said no"):
            sound.open_capture("refusing", {}, 6)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert sound.open_capture("serverless", {}, 6) is None
