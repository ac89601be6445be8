"""Capture one output of a wlroots compositor with wlr-screencopy into shared memory.

Each frame is a fresh zwlr_screencopy_frame_v1 (the protocol's frames are one-shot), copied
into a wl_shm buffer that is kept and reused while the output's size and format stay the same.
The result is an H x W x 4 uint8 array in the compositor's byte order: B, G, R, X for the
XRGB/ARGB formats wlroots' pixman renderer uses (what mss gives for X11, so the encoder path
is the same); XBGR/ABGR buffers are swapped to that order.
"""

from __future__ import annotations

import time

import numpy as np

from streaming.wayland.client import Display, MissingGlobal, OutputInfo, ShmPool, WaylandError
from streaming.wayland.protocols import (
    SCREENCOPY_Y_INVERT,
    SHM_ABGR8888,
    SHM_ARGB8888,
    SHM_XBGR8888,
    SHM_XRGB8888,
)

_SUPPORTED = {SHM_ARGB8888, SHM_XRGB8888, SHM_ABGR8888, SHM_XBGR8888}


class CaptureUnavailable(WaylandError):
    """This compositor or output cannot be captured with wlr-screencopy."""


class CaptureFailed(WaylandError):
    """The compositor answered a frame with `failed` (the output went away, for example)."""


class ScreenCopy:
    """`ScreenCopy(wayland_display, output_name)`; `grab()` returns one frame.

    `wayland_display` is a socket name under $XDG_RUNTIME_DIR or an absolute socket path;
    `output_name` is the compositor's output name (HEADLESS-1, DP-1...), or None when there is
    exactly one output. Raises CaptureUnavailable when the compositor has no screencopy,
    NoSuchOutput (a WaylandError) when the output does not exist, WaylandConnectError when no
    compositor answers. Use from one thread."""

    def __init__(
        self,
        wayland_display: str | None,
        output_name: str | None = None,
        *,
        runtime_dir: str | None = None,
        overlay_cursor: bool = False,
        timeout: float = 5.0,
    ):
        self.display = Display(wayland_display, runtime_dir=runtime_dir, timeout=timeout)
        try:
            try:
                self.manager = self.display.bind("zwlr_screencopy_manager_v1", 3)
            except MissingGlobal as e:
                raise CaptureUnavailable(
                    f"the compositor at {self.display.path} has no wlr-screencopy "
                    "(zwlr_screencopy_manager_v1); it is not a wlroots compositor"
                ) from e
            self.shm = self.display.bind("wl_shm", 1)
            self.output: OutputInfo = self.display.output(output_name)
        except BaseException:
            self.display.close()
            raise
        self.output_name = self.output.name
        self.overlay_cursor = overlay_cursor
        self.timeout = timeout
        self._pool: ShmPool | None = None
        self.capture_ms: list[float] = []

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the output's current mode, as last announced."""
        return self.output.width, self.output.height

    def grab(self, copy: bool = True) -> np.ndarray:
        """One frame as H x W x 4 (B, G, R, X). With copy=False the array is a view of the
        shared buffer, valid until the next grab (saves a copy of the frame)."""
        t0 = time.perf_counter()
        d = self.display
        state: dict = {"buffers": [], "done": False, "flags": 0, "result": None}
        frame = self.manager.request("capture_output", int(self.overlay_cursor), self.output.proxy)
        frame.on("buffer", lambda f, w, h, s: state["buffers"].append((f, w, h, s)))
        frame.on("buffer_done", lambda: state.update(done=True))
        frame.on("flags", lambda f: state.update(flags=f))
        frame.on("ready", lambda *_t: state.update(result="ready"))
        frame.on("failed", lambda: state.update(result="failed"))
        try:
            if frame.version >= 3:
                d.wait_for(lambda: state["done"] or state["result"], self.timeout, "frame info")
            else:
                d.wait_for(lambda: state["buffers"] or state["result"], self.timeout, "frame info")
            if state["result"] == "failed":
                raise CaptureFailed(f"the compositor could not capture output {self.output_name}")
            shm = [b for b in state["buffers"] if b[0] in _SUPPORTED]
            if not shm:
                raise CaptureUnavailable(
                    f"output {self.output_name} offers no shared-memory format we read "
                    f"(offered: {[hex(b[0]) for b in state['buffers']]})"
                )
            fmt, w, h, stride = shm[0]
            if self._pool is None or not self._pool.matches(w, h, stride, fmt):
                if self._pool is not None:
                    self._pool.destroy()
                self._pool = ShmPool(self.shm, w, h, stride, fmt)
            frame.request("copy", self._pool.buffer)
            d.wait_for(lambda: state["result"] is not None, self.timeout, "the frame copy")
            if state["result"] == "failed":
                raise CaptureFailed(f"the compositor could not capture output {self.output_name}")
        finally:
            if frame.alive and not d.closed and d.error is None:
                frame.request("destroy")
        pool = self._pool
        rows = np.frombuffer(pool.map, np.uint8).reshape(pool.height, pool.stride)
        img = rows[:, : pool.width * 4].reshape(pool.height, pool.width, 4)
        if state["flags"] & SCREENCOPY_Y_INVERT:
            img = img[::-1]
        if fmt in (SHM_ABGR8888, SHM_XBGR8888):
            img = img[:, :, [2, 1, 0, 3]]  # R,G,B,X in memory -> B,G,R,X (a copy)
        elif copy:
            img = img.copy()
        self.output.width, self.output.height = pool.width, pool.height
        self.capture_ms.append((time.perf_counter() - t0) * 1000)
        return img

    def close(self) -> None:
        if self._pool is not None and not self.display.closed:
            try:
                self._pool.destroy()
                self.display.flush()
            except WaylandError:
                pass
        self._pool = None
        self.display.close()

    def __enter__(self) -> ScreenCopy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
