"""`keybindings` and `audio_gain` act in the code both planes share: the one injector base
(XTest and the wlroots virtual keyboard) and the one audio chain (compat's audio feed and the
native plane's Opus track)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from hostconfig import store
from media.input.session import SessionInput
from tests.media.test_input_packets import key

pytestmark = pytest.mark.django_db


def test_keybindings_press_the_mapped_key_on_a_real_display(state, xvfb, watcher):
    store.write({"keybindings": "0x41,0x42,0x0D,0x20"})  # a -> b, Return -> space
    s = SessionInput(xvfb)
    try:
        for payload in (key(0x41, True), key(0x41, False), key(0x0D, True), key(0x0D, False)):
            assert s.handle(payload)
        assert s.handle(key(0x43, True)) and s.handle(key(0x43, False))  # unmapped: itself
        assert watcher.events(want=6) == [
            ("key+", "b"), ("key-", "b"), ("key+", "space"), ("key-", "space"),
            ("key+", "c"), ("key-", "c"),
        ]  # fmt: skip
    finally:
        s.close()
    # The native plane's data channel reaches the same injector, so the same map.
    from native.inputs import inject

    s = SessionInput(xvfb)
    try:
        assert s.x.remap == {0x41: 0x42, 0x0D: 0x20}
        assert inject(s.x, {"t": "k", "vk": 0x41, "d": 1})
        assert inject(s.x, {"t": "k", "vk": 0x41, "d": 0})
        assert watcher.events(want=2) == [("key+", "b"), ("key-", "b")]
    finally:
        s.close()


def test_keybindings_bad_pairs_are_400_in_both_doors(admin, state):
    for bad, why in (
        ("0x41", "from,to pairs"),
        ("0x41,0x1FF", "'0x1FF' is not a key code"),
        ("0x41,zz", "'zz' is not a key code"),
        ("0x41,0x42,0x41,0x43", "remapped twice"),
    ):
        r = admin.post("/api/config", {"keybindings": bad}, format="json")
        assert r.status_code == 400 and why in r.json()["error"], (bad, r.content)
    assert (
        not (state / "host.conf").exists() or "keybindings" not in (state / "host.conf").read_text()
    )
    r = admin.post("/api/config", {"keybindings": ["0x41", "0x42"]}, format="json")
    assert r.status_code == 200, r.content
    assert store.get("keybindings") == ["0x41", "0x42"]
    # A hand-edited odd list is no map at all (one dropped code would shift every pair).
    (state / "host.conf").write_text("keybindings = 0x41,0x42,0x43\n")
    assert store.get("keybindings") == []


def _tone(amplitude: float, frames: int = 480) -> np.ndarray:
    t = np.arange(frames) / 48_000
    wave = (amplitude * 32767 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)
    return np.stack([wave, wave], axis=1)


def test_audio_gain_scales_the_sound_of_both_planes(state):
    from media.audio.chain import Chain
    from media.audiofeed import SessionSound

    block = _tone(0.1)
    assert Chain.from_config(store.values()).process(block) is block  # unset: untouched
    store.update({"audio_gain": 2.5})
    values = store.values()
    # compat: the session's sound (streaming.sessions.sound.open_sound builds it this way)
    compat = SessionSound(None, Chain.from_config(values), None).chain.process(block)
    peak_in, peak_out = np.abs(block).max(), np.abs(compat).max()
    assert abs(peak_out / peak_in - 2.5) < 0.01
    # a loud block clips at full scale instead of wrapping round
    loud = Chain.from_config(values).process(_tone(0.9))
    assert loud.max() == 32767 and loud.min() == -32768
    store.update({"audio_gain": 0.5})

    # native: the Opus track reads the same values at session start
    from native.sound import OpusTrack

    class Capture:
        def __init__(self):
            self.left = 5

        def read(self, n, timeout=0.5):
            self.left -= 1
            return _tone(0.1, n) if self.left >= 0 else None

        def close(self):
            pass

    async def run():
        track = OpusTrack(Capture(), store.values())
        try:
            return track.chain.gain, track.chain.process(block)
        finally:
            track.close()

    gain, native = asyncio.run(run())
    assert gain == 0.5 and abs(np.abs(native).max() / peak_in - 0.5) < 0.01
