"""Audio path costs, run by hand: `.venv/bin/python bench/audio.py [--latency]`.

Prints, from one run:
* the processing chain's cost per 10 ms block with every stage on, against the block's own
  duration (the baseline: 10 ms of audio must take far less than 10 ms to process);
* the chain with every stage off (the bit-exact passthrough a fresh host runs);
* Opus encode cost per 5/10/20 ms frame at the default settings, against the frame duration;
* Opus encode cost per 5 ms packet for each GameStream layout and quality (stereo, 5.1, 7.1,
  normal and high quality, at their bitrates), against stereo normal quality;
* with --latency (needs pulseaudio): tone onset played into a session sink until it comes
  out of capture -> chain -> Opus -> decode, the host's share of capture-to-client latency.
* with --client N (needs pulseaudio, Xvfb): the end-to-end tone test N times on a host of its
  own: the session's app writes a 1 kHz tone into its sink, the real client library
  (moonlight-python) receives it; app write -> the client's receive time of the packet
  holding the tone's onset (both CLOCK_MONOTONIC), plus the level and frequency received.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostconfig.schema import AUDIO_KEYS
from media.audio import layouts
from media.audio.chain import Chain
from media.audio.opus import OpusDecoder, OpusEncoder

RATE = 48_000


def program(seconds: float) -> np.ndarray:
    """Game-like material: a tone, a voice-like buzz and noise, levels moving."""
    rng = np.random.default_rng(7)
    t = np.arange(int(seconds * RATE)) / RATE
    x = 0.2 * np.sin(2 * np.pi * 440 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 0.5 * t))
    x += 0.05 * np.sign(np.sin(2 * np.pi * 140 * t)) * (np.sin(2 * np.pi * 2 * t) > 0)
    x += 0.01 * rng.standard_normal(t.size)
    return np.stack([x, x * 0.9], 1).astype(np.float32)


def per_block(fn, blocks, repeat: int = 3) -> tuple[float, float]:
    """Median and p99 seconds per call over `blocks`, best of `repeat` passes."""
    best = None
    for _ in range(repeat):
        times = []
        for b in blocks:
            t0 = time.perf_counter()
            fn(b)
            times.append(time.perf_counter() - t0)
        times.sort()
        run = (statistics.median(times), times[int(len(times) * 0.99)])
        best = run if best is None or run[0] < best[0] else best
    return best


def bench_chain(seconds: float) -> None:
    x = program(seconds)
    blocks = [x[i : i + 480] for i in range(0, len(x) - 479, 480)]
    on = {
        name: True
        for name in AUDIO_KEYS
        if name
        in {"host_audio_agc", "host_audio_vad", "host_audio_ducking", "host_audio_noise_gate"}
    }
    for label, values in (("every stage on", on), ("every stage off", {})):
        chain = Chain.from_config(values)
        med, p99 = per_block(chain.process, blocks)
        print(
            f"chain, {label:16s}: {med * 1e6:8.1f} us median, {p99 * 1e6:8.1f} us p99 per 10 ms "
            f"block = {med / 0.010 * 100:.2f} % of the block's 10 000 us ({len(blocks)} blocks)"
        )
    pcm = (x * 32767).astype(np.int16)
    iblocks = [pcm[i : i + 480] for i in range(0, len(pcm) - 479, 480)]
    med, _ = per_block(Chain.from_config(on).process, iblocks)
    print(f"chain, every stage on, int16 in/out: {med * 1e6:8.1f} us median per 10 ms block")


def bench_opus(seconds: float) -> None:
    x = program(seconds)
    for frame_ms in (5, 10, 20):
        n = RATE * frame_ms // 1000
        frames = [x[i : i + n] for i in range(0, len(x) - n + 1, n)]
        enc = OpusEncoder(frame_ms=frame_ms)
        med, p99 = per_block(enc.encode, frames, repeat=1)
        print(
            f"opus encode, {frame_ms:2d} ms frame: {med * 1e6:8.1f} us median, {p99 * 1e6:8.1f} us"
            f" p99 = {med / (frame_ms / 1000) * 100:.2f} % of the frame's {frame_ms * 1000} us"
        )


def bench_layouts(seconds: float) -> None:
    """Per 5 ms packet, the stream's own shape: the program on every channel of the layout."""
    x = program(seconds)
    n = RATE * 5 // 1000
    base = None
    for channels in (2, 6, 8):
        pcm = np.tile(x[:, :1], (1, channels)) * np.linspace(1.0, 0.6, channels, dtype=np.float32)
        frames = [pcm[i : i + n] for i in range(0, len(pcm) - n + 1, n)]
        for high in (False, True):
            config = layouts.layout(channels).config(high)
            enc = OpusEncoder(frame_ms=5, bitrate=config.bitrate, layout=config)
            med, p99 = per_block(enc.encode, frames, repeat=1)
            base = base or med
            name = f"{layouts.NAMES[channels]} {'high' if high else 'normal'}"
            print(
                f"opus encode, 5 ms packet, {name:11s} ({config.bitrate // 1000:4d} kb/s): "
                f"{med * 1e6:7.1f} us median, {p99 * 1e6:7.1f} us p99 = {med / base:.2f}x stereo,"
                f" {med / 0.005 * 100:.2f} % of a core"
            )


