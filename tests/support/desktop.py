"""A test-owned "operator desktop": an X server the host did not start (no HOST_DISPLAY_OWNER
in its environment), with solid windows of known colours drawn at known positions.

The host attaches to it (capture `x11`); the test checks that what the client decodes is this
desktop, that input lands in it, and that the server outlives every session.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
import time

# Desktop geometry (not the client's 1280x720: the host must scale) and its windows, in
# desktop pixels. Colours are RGB; the client decodes BGR.
WIDTH, HEIGHT = 1600, 900
BACKGROUND_RGB = (150, 30, 90)
GREEN_BOX = (400, 225, 400, 225)  # x, y, w, h
GREEN_RGB = (40, 200, 60)
BLUE_BOX = (1200, 675, 400, 225)
BLUE_RGB = (40, 40, 230)


class OperatorDesktop:
    def __init__(self, width: int = WIDTH, height: int = HEIGHT):
        exe = shutil.which("Xvfb")
        if exe is None:
            raise RuntimeError("needs Xvfb (scripts/system-deps.sh)")
        read_fd, write_fd = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
        self.proc = subprocess.Popen(
            [exe, "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp", "-noreset",
             "-displayfd", str(write_fd)],
            pass_fds=(write_fd,), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        os.close(write_fd)
        buf = b""
        deadline = time.monotonic() + 20
        while not buf.endswith(b"\n") and time.monotonic() < deadline:
            if select.select([read_fd], [], [], 1.0)[0]:
                chunk = os.read(read_fd, 32)
                if not chunk:
                    break
                buf += chunk
        os.close(read_fd)
        if not buf.strip().isdigit():
            self.proc.kill()
            raise RuntimeError("the operator desktop's Xvfb did not start")
        self.name = f":{buf.decode().strip()}"
        self.width, self.height = width, height
        self._d = None
        self.events: list[tuple] = []
        self._reader: threading.Thread | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def draw(self) -> None:
        """A full-screen background window and two boxes, all recording input events."""
        from Xlib import X
        from Xlib import display as xdisplay

        d = self._d = xdisplay.Display(self.name)
        screen = d.screen()
        mask = (X.KeyPressMask | X.KeyReleaseMask | X.ButtonPressMask | X.ButtonReleaseMask
                | X.PointerMotionMask)  # fmt: skip

        def window(x, y, w, h, rgb):
            r, g, b = rgb
            win = screen.root.create_window(x, y, w, h, 0, screen.root_depth,
                                            background_pixel=(r << 16) | (g << 8) | b,
                                            override_redirect=True, event_mask=mask)  # fmt: skip
            win.map()
            return win

        self.background = window(0, 0, self.width, self.height, BACKGROUND_RGB)
        self.green = window(*GREEN_BOX, GREEN_RGB)
        self.blue = window(*BLUE_BOX, BLUE_RGB)
        d.sync()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        from Xlib import X

        d = self._d
        while d is not None and self.alive():
            try:
                ev = d.next_event()
            except Exception:  # the connection closed at the end of the test
                return
            if ev.type in (X.KeyPress, X.KeyRelease, X.ButtonPress, X.ButtonRelease):
                self.events.append((ev.type, ev.detail, ev.root_x, ev.root_y))
            elif ev.type == X.MotionNotify:
                self.events.append((ev.type, 0, ev.root_x, ev.root_y))

    def keycode(self, char: str) -> int:
        from Xlib import XK

        return self._d.keysym_to_keycode(XK.string_to_keysym(char))

    def stop(self) -> None:
        if self._d is not None:
            try:
                self._d.close()
            except Exception:
                pass
            self._d = None
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def dead_display() -> str:
    """A local display name with no server behind it."""
    n = 90
    while os.path.exists(f"/tmp/.X11-unix/X{n}") or os.path.exists(f"/tmp/.X{n}-lock"):
        n += 1
    return f":{n}"
