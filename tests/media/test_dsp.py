"""The audio chain's stages on synthetic signals, with measured levels and times."""

from __future__ import annotations

import numpy as np
import pytest

from hostconfig.schema import AUDIO_KEYS, key
from media.audio.chain import Chain, setting
from media.audio.dsp import Agc, Ducker, NoiseGate, Vad, level_db
from tests.media.signals import blocks, db, noise, silence, speechlike, tone


def run(stage, signal, ms=10):
    """Output blocks of `stage` over `signal` (stages with a process(block) method)."""
    return [stage.process(b) for b in blocks(signal, ms)]


# --- passthrough ------------------------------------------------------------------------------


def test_default_chain_is_bit_exact_passthrough():
    chain = Chain.from_config({})
    assert not chain.active and chain.vad is None
    x = noise(0.1, -10)
    pcm = (x * 20000).astype(np.int16)
    for block in blocks(x):
        out = chain.process(block)
        assert out is block
    for block in blocks(pcm):
        out = chain.process(block)
        assert out.dtype == np.int16 and np.array_equal(out, block)


def test_a_fresh_host_and_its_config_file_drive_the_chain(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    fresh = Chain.from_store()
    assert (fresh.gate, fresh.agc, fresh.vad, fresh.ducker) == (None, None, None, None)
    (tmp_path / "host.conf").write_text(
        "host_audio_agc = true\nhost_audio_agc_target_db = -100\nhost_audio_noise_gate = on\n"
    )
    chain = Chain.from_store()
    assert chain.agc and chain.gate and not chain.ducker
    # The file's out-of-range value is not the chain's: the store falls back, or we clamp.
    assert -40.0 <= chain.agc.target_db <= -6.0


def test_vad_alone_does_not_touch_audio_but_reports_speech():
    chain = Chain.from_config({"host_audio_vad": True})
    assert chain.vad is not None and not chain.active
    seen = []
    for b in blocks(speechlike(0.5, -30)):
        assert chain.process(b) is b
        seen.append(chain.speech)
    assert any(seen)


# --- AGC --------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [-45.0, -35.0, -8.0])
def test_agc_settles_to_target_within_1_db(level):
    agc = Agc(target_db=-20.0, max_gain_db=30.0, min_gain_db=-30.0, attack_ms=50)
    out = run(agc, tone(0.5, level))
    settled = db(np.concatenate(out[-10:]))
    assert abs(settled - -20.0) <= 1.0, settled


def test_agc_reaches_90_percent_within_attack_time():
    attack = 100
    agc = Agc(target_db=-20.0, max_gain_db=30.0, attack_ms=attack)
    out = run(agc, tone(0.4, -40.0))
    # Block k ends at (k+1)*10 ms; the gain ramps to its decision over each block.
    at_attack = db(out[attack // 10 - 1][-48:])
    half = db(out[attack // 20 - 1][-48:])
    assert -22.0 - 0.05 <= at_attack <= -20.0 + 0.05, at_attack  # within 10 % of 20 dB
    assert half < -22.5, half  # not there yet at half the attack time


def test_agc_waits_out_the_hold_before_lifting_a_dip_then_releases():
    agc = Agc(target_db=-20.0, max_gain_db=20.0, attack_ms=10, hold_ms=200, release_ms=100)
    run(agc, tone(0.5, -20.0))
    out = run(agc, tone(0.8, -30.0))  # the music gets quieter, without a silence
    assert db(out[14]) < -29.0  # 150 ms in: still held, the dip is heard as a dip
    assert db(out[(200 + 100) // 10][-48:]) >= -21.0 - 0.1  # hold, then 90 % within release
    assert abs(db(np.concatenate(out[-10:])) - -20.0) < 0.3


def test_agc_tames_a_loud_burst_within_the_attack_time():
    agc = Agc(target_db=-20.0, min_gain_db=-30.0, attack_ms=20, hold_ms=200)
    run(agc, tone(0.5, -20.0))
    out = run(agc, tone(0.2, -5.0))
    assert db(out[1][-48:]) <= -20.0 + 1.5 + 0.3  # 90 % of the 15 dB within 20 ms (+ ramp)
    assert db(out[0][:48]) > -6.0  # and not before it happened (no look-ahead)


def test_agc_gain_stays_within_max_and_min():
    quiet = run(Agc(target_db=-20, max_gain_db=12, attack_ms=10), tone(0.3, -50))
    assert abs(db(np.concatenate(quiet[-5:])) - -38.0) < 0.1
    loud = run(Agc(target_db=-20, min_gain_db=-6, attack_ms=10), tone(0.3, -3))
    assert abs(db(np.concatenate(loud[-5:])) - -9.0) < 0.1


def test_agc_does_not_lift_silence_and_holds_then_releases():
    agc = Agc(target_db=-20, max_gain_db=20, attack_ms=10, hold_ms=200, release_ms=100)
    run(agc, tone(0.2, -35))
    assert abs(agc.gain_db - 15.0) < 0.2
    run(agc, silence(0.19))
    assert abs(agc.gain_db - 15.0) < 0.2  # held
    run(agc, silence(0.11))  # 100 ms past the hold: 90 % released
    assert 0.0 <= agc.gain_db <= 1.5 + 0.2, agc.gain_db
    out = run(agc, silence(0.2))
    assert np.all(np.concatenate(out) == 0.0)


# --- noise gate -------------------------------------------------------------------------------


def test_gate_closes_below_threshold_and_passes_above():
    gate = NoiseGate(threshold_db=-55.0)
    out = run(gate, noise(0.3, -62.0))
    assert db(np.concatenate(out[3:])) < -200  # fully closed after close_ms (20 ms)
    gate = NoiseGate(threshold_db=-55.0)
    x = tone(0.2, -40.0)
    out = np.concatenate(run(gate, x))
    assert abs(db(out[480:]) - db(x[480:])) < 0.001  # open: unchanged after the first block


def test_gate_hysteresis_keeps_a_hovering_signal_open():
    gate = NoiseGate(threshold_db=-55.0)
    run(gate, tone(0.05, -50.0))
    run(gate, tone(0.1, -56.5))  # 1.5 dB under: within the 3 dB hysteresis
    assert gate.is_open and gate.gain == 1.0
    run(gate, tone(0.05, -59.0))
    assert not gate.is_open


# --- VAD --------------------------------------------------------------------------------------


def vad_trace(vad, signal):
    out = []
    for b in blocks(signal):
        vad.process(b)
        out.append(vad.speech)
    return np.array(out)


def test_vad_flips_on_a_speech_burst_with_min_speech_and_silence():
    vad = Vad(threshold_db=-45, hysteresis_db=6, min_speech_ms=100, min_silence_ms=200)
    trace = vad_trace(vad, np.concatenate([silence(0.3), speechlike(0.6, -30), silence(0.6)]))
    on = int(np.argmax(trace)) * 10  # ms at which speech was first reported
    off = (len(trace) - int(np.argmax(trace[::-1]))) * 10
    assert 300 + 100 - 10 <= on <= 300 + 100 + 30, on
    assert 900 + 200 - 10 <= off <= 900 + 200 + 40, off


def test_vad_ignores_loud_noise_and_short_blips():
    vad = Vad(threshold_db=-45, min_speech_ms=100)
    assert not vad_trace(vad, noise(1.0, -25)).any()
    vad = Vad(threshold_db=-45, min_speech_ms=100)
    blips = np.concatenate([speechlike(0.06, -30), silence(0.1)] * 5)
    assert not vad_trace(vad, blips).any()


def vowel(band_db: float, seconds: float = 0.5) -> np.ndarray:
    """A held vowel whose 300-3400 Hz band (what the VAD measures) is at `band_db`."""
    probe = Vad()
    vad_trace(probe, speechlike(0.1, -40, syllables=False))
    return speechlike(seconds, -40 + band_db - probe.band_db, syllables=False)


def test_vad_hysteresis():
    vad = Vad(threshold_db=-45, hysteresis_db=6, min_speech_ms=50, min_silence_ms=100)
    assert not vad_trace(vad, vowel(-46.0)).any()  # never on just under the threshold
    assert vad_trace(vad, vowel(-44.0))[-1]
    assert vad_trace(vad, vowel(-50.0)).all()  # under threshold, inside the 6 dB hysteresis
    trace = vad_trace(vad, vowel(-52.0))  # under threshold - hysteresis
    assert not trace[-1] and 100 <= (int(np.argmin(trace)) + 1) * 10 <= 130  # min_silence_ms


# --- ducker -----------------------------------------------------------------------------------


def test_ducker_attenuates_by_its_setting_and_releases():
    duck = Ducker(attenuation_db=-12.0, attack_ms=50, release_ms=200)
    game = tone(1.0, -20.0)
    out = [duck.process(b, speech=True) for b in blocks(game[:24000])]
    assert abs(db(np.concatenate(out[5:])) - -32.0) < 0.01  # full depth after 50 ms
    assert db(out[1]) > -31.0  # gradual, not a step
    out = [duck.process(b, speech=False) for b in blocks(game[24000:])]
    assert abs(db(np.concatenate(out[20:])) - -20.0) < 0.01  # back after 200 ms
    assert db(out[9]) < -25.0


def test_chain_ducks_game_audio_while_voice_speaks():
    chain = Chain.from_config({"host_audio_ducking": True, "host_audio_ducker_attack_ms": 20})
    game = tone(1.0, -20.0)
    voice = np.concatenate([silence(0.3), speechlike(0.7, -30)])
    out = [chain.process(g, voice=v) for g, v in zip(blocks(game), blocks(voice), strict=True)]
    assert abs(db(np.concatenate(out[:30])) - -20.0) < 0.01
    assert abs(db(np.concatenate(out[-20:])) - -32.0) < 0.05


# --- config -----------------------------------------------------------------------------------


def test_out_of_range_and_garbage_values_are_clamped_or_defaulted():
    assert setting({"host_audio_agc_target_db": -100}, "host_audio_agc_target_db") == -40.0
    assert setting({"host_audio_agc_target_db": "5"}, "host_audio_agc_target_db") == -6.0
    assert setting({"host_audio_agc_attack_ms": 0}, "host_audio_agc_attack_ms") == 1
    assert setting({"host_audio_agc_attack_ms": "nan"}, "host_audio_agc_attack_ms") == 10
    assert setting({"host_audio_agc_hold_ms": "soon"}, "host_audio_agc_hold_ms") == 200
    assert setting({"host_audio_agc": "yes"}, "host_audio_agc") is True
    assert setting({"host_audio_agc": "maybe"}, "host_audio_agc") is False
    chain = Chain.from_config({"host_audio_agc": True, "host_audio_agc_max_gain_db": 99})
    assert chain.agc.max_gain_db == 30.0


@pytest.mark.parametrize("edge", ["min", "max"])
def test_every_stage_at_the_edges_of_every_range(edge):
    values = {}
    for name in AUDIO_KEYS:
        spec = key(name)
        values[name] = True if spec.type == "bool" else getattr(spec, edge)
    chain = Chain.from_config(values)
    assert chain.gate and chain.agc and chain.vad and chain.ducker
    x = np.concatenate([speechlike(0.3, -30), tone(0.2, -6), noise(0.2, -70), silence(0.1)])
    for ms in (10, 20):
        out = np.concatenate([chain.process(b) for b in blocks(x, ms)])
        assert out.shape == (x.shape[0] // 480 * 480, 2) or out.shape[0] > 0
        assert np.isfinite(out).all() and np.abs(out).max() <= 1.0
    pcm = (x * 32767).astype(np.int16)
    out = chain.process(pcm[:960])
    assert out.dtype == np.int16 and out.shape == (960, 2)


# --- surround ---------------------------------------------------------------------------------


def surround(signal: np.ndarray, channels: int, channel: int) -> np.ndarray:
    """`signal`'s left channel on one channel of a (frames, channels) block, the rest silent."""
    out = np.zeros((signal.shape[0], channels), np.float32)
    out[:, channel] = signal[:, 0]
    return out


def test_surround_levels_read_as_the_same_sound_in_stereo():
    """Centre dialogue in 5.1 reads as that dialogue panned to the middle of a stereo pair."""
    x = tone(0.1, -20.0)
    assert abs(level_db(surround(x, 6, 2)) - level_db(x * np.float32(0.70710677))) < 0.01
    assert abs(level_db(x) - -20.0) < 0.01  # stereo: the mean of its two channels, as before
    assert abs(level_db(np.tile(x[:, :1], (1, 8))) - (-20.0 + 10 * np.log10(4))) < 0.01


@pytest.mark.parametrize("channels", [6, 8])
def test_the_chain_works_on_surround_blocks_with_one_gain_for_all_channels(channels):
    chain = Chain.from_config(
        {"host_audio_agc": True, "host_audio_agc_target_db": -20, "host_audio_noise_gate": True}
    )
    x = np.concatenate([surround(tone(1.0, -30.0), channels, 4), np.zeros((4800, channels))])
    x[:, 0] = 0.5 * x[:, 4]  # FL a little quieter: the image must keep that ratio
    x = x.astype(np.float32)
    out = np.concatenate([chain.process(b) for b in blocks(x)])
    assert out.shape == x.shape
    steady = out[24000:48000]
    assert abs(level_db(steady) - -20.0) < 1.0  # the AGC brought the mix to its target
    ratio = np.sqrt(np.mean(steady[:, 0] ** 2) / np.mean(steady[:, 4] ** 2))
    assert abs(ratio - 0.5) < 0.01
    assert not out[:, [1, 2, 3, 5]].any()
    assert db(out[-2400:]) < -100  # the gate closed in the silence


def test_the_vad_hears_centre_dialogue_in_51():
    vad = Vad(threshold_db=-40.0)
    for b in blocks(surround(speechlike(0.5, -30.0), 6, 2)):
        vad.process(b)
    assert vad.speech
