"""The stages of the audio processing chain between capture and Opus, one small class each.

Every stage works on whole blocks (10 ms or 20 ms of 48 kHz audio, float32, shape
``(frames, channels)``) with numpy: a stage decides one gain per block from the block's level
and ramps linearly from the previous block's gain to it across the block. The ramp keeps gain
changes free of clicks ("zipper noise") without a per-sample Python loop, and a 10 ms decision
grid is fine for levels that matter to a listener.

Levels are RMS in dBFS against full-scale amplitude 1.0 (a sine of amplitude 0.5 reads
-9.03 dBFS), measured over all channels together and applied as one gain to all of them, so
a stereo or surround image is never skewed. Mono and stereo read the mean power of their
channels; 5.1 and 7.1 read their channels' total power against a stereo pair's (the sum over
two), so the same sound reads the same level in either layout: dialogue on the centre alone
reads as that dialogue panned to the middle of a stereo pair. The VAD listens to a mono mix
(the fronts, centre and surrounds at the BS.775 weights, LFE left out), for the same reason.

Time constants: a stage "reaches" its goal within its attack or release time. For the AGC's
exponential approach that means 90 % of the way in dB (the time constant is the setting / ln 10);
the ducker and the gate move linearly in dB and get there exactly.
"""

from __future__ import annotations

import math

import numpy as np

RATE = 48_000
SILENCE_DB = -120.0  # level of digital silence; keeps log10 finite
_TINY = 1e-12


def level_db(block: np.ndarray) -> float:
    """RMS level of a float block in dBFS (all channels together, see the module docstring)."""
    if block.size == 0:
        return SILENCE_DB
    power = float(np.mean(np.square(block, dtype=np.float64)))
    channels = block.shape[1] if block.ndim == 2 else 1
    if channels > 2:
        power *= channels / 2.0  # total power over a stereo pair's
    return max(SILENCE_DB, 10.0 * math.log10(power + _TINY))


# Mono mix weights per channel (client order FL FR C LFE RL RR SL SR): the fronts' mean, the
# centre and surrounds at -3 dB of it as in a BS.775 downmix, no LFE.
_MONO_WEIGHTS = {
    6: np.array([0.5, 0.5, 0.7071, 0.0, 0.3536, 0.3536], dtype=np.float32),
    8: np.array([0.5, 0.5, 0.7071, 0.0, 0.3536, 0.3536, 0.3536, 0.3536], dtype=np.float32),
}


def mono(block: np.ndarray) -> np.ndarray:
    """One channel of a (frames, channels) block: the mean of mono/stereo, a BS.775-weighted
    mix of 5.1/7.1."""
    if block.ndim != 2:
        return block
    weights = _MONO_WEIGHTS.get(block.shape[1])
    return block.mean(axis=1) if weights is None else block @ weights


def block_ms(block: np.ndarray) -> float:
    return block.shape[0] * 1000.0 / RATE


def db_to_gain(db: float) -> float:
    return 10.0 ** (db / 20.0)


def ramp(block: np.ndarray, start: float, end: float) -> np.ndarray:
    """`block` times a gain that moves linearly from `start` to `end` over the block."""
    if start == end:
        return block if start == 1.0 else block * np.float32(end)
    n = block.shape[0]
    # Reach `end` on the last frame so the next block continues from exactly there.
    g = np.linspace(start, end, n, dtype=np.float32)
    return block * g[:, None]


class NoiseGate:
    """Silences blocks whose level is below the threshold: hiss and fan noise between sounds.

    The gate opens at the threshold and closes only 3 dB below it, so a signal hovering at
    the threshold does not chatter. It opens within one block (a late open would cut the start
    of a sound) and closes over `close_ms` so a decaying tail fades rather than snaps off.
    """

    HYSTERESIS_DB = 3.0

    def __init__(self, threshold_db: float = -55.0, close_ms: float = 20.0):
        self.threshold_db = float(threshold_db)
        self.close_ms = float(close_ms)
        self.is_open = False
        self.gain = 0.0  # linear, 0 = closed

    def process(self, block: np.ndarray, level: float | None = None) -> np.ndarray:
        lvl = level_db(block) if level is None else level
        if lvl >= self.threshold_db:
            self.is_open = True
        elif lvl < self.threshold_db - self.HYSTERESIS_DB:
            self.is_open = False
        start = self.gain
        end = 1.0 if self.is_open else max(0.0, start - block_ms(block) / self.close_ms)
        self.gain = end
        return ramp(block, start, end)


