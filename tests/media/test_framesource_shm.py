"""media.framesource.DisplayCapture on a real Xvfb: after mss has proven XShm, each grab is a
view of its shared segment (no 8 MB copy per 1080p frame) that shows exactly what
mss's own copying grab shows, and the capture still closes cleanly."""

from __future__ import annotations

import mss
import numpy as np
from Xlib import X
from Xlib import display as xdisplay

from media import framesource
from media.framesource import DisplayCapture


def paint(name: str, rgb: tuple[int, int, int], box: tuple[int, int, int, int]) -> None:
    d = xdisplay.Display(name)
    root = d.screen().root
    gc = root.create_gc(foreground=(rgb[0] << 16) | (rgb[1] << 8) | rgb[2],
                        subwindow_mode=X.IncludeInferiors)  # fmt: skip
    root.fill_rectangle(gc, *box)
    d.sync()
    d.close()


def test_grabs_are_views_of_the_shared_segment_and_match_mss(xvfb):
    cap = DisplayCapture(xvfb)
    try:
        first = cap(1280, 720)  # mss's own grab: proves XShm on this server
        assert first.shape == (720, 1280, 4)
        paint(xvfb, (200, 30, 90), (100, 50, 300, 200))
        frame = cap(1280, 720)
        # A view of mss's mapping, not a fresh buffer: nothing was copied.
        assert not frame.flags.owndata and not frame.flags.writeable
        assert framesource._shm_view(cap._sct, cap._monitor) is not None
        with mss.MSS(display=xvfb) as sct:
            shot = sct.grab(sct.monitors[1])
            want = np.frombuffer(shot.raw, np.uint8).reshape(720, 1280, 4)
        assert np.array_equal(frame[..., :3], want[..., :3])
        assert tuple(frame[150, 200, :3]) == (90, 30, 200)  # BGRA
        # The next grab shows the new picture (the view is only good until then).
        paint(xvfb, (10, 220, 40), (100, 50, 300, 200))
        assert tuple(cap(1280, 720)[150, 200, :3]) == (40, 220, 10)
        # A smaller client mode is scaled from the view.
        assert cap(640, 360).shape == (360, 640, 4)
    finally:
        cap.close()
    assert cap._sct is None and cap._last is None
