"""A catalog app for the playable tests: plays into its default PulseAudio sink.

Started by the session like any title (its env carries PULSE_SINK / PULSE_SERVER). It writes
silence through `pacat` in real time, 10 ms at a time, until the test drops `play` (JSON
`{"freq", "amp", "seconds"}`) into the marks folder; then it plays that sine and writes
`tone.json` with `t_on`, the monotonic time its first tone block was written (the same clock
as the client's `receive_time_us`, so the test can measure capture-to-client latency).

    tone_app.py MARKS_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RATE, BLOCK = 48_000, 480


def main() -> None:
    marks = Path(sys.argv[1])
    pacat = subprocess.Popen(
        [
            "pacat",
            "--playback",
            "--raw",
            f"--rate={RATE}",
            "--channels=2",
            "--format=s16le",
            "--latency-msec=10",
        ],
        stdin=subprocess.PIPE,
    )
    silence = np.zeros((BLOCK, 2), np.int16).tobytes()
    tone: bytes | None = None
    pos = 0
    next_at = time.monotonic()
    while pacat.poll() is None:
        if tone is None and (marks / "play").exists():
            spec = json.loads((marks / "play").read_text())
            (marks / "play").unlink()
            t = np.arange(int(spec["seconds"] * RATE)) / RATE
            x = spec["amp"] * np.sin(2 * np.pi * spec["freq"] * t)
            tone = (np.stack([x, x], 1) * 32767).round().astype(np.int16).tobytes()
            pos = 0
            (marks / "tone.json").write_text(json.dumps({"t_on": time.monotonic(), **spec}))
        if tone is not None and pos < len(tone):
            chunk, pos = tone[pos : pos + BLOCK * 4], pos + BLOCK * 4
            chunk += silence[: BLOCK * 4 - len(chunk)]
        else:
            chunk = silence
        pacat.stdin.write(chunk)
        pacat.stdin.flush()
        next_at += BLOCK / RATE
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)


if __name__ == "__main__":
    main()