class Agc:
    """Automatic gain control: brings the level of what plays toward `target_db`.

    Feed-forward: the wanted gain is target minus the block's level, clamped to
    [min_gain_db, max_gain_db]. The gain gets 90 % of the way there:

    * within `attack_ms` when it must come down (a loud burst is tamed at once);
    * within `release_ms` when it may go up, but only after the sound has stayed quieter than
      the target for `hold_ms`, so the dips inside music and speech are not pumped up;
    * within `attack_ms` both ways while a sound is new (its first `hold_ms`, at least two
      attack times, after a silence), so a quiet game reaches the target within the attack
      time instead of waiting out the hold.

    Under `floor_db` is silence: never amplified; after `hold_ms` of it the gain releases
    toward 0 dB, so the next sound starts from unity and is acquired afresh.

    A rise of less than `DEADBAND_DB` does not start the hold (a level wobbling around the
    target must not creep the gain up); once releasing, it goes on until within `SETTLED_DB`.
    """

    DEADBAND_DB = 1.0
    SETTLED_DB = 0.1

    def __init__(
        self,
        target_db: float = -20.0,
        max_gain_db: float = 12.0,
        min_gain_db: float = -12.0,
        attack_ms: float = 10.0,
        hold_ms: float = 200.0,
        release_ms: float = 100.0,
        floor_db: float = -70.0,
    ):
        self.target_db = float(target_db)
        self.max_gain_db = float(max_gain_db)
        self.min_gain_db = float(min_gain_db)
        self.attack_ms = max(float(attack_ms), 0.001)
        self.hold_ms = float(hold_ms)
        self.release_ms = max(float(release_ms), 0.001)
        self.floor_db = float(floor_db)
        self.acquire_ms = max(self.hold_ms, 2.0 * self.attack_ms)
        self.gain_db = 0.0
        self._quiet_ms = math.inf  # silence before the first sound: it is acquired
        self._sound_ms = 0.0  # how long the current sound has played
        self._under_ms = 0.0  # how long the gain has wanted to rise

    @staticmethod
    def _step(ms: float, time_ms: float) -> float:
        """Fraction of the remaining way covered in `ms` when 90 % takes `time_ms`."""
        return 1.0 - math.exp(-ms * math.log(10.0) / time_ms)

    def process(self, block: np.ndarray, level: float | None = None) -> np.ndarray:
        lvl = level_db(block) if level is None else level
        ms = block_ms(block)
        start_db = self.gain_db
        if lvl >= self.floor_db:
            if self._quiet_ms >= self.hold_ms:
                self._sound_ms = 0.0  # a new sound after a real silence
            self._quiet_ms = 0.0
            want = min(self.max_gain_db, max(self.min_gain_db, self.target_db - lvl))
            rise = want - self.gain_db
            releasing = self._under_ms > self.hold_ms
            if self._sound_ms < self.acquire_ms or rise < -self.SETTLED_DB:
                self._under_ms = 0.0
                self.gain_db += rise * self._step(ms, self.attack_ms)
            elif rise > self.DEADBAND_DB or (releasing and rise > self.SETTLED_DB):
                self._under_ms += ms
                if self._under_ms > self.hold_ms:
                    self.gain_db += rise * self._step(ms, self.release_ms)
            else:
                self._under_ms = 0.0  # on target: nothing to hold out for
            self._sound_ms += ms
        else:
            self._quiet_ms += ms
            if self._quiet_ms > self.hold_ms:
                self.gain_db -= self.gain_db * self._step(ms, self.release_ms)
        return ramp(block, db_to_gain(start_db), db_to_gain(self.gain_db))


