"""The processing chain the engine runs on each captured block before Opus.

Order: noise gate -> AGC -> ducker -> fixed gain (`audio_gain`) -> clip. The gate comes
first so the AGC never lifts hiss between sounds; the VAD listens to the input as captured (its
thresholds are dBFS of what the game or voice source really plays), or to a separate voice feed
when the engine has one, and the ducker lowers the game by its setting while the VAD hears
speech. Ducking needs the VAD, so `host_audio_ducking` runs the detector even when
`host_audio_vad` is off; the VAD alone changes nothing audible, it only raises `speech` for the
engine.

Every stage is off by default. With all of them off `process` returns the block it was given,
untouched, so a fresh host streams exactly what the game plays.

Settings come from the `host_audio_*` keys. The ranges are the schema's (the one config
table); a value outside its range is clamped rather than refused, because a session must start
even with a hand-edited config, and a value that is not a number falls back to the default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hostconfig import store
from hostconfig.schema import AUDIO_KEYS, key
from media.audio.dsp import Agc, Ducker, NoiseGate, Vad, level_db

log = logging.getLogger("media.audio")


def setting(values: Mapping[str, Any], name: str) -> Any:
    """`values[name]` made safe: the schema default when absent or unusable, clamped to range."""
    spec = key(name)
    if spec is None:  # pragma: no cover - the schema lost a key; fail loudly in tests
        raise KeyError(name)
    raw = values.get(name, spec.default)
    if spec.type == "bool":
        if isinstance(raw, bool):
            return raw
        try:
            return bool(spec.parse(raw))
        except (ValueError, TypeError):
            log.warning("audio setting %s=%r is not a bool; using %r", name, raw, spec.default)
            return spec.default
    try:
        num = float(raw)
        if not math.isfinite(num) or isinstance(raw, bool):
            raise ValueError(raw)
    except (ValueError, TypeError):
        log.warning("audio setting %s=%r is not a number; using %r", name, raw, spec.default)
        return spec.default
    lo = spec.min if spec.min is not None else num
    hi = spec.max if spec.max is not None else num
    clamped = min(hi, max(lo, num))
    if clamped != num:
        log.warning("audio setting %s=%r is outside %s..%s; using %s", name, raw, lo, hi, clamped)
    return int(round(clamped)) if spec.type == "int" else clamped


@dataclass
class Chain:
    """Gate, AGC, VAD and ducker, each None when off."""

    gate: NoiseGate | None = None
    agc: Agc | None = None
    vad: Vad | None = None
    ducker: Ducker | None = None
    gain: float | None = None  # `audio_gain`, a linear factor; None (unset) or 1.0 = none

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> Chain:
        """A chain from `host_audio_*` values (typed or raw strings); missing keys = defaults."""
        v = {name: setting(values, name) for name in AUDIO_KEYS}
        gate = NoiseGate(v["host_audio_noise_gate_db"]) if v["host_audio_noise_gate"] else None
        agc = None
        if v["host_audio_agc"]:
            agc = Agc(
                target_db=v["host_audio_agc_target_db"],
                max_gain_db=v["host_audio_agc_max_gain_db"],
                min_gain_db=v["host_audio_agc_min_gain_db"],
                attack_ms=v["host_audio_agc_attack_ms"],
                hold_ms=v["host_audio_agc_hold_ms"],
                release_ms=v["host_audio_agc_release_ms"],
            )
        vad = None
        if v["host_audio_vad"] or v["host_audio_ducking"]:
            vad = Vad(
                threshold_db=v["host_audio_vad_threshold_db"],
                hysteresis_db=v["host_audio_vad_hysteresis_db"],
                min_speech_ms=v["host_audio_vad_min_speech_ms"],
                min_silence_ms=v["host_audio_vad_min_silence_ms"],
            )
        ducker = None
        if v["host_audio_ducking"]:
            ducker = Ducker(
                attenuation_db=v["host_audio_ducker_attenuation_db"],
                attack_ms=v["host_audio_ducker_attack_ms"],
                release_ms=v["host_audio_ducker_release_ms"],
            )
        gain = _gain(values.get("audio_gain"))
        return cls(gate=gate, agc=agc, vad=vad, ducker=ducker, gain=gain)

    @classmethod
    def from_store(cls) -> Chain:
        """A chain from the host's config file (read once, at session start)."""
        return cls.from_config({name: store.get(name) for name in (*AUDIO_KEYS, "audio_gain")})

    @property
    def active(self) -> bool:
        """True when some stage can change the audio (the VAD alone cannot)."""
        return any(s is not None for s in (self.gate, self.agc, self.ducker, self.gain))

    @property
    def speech(self) -> bool:
        return bool(self.vad and self.vad.speech)

    def process(self, block: np.ndarray, voice: np.ndarray | None = None) -> np.ndarray:
        """One block, float32 in [-1, 1] or int16, shape (frames, channels); same dtype back.

        `voice` is an optional separate speech feed (same block length) for the VAD; without
        it the VAD listens to `block` itself.
        """
        if self.vad is not None:
            self.vad.process(_as_float(voice if voice is not None else block))
        if not self.active:
            return block
        is_int = block.dtype == np.int16
        x = _as_float(block)
        if self.gate is not None:
            x = self.gate.process(x)
        if self.agc is not None:
            x = self.agc.process(x)
        if self.ducker is not None:
            x = self.ducker.process(x, self.speech)
        if self.gain is not None:
            x = x * np.float32(self.gain)
        if is_int:
            return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int16)
        # A new array: the caller's block is never written to, even when every gain was 1.
        return np.clip(x, -1.0, 1.0).astype(np.float32, copy=False)


def _gain(raw: Any) -> float | None:
    """`audio_gain` as a factor for the chain: None when unset or 1.0 (the block passes
    untouched); a hand-edited value out of range is clamped like every audio setting."""
    if raw is None or raw == "":
        return None
    gain = setting({"audio_gain": raw}, "audio_gain")
    return None if gain is None or gain == 1.0 else float(gain)


def _as_float(block: np.ndarray) -> np.ndarray:
    if block.dtype == np.int16:
        return block.astype(np.float32) / np.float32(32768.0)
    return block if block.dtype == np.float32 else block.astype(np.float32)


__all__ = ["Chain", "level_db", "setting"]
