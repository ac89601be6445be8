"""A native Wayland test app built on media.wayland: an xdg-shell toplevel that paints four
known colour quadrants at whatever size the compositor configures, and records the keyboard
and pointer events it receives. Runs its event loop in a thread."""

from __future__ import annotations

import mmap
import os
import threading
import time

import numpy as np

from media.wayland.client import Display, ShmPool, WaylandError
from media.wayland.protocols import SHM_XRGB8888

# quadrants: top-left, top-right, bottom-left, bottom-right, as (R, G, B)
QUADRANTS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]


class WaylandApp:
    def __init__(
        self,
        socket_path: str,
        title: str = "wl-test-app",
        fullscreen: bool = False,
        colours: list[tuple[int, int, int]] | None = None,
        flip_hz: float = 0.0,
    ):
        """`fullscreen`: ask for the whole output before the first frame (mutter configures a
        plain toplevel at the size the client picks, sway tiles it to the output). `colours`:
        the four quadrants (RGB), QUADRANTS unless given; `flip_hz`: swap them with their
        inverse that many times a second (a screen that changes every frame). Measured
        on mutter 43 with several monitors: that goes to the primary monitor, while a mapped
        window asking later (`go_fullscreen`) stays on the monitor it opened on."""
        self.d = Display(socket_path)
        self.compositor = self.d.bind("wl_compositor", 4)
        self.shm = self.d.bind("wl_shm", 1)
        self.wm = self.d.bind("xdg_wm_base", 2)
        self.seat = self.d.bind("wl_seat", 5)
        self.wm.on("ping", lambda serial: self.wm.request("pong", serial))
        self.events: list[tuple] = []
        self.colours = colours or QUADRANTS
        self.flip_hz = flip_hz
        self.size = (0, 0)
        self.painted = threading.Event()
        self.error: Exception | None = None
        self._pending_size = (640, 480)
        self._pool: ShmPool | None = None
        self.surface = self.d.wl_display and self.compositor.request("create_surface")
        self.xdg = self.wm.request("get_xdg_surface", self.surface)
        self.top = self.xdg.request("get_toplevel")
        self.top.request("set_title", title)
        self.top.request("set_app_id", title)
        self.top.on("configure", self._on_top_configure)
        self.xdg.on("configure", self._on_configure)
        self._fullscreen_later = False
        if fullscreen:
            self.top.request("set_fullscreen", None)
        self.surface.request("commit")
        self.keyboard = self.pointer = None
        self.keymaps = 0
        self.keymap = ""
        self.seat.on("capabilities", self._on_caps)
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _on_caps(self, caps: int) -> None:
        # the seat has a keyboard / pointer only once a (virtual) device exists; one that goes
        # away (headless mutter: a remote-desktop session ends) leaves an inert object, so a
        # device that comes back is bound again, as toolkits do
        if not caps & 2 and self.keyboard is not None:
            self.keyboard.request("release")
            self.keyboard = None
        if not caps & 1 and self.pointer is not None:
            self.pointer.request("release")
            self.pointer = None
        if caps & 2 and self.keyboard is None:
            kb = self.keyboard = self.seat.request("get_keyboard", version=self.seat.version)
            kb.on("key", lambda _s, _t, key, state: self.events.append(("key", key, state)))
            kb.on("keymap", self._on_keymap)
            kb.on("enter", lambda *_a: self.events.append(("kbd_enter",)))
        if caps & 1 and self.pointer is None:
            p = self.pointer = self.seat.request("get_pointer", version=self.seat.version)
            p.on("enter", lambda _s, _o, x, y: self.events.append(("enter", x, y)))
            p.on("motion", lambda _t, x, y: self.events.append(("motion", x, y)))
            p.on("button", lambda _s, _t, b, st: self.events.append(("button", b, st)))
            p.on("axis", lambda _t, axis, v: self.events.append(("axis", axis, v)))

    def _on_keymap(self, _fmt: int, fd: int, size: int) -> None:
        try:
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m:
                self.keymap = bytes(m).rstrip(b"\0").decode(errors="replace")
        finally:
            os.close(fd)
        self.keymaps += 1

    def _on_top_configure(self, w: int, h: int, _states: bytes) -> None:
        if w > 0 and h > 0:
            self._pending_size = (w, h)

    def _on_configure(self, serial: int) -> None:
        self.xdg.request("ack_configure", serial)
        w, h = self._pending_size
        if self._pool is None or (self._pool.width, self._pool.height) != (w, h):
            if self._pool is not None:
                self._pool.destroy()
            self._pool = ShmPool(self.shm, w, h, w * 4, SHM_XRGB8888)
        self._paint(self.colours)
        self.size = (w, h)
        self.painted.set()

    def _paint(self, colours) -> None:
        w, h = self._pool.width, self._pool.height
        px = np.frombuffer(self._pool.map, np.uint8).reshape(h, w, 4)
        for i, (r, g, b) in enumerate(colours):
            ys = slice(0, h // 2) if i < 2 else slice(h // 2, h)
            xs = slice(0, w // 2) if i % 2 == 0 else slice(w // 2, w)
            px[ys, xs] = (b, g, r, 255)
        del px
        self.surface.request("attach", self._pool.buffer, 0, 0)
        self.surface.request("damage", 0, 0, w, h)
        self.surface.request("commit")

    def go_fullscreen(self) -> None:
        """Ask for fullscreen now, from the event thread (a game's switch after start)."""
        self._fullscreen_later = True

    def _loop(self) -> None:
        try:
            flips, t0 = 0, time.monotonic()
            while not self._stop:
                self.d.dispatch(0.002 if self.flip_hz else 0.05)
                if self.flip_hz and self._pool is not None:
                    due = int((time.monotonic() - t0) * self.flip_hz)
                    if due > flips:
                        flips = due
                        inverse = [(255 - r, 255 - g, 255 - b) for r, g, b in self.colours]
                        self._paint(inverse if flips % 2 else self.colours)
                if self._fullscreen_later:
                    self._fullscreen_later = False
                    self.top.request("set_fullscreen", None)
                    self.surface.request("commit")
        except WaylandError as e:
            if not self._stop:
                self.error = e

    def wait(self, predicate, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.error:
                raise self.error
            time.sleep(0.02)
        return predicate()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        self.d.close()


def main() -> None:
    """`wl_app.py LOG [RRGGBB]`: run as a session's app on $WAYLAND_DISPLAY (one solid
    colour when given, else the quadrants; swapping them with their inverse WL_APP_FLIP_HZ times
    a second when that is set). It opens a plain window,
    goes fullscreen once mapped (as a game does) and appends what it receives to LOG as JSON
    lines, until terminated."""
    import json
    import signal
    import sys

    path = os.path.join(os.environ["XDG_RUNTIME_DIR"], os.environ["WAYLAND_DISPLAY"])
    solid = None
    if len(sys.argv) > 2:
        solid = [tuple(int(sys.argv[2][i : i + 2], 16) for i in (0, 2, 4))] * 4
    flip = float(os.environ.get("WL_APP_FLIP_HZ") or 0)
    app = WaylandApp(path, title="wl-quadrants", colours=solid, flip_hz=flip)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    written, size = 0, None
    with open(sys.argv[1], "a") as log:
        try:
            app.wait(lambda: app.size != (0, 0), 20)
            time.sleep(0.3)  # mapped and placed on the pointer's monitor
            app.go_fullscreen()
            while app.error is None:
                for kind, *args in app.events[written:]:
                    log.write(json.dumps({"kind": kind, "args": args}) + "\n")
                    written += 1
                if app.size != size:
                    size = app.size
                    log.write(json.dumps({"kind": "size", "args": list(size)}) + "\n")
                log.flush()
                time.sleep(0.2)
        finally:
            app.close()


if __name__ == "__main__":
    main()