class Vad:
    """Voice activity detection: is someone speaking in this signal?

    A block is voice-like when its 300-3400 Hz band is loud and its spectrum is not flat
    (voiced speech is harmonic; hiss, fans and broadband game noise are flat). Speech starts
    when voice-like blocks last `min_speech_ms` at or above `threshold_db`, and ends once the
    band level stays under `threshold_db - hysteresis_db` (or the spectrum goes flat) for
    `min_silence_ms`. The hysteresis keeps a voice that dips between syllables from flapping.
    The audio passes unchanged; `speech` is what the ducker (and the engine's stats) read.
    """

    BAND_HZ = (300.0, 3400.0)
    MAX_FLATNESS = 0.36  # white noise reads 0.4-0.77 (median 0.58), a voiced sound 0.1-0.32

    def __init__(
        self,
        threshold_db: float = -45.0,
        hysteresis_db: float = 6.0,
        min_speech_ms: float = 100.0,
        min_silence_ms: float = 200.0,
    ):
        self.threshold_db = float(threshold_db)
        self.hysteresis_db = float(hysteresis_db)
        self.min_speech_ms = float(min_speech_ms)
        self.min_silence_ms = float(min_silence_ms)
        self.speech = False
        self.band_db = SILENCE_DB
        self.flatness = 1.0
        self._run_ms = 0.0  # how long the opposite of the current state has held
        self._prev: np.ndarray | None = None
        self._window: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _analyse(self, block: np.ndarray) -> None:
        mix = mono(block)
        # Two blocks of history: a 20 ms window resolves a low voice's harmonics (50 Hz bins).
        frame = mix if self._prev is None else np.concatenate((self._prev, mix))
        self._prev = mix.copy()
        n = frame.shape[0]
        if n not in self._window:
            freqs = np.fft.rfftfreq(n, 1.0 / RATE)
            band = (freqs >= self.BAND_HZ[0]) & (freqs <= self.BAND_HZ[1])
            win = np.hanning(n).astype(np.float32)
            self._window[n] = (win, band)
        win, band = self._window[n]
        spec = np.abs(np.fft.rfft(frame * win)) ** 2
        p = spec[band] + _TINY
        # Parseval with the Hann window's power gain (3/8): band level in dBFS of the signal.
        band_power = 2.0 * float(p.sum()) / (n * n * 0.375)
        self.band_db = max(SILENCE_DB, 10.0 * math.log10(band_power + _TINY))
        self.flatness = float(np.exp(np.mean(np.log(p))) / np.mean(p))

    def process(self, block: np.ndarray) -> np.ndarray:
        self._analyse(block)
        voiced = self.flatness <= self.MAX_FLATNESS
        ms = block_ms(block)
        if not self.speech:
            flip = voiced and self.band_db >= self.threshold_db
            need = self.min_speech_ms
        else:
            flip = (not voiced) or self.band_db < self.threshold_db - self.hysteresis_db
            need = self.min_silence_ms
        self._run_ms = self._run_ms + ms if flip else 0.0
        if flip and self._run_ms >= need:
            self.speech = not self.speech
            self._run_ms = 0.0
        return block


class Ducker:
    """Lowers the game's audio by `attenuation_db` while speech is detected.

    The gain slides linearly in dB: down to the attenuation within `attack_ms` once speech
    starts, back to 0 dB within `release_ms` once it ends (slow, so the game does not jump
    back between sentences).
    """

    def __init__(
        self, attenuation_db: float = -12.0, attack_ms: float = 50.0, release_ms: float = 500.0
    ):
        self.attenuation_db = min(0.0, float(attenuation_db))
        self.attack_ms = max(float(attack_ms), 0.001)
        self.release_ms = max(float(release_ms), 0.001)
        self.gain_db = 0.0

    def process(self, block: np.ndarray, speech: bool) -> np.ndarray:
        ms = block_ms(block)
        start_db = self.gain_db
        depth = -self.attenuation_db
        if speech:
            step = depth * ms / self.attack_ms
            self.gain_db = max(self.attenuation_db, self.gain_db - step)
        else:
            step = depth * ms / self.release_ms
            self.gain_db = min(0.0, self.gain_db + step)
        return ramp(block, db_to_gain(start_db), db_to_gain(self.gain_db))
