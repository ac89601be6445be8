"""Synthetic test signals (48 kHz stereo float32) and the measurements the tests make."""

from __future__ import annotations

import numpy as np

RATE = 48_000


def tone(seconds: float, level_db: float, freq: float = 1000.0) -> np.ndarray:
    """A sine whose RMS is `level_db` dBFS (amplitude = RMS * sqrt 2)."""
    t = np.arange(int(seconds * RATE)) / RATE
    x = np.sqrt(2.0) * 10 ** (level_db / 20) * np.sin(2 * np.pi * freq * t)
    return np.stack([x, x], 1).astype(np.float32)


def noise(seconds: float, level_db: float, seed: int = 1) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(int(seconds * RATE)) * 10 ** (level_db / 20)
    return np.stack([x, x], 1).astype(np.float32)


def speechlike(
    seconds: float, level_db: float, f0: float = 140.0, syllables: bool = True
) -> np.ndarray:
    """A voiced, vowel-like sound: a harmonic series on a wobbling pitch, syllable-modulated
    (4 Hz) unless `syllables` is false (a held vowel, for level thresholds)."""
    t = np.arange(int(seconds * RATE)) / RATE
    phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))) / RATE
    x = sum(np.sin(k * phase) / k for k in range(1, 25))
    if syllables:
        x = x * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))
    x = x / np.sqrt(np.mean(x**2)) * 10 ** (level_db / 20)
    return np.stack([x, x], 1).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros((int(seconds * RATE), 2), dtype=np.float32)


def blocks(signal: np.ndarray, ms: int = 10):
    n = RATE * ms // 1000
    for i in range(0, signal.shape[0] - n + 1, n):
        yield signal[i : i + n]


def db(x: np.ndarray) -> float:
    return 10 * np.log10(np.mean(np.square(x, dtype=np.float64)) + 1e-30)


def peak_hz_and_db(x: np.ndarray) -> tuple[float, float]:
    """Frequency of the strongest FFT bin (Hann window) and the signal's RMS in dBFS."""
    mono = x.mean(axis=1) if x.ndim == 2 else x
    spec = np.abs(np.fft.rfft(mono * np.hanning(len(mono))))
    freqs = np.fft.rfftfreq(len(mono), 1 / RATE)
    return float(freqs[int(np.argmax(spec))]), db(mono)