def bench_latency(trials: int) -> None:
    from media.audio.capture import SessionAudio

    audio = SessionAudio({}, "bench", reuse=False).start()
    chain = Chain.from_config({"host_audio_agc": True})
    try:
        player = subprocess.Popen(
            [
                "pacat",
                "--playback",
                "--latency-msec=20",
                "--raw",
                "--rate=48000",
                "--channels=2",
                "--format=s16le",
            ],
            stdin=subprocess.PIPE,
            env={**os.environ, **audio.app_env()},
        )
        silence = np.zeros((480, 2), dtype="<i2").tobytes()
        t = np.arange(4800) / RATE
        burst = (0.5 * np.sin(2 * np.pi * 1000 * t) * 32767).astype("<i2")
        burst = np.stack([burst, burst], 1).tobytes()
        results = []
        for _ in range(trials):
            enc, dec = OpusEncoder(frame_ms=5), OpusDecoder()
            for _ in range(30):  # keep the player fed with silence, drain the capture
                player.stdin.write(silence)
                player.stdin.flush()
                audio.read(480, 1.0)
            t0 = time.perf_counter()
            player.stdin.write(burst)
            player.stdin.flush()
            while time.perf_counter() - t0 < 2.0:
                block = audio.read(240, 1.0)
                out = [dec.decode(p) for p in enc.encode(chain.process(block))]
                if out and np.abs(np.concatenate(out)).max() > 3000:
                    results.append(time.perf_counter() - t0)
                    break
            for _ in range(20):
                audio.read(480, 1.0)
        player.stdin.close()
        player.wait(5)
        results.sort()
        print(
            f"tone onset -> decoded (play, sink, parec, chain, Opus 5 ms, decode): median "
            f"{statistics.median(results) * 1e3:.1f} ms, min {results[0] * 1e3:.1f} ms, max "
            f"{results[-1] * 1e3:.1f} ms over {len(results)} trials"
        )
    finally:
        audio.close()


def bench_client_latency(trials: int) -> None:
    """Capture-to-client latency through a live session (tests/support/play_client.py)."""
    import json
    import tempfile

    from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
    from tests.support.livehost import ROOT, start_host
    from tests.support.moonlight import Moonlight, post_pin

    state = Path(tempfile.mkdtemp(prefix="bench-audio-"))
    marks = state / "marks"
    marks.mkdir()
    tone_app = ROOT / "tests/support/tone_app.py"
    apps = {"apps": [{"name": "Tone", "cmd": f"exec {sys.executable} {tone_app} {marks}"}]}
    (state / "apps.json").write_text(json.dumps(apps))
    host = start_host(state_dir=state)
    lat, levels = [], []
    try:
        auth = (ADMIN_USER, ADMIN_PASSWORD)
        with host.client() as c:
            c.post("/api/password", json={"newUsername": auth[0], "newPassword": auth[1],
                                          "confirmNewPassword": auth[1]})  # fmt: skip
        ml = Moonlight(host, state / "client")
        ml.start_pairing("1234")
        post_pin(host, auth, "1234", "bench")
        ml.wait_paired()
        (marks / "tone-spec.json").write_text('{"freq": 1000, "amp": 0.25, "seconds": 1}')
        for _ in range(trials):
            args = [sys.executable, str(ROOT / "tests/support/play_client.py"),
                    str(host.base_port), str(state / "client"), "Tone", "2", "tone", str(marks),
                    host.url, host.mgmt_token, str(host.cert_path)]  # fmt: skip
            subprocess.run(args, cwd=ROOT, check=True, capture_output=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
            z = np.load(marks / "received.npz")
            pcm, starts = z["pcm"][:, 0], z["starts"]
            onset = int(np.argmax(np.abs(pcm) > 0.05))  # the tone peaks at 0.25
            t_on = json.loads((marks / "tone.json").read_text())["t_on"]
            first_us = starts[np.searchsorted(starts[:, 0], onset, side="right") - 1, 1]
            lat.append(first_us / 1e3 - t_on * 1e3)
            steady = pcm[onset + RATE // 5 : onset + RATE // 5 + RATE // 2]
            levels.append(20 * np.log10(np.sqrt(np.mean(steady.astype(np.float64) ** 2))))
    finally:
        host.stop()
    lat.sort()
    print(
        f"tone, app write -> client receive (pacat 10 ms buffer, null sink, parec 20 ms, chain,"
        f" Opus, AES, RTP, loopback): median {statistics.median(lat):.1f} ms, min {lat[0]:.1f},"
        f" max {lat[-1]:.1f} over {len(lat)} sessions; level received"
        f" {statistics.mean(levels):.2f} dBFS (sent -15.05)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--client", type=int, default=0, metavar="N", help="live-session tone runs")
    args = ap.parse_args()
    print("baseline: one block is 10 ms = 10 000 us of audio; Opus frames 5/10/20 ms")
    bench_chain(args.seconds)
    bench_opus(args.seconds)
    bench_layouts(args.seconds)
    if args.latency:
        bench_latency(args.trials)
    if args.client:
        bench_client_latency(args.client)


if __name__ == "__main__":
    main()
