"""A catalog app for the concurrent-session tests: fills its X display with one colour, plays
one sine tone into its default PulseAudio sink, and logs every key it receives.

    colour_app.py RRGGBB FREQ_HZ KEY_LOG

It dies with its X server (as Xlib programs do): a session whose display goes away must not
leave it, or its sound thread, behind for the next test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
from Xlib import XK, X, display

RATE, BLOCK = 48_000, 480
AHEAD_S = 0.1


def tone(freq: float, stop: threading.Event) -> None:
    """The sine, in real time, 10 ms at a time (a null sink renders on the system clock),
    kept 100 ms ahead as a game's audio buffer is: with 10 ms of slack, a loaded CI box
    starved the sink now and then, and the gap smeared the tone the tests listen for."""
    pacat = subprocess.Popen(["pacat", "--playback", "--raw", f"--rate={RATE}", "--channels=2",
                              "--format=s16le", "--latency-msec=100"],
                             stdin=subprocess.PIPE)  # fmt: skip
    n, next_at = 0, time.monotonic() - AHEAD_S
    try:
        while not stop.is_set() and pacat.poll() is None:
            t = (np.arange(BLOCK) + n) / RATE
            x = (0.25 * np.sin(2 * np.pi * freq * t) * 32767).astype(np.int16)
            pacat.stdin.write(np.stack([x, x], 1).tobytes())
            pacat.stdin.flush()
            n += BLOCK
            next_at += BLOCK / RATE
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    except OSError:
        pass
    finally:
        pacat.kill()
        pacat.wait()


def main() -> None:
    rgb, freq, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    r, g, b = (int(rgb[i : i + 2], 16) for i in (0, 2, 4))
    d = display.Display()
    screen = d.screen()
    win = screen.root.create_window(
        0, 0, screen.width_in_pixels, screen.height_in_pixels, 0, screen.root_depth,
        background_pixel=(r << 16) | (g << 8) | b, override_redirect=True,
        event_mask=X.KeyPressMask,
    )  # fmt: skip
    win.map()
    win.set_input_focus(X.RevertToParent, X.CurrentTime)
    d.sync()
    stop = threading.Event()
    sound = threading.Thread(target=tone, args=(freq, stop), daemon=True)
    sound.start()
    try:
        with open(log, "a") as out:
            while True:
                ev = d.next_event()  # raises once the X server is gone
                if ev.type == X.KeyPress:
                    sym = d.keycode_to_keysym(ev.detail, 0)
                    out.write(f"{XK.keysym_to_string(sym)}\n")
                    out.flush()
    finally:
        stop.set()
        sound.join(1)
        os._exit(0)


if __name__ == "__main__":
    main()
