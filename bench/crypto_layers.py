"""What stream encryption costs the packetizers. Run: `.venv/bin/python bench/crypto_layers.py`.

Figures, each plain against encrypted in the same run: the fastest of `--repeat` runs (the CPU
cost with the least interference on a shared machine; medians swing with the load):
* video: packetize (20 % FEC) a 42 KB P-frame (20 Mbit/s at 60 fps) and a 300 KB IDR, with and
  without AES-128-GCM per datagram (mode 1/2 of `lan_/wan_encryption_mode`);
* audio: one 60-byte CBR Opus packet (96 kbit/s, 5 ms), with and without AES-128-CBC;
* control: sealing one message (always encrypted; shown for scale).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compat import control
from compat.audio import AudioPacketizer
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer

KEY = bytes(range(16))


def _median_s(fn, repeat: int, inner: int = 1) -> float:
    fn()  # warm (FEC matrices, cipher contexts)
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        runs.append((time.perf_counter() - t) / inner)
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(5)
    for name, size, ftype in [
        ("P-frame 42 KB", 20_000_000 // 8 // 60, FRAME_TYPE_P),
        ("IDR 300 KB", 300_000, FRAME_TYPE_IDR),
    ]:
        frame = b"\0\0\0\1\x41" + rng.integers(1, 256, size, dtype=np.uint8).tobytes()
        plain = VideoPacketizer(packet_size=1360, fec_percentage=20)
        sealed = VideoPacketizer(packet_size=1360, fec_percentage=20, encryption_key=KEY)
        a = _median_s(lambda p=plain, f=frame, t=ftype: p.packetize(f, t), args.repeat)
        b = _median_s(lambda p=sealed, f=frame, t=ftype: p.packetize(f, t), args.repeat)
        rows = plain.packetize(frame, ftype).shape[0]
        print(f"video {name}: plain {a * 1000:.3f} ms, encrypted {b * 1000:.3f} ms "
              f"({b / a:.2f}x, {rows} datagrams)")  # fmt: skip
    opus = bytes(60)
    plain_a = AudioPacketizer(packet_ms=5)
    sealed_a = AudioPacketizer(key=KEY, rikeyid=7, packet_ms=5)
    a = _median_s(lambda: plain_a.packetize(opus), args.repeat, 400)
    b = _median_s(lambda: sealed_a.packetize(opus), args.repeat, 400)
    print(f"audio packet 60 B: plain {a * 1e6:.1f} us, encrypted {b * 1e6:.1f} us ({b / a:.2f}x)")
    cipher = control.ControlCipher(KEY)
    c = _median_s(lambda: cipher.seal(control.RUMBLE, bytes(10)), args.repeat, 400)
    print(f"control message seal: {c * 1e6:.1f} us")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
