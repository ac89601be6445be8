"""Capture one output of a wlroots compositor with wlr-screencopy into shared memory.

Each frame is a fresh zwlr_screencopy_frame_v1 (the protocol's frames are one-shot), copied
into one of two wl_shm buffers that are kept and reused while the output's size and format stay
the same (two, so the next frame can be copied while the caller still reads the last).
The result is an H x W x 4 uint8 array in the compositor's byte order: B, G, R, X for the
XRGB/ARGB formats wlroots' pixman renderer uses (what mss gives for X11, so the encoder path
is the same); XBGR/ABGR buffers are swapped to that order.
"""

from __future__ import annotations

import time

import numpy as np

from common.samples import Samples
from media.wayland.client import Display, MissingGlobal, OutputInfo, ShmPool, WaylandError
from media.wayland.protocols import (
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


class _Frame:
    """One zwlr_screencopy_frame_v1 in flight, copying into pools[index]."""

    def __init__(self, owner: ScreenCopy, index: int):
        self.owner, self.index = owner, index
        self.buffers: list[tuple[int, int, int, int]] = []
        self.flags = 0
        self.result: str | None = None  # "ready", "failed", or an error message
        self.copied = False
        self.proxy = owner.manager.request(
            "capture_output", int(owner.overlay_cursor), owner.output.proxy
        )
        self.proxy.on("buffer", lambda f, w, h, st: self._on_buffer(f, w, h, st))
        self.proxy.on("buffer_done", self._copy)
        self.proxy.on("flags", lambda f: setattr(self, "flags", f))
        self.proxy.on("ready", lambda *_t: setattr(self, "result", "ready"))
        self.proxy.on("failed", lambda: setattr(self, "result", "failed"))

    def _on_buffer(self, fmt: int, w: int, h: int, stride: int) -> None:
        self.buffers.append((fmt, w, h, stride))
        if self.proxy.version < 3:  # no buffer_done before version 3: one buffer event
            self._copy()

    def _copy(self) -> None:
        if self.copied or self.result:
            return
        shm = [b for b in self.buffers if b[0] in _SUPPORTED]
        if not shm:
            offered = [hex(b[0]) for b in self.buffers]
            self.result = f"output offers no shared-memory format we read (offered: {offered})"
            return
        fmt, w, h, stride = shm[0]
        pools = self.owner._pools
        pool = pools[self.index]
        if pool is None or not pool.matches(w, h, stride, fmt):
            if pool is not None:
                pool.destroy()
            pool = pools[self.index] = ShmPool(self.owner.shm, w, h, stride, fmt)
        self.proxy.request("copy", pool.buffer)
        self.copied = True

    def destroy(self) -> None:
        d = self.proxy.display
        if self.proxy.alive and not d.closed and d.error is None:
            self.proxy.request("destroy")


class ScreenCopy:
    """`ScreenCopy(wayland_display, output_name)`; `grab()` returns one frame.

    `wayland_display` is a socket name under $XDG_RUNTIME_DIR or an absolute socket path;
    `output_name` is the compositor's output name (HEADLESS-1, DP-1...), or None when there is
    exactly one output. Raises CaptureUnavailable when the compositor has no screencopy,
    NoSuchOutput (a WaylandError) when the output does not exist, WaylandConnectError when no
    compositor answers. Use from one thread.

    The compositor copies a frame at the output's next repaint, so a grab blocks until then
    (idle time, up to one refresh: a 60/s caller on a 60 Hz output is paced by it). With
    `prefetch`, the next frame is requested into the second buffer as soon as one is returned,
    so a caller that comes back later than a refresh finds it ready, at the price of a frame
    up to the caller's own delay old; off by default (the freshest frame is worth the wait).
    """

    def __init__(
        self,
        wayland_display: str | None,
        output_name: str | None = None,
        *,
        runtime_dir: str | None = None,
        overlay_cursor: bool = False,
        prefetch: bool = False,
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
        self.prefetch = prefetch
        self.timeout = timeout
        self._pools: list[ShmPool | None] = [None, None]
        self._pending: _Frame | None = None
        self._last_index = 1
        self.capture_ms = Samples()

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the output's current mode, as last announced."""
        return self.output.width, self.output.height

    def grab(self, copy: bool = True) -> np.ndarray:
        """One frame as H x W x 4 (B, G, R, X). With copy=False the array is a view of the
        shared buffer, valid until the next grab (saves a copy of the frame)."""
        t0 = time.perf_counter()
        frame = self._pending or _Frame(self, 1 - self._last_index)
        self._pending = None
        try:
            self.display.wait_for(lambda: frame.result is not None, self.timeout, "a frame")
        except BaseException:
            frame.destroy()
            raise
        frame.destroy()
        if frame.result == "failed":
            raise CaptureFailed(f"the compositor could not capture output {self.output_name}")
        if frame.result != "ready":
            raise CaptureUnavailable(f"{self.output_name}: {frame.result}")
        self._last_index = frame.index
        if self.prefetch:
            # `copy` is what books the frame at the compositor's next repaint, and it can only
            # follow the compositor's buffer events: wait for them (one round trip) and send it
            # now. Left to the next grab, the frame would be booked no earlier than without
            # prefetch.
            nxt = self._pending = _Frame(self, 1 - frame.index)
            self.display.wait_for(lambda: nxt.copied or nxt.result is not None, self.timeout,
                                  "the next frame's buffer")  # fmt: skip
            self.display.flush()
        pool = self._pools[frame.index]
        rows = np.frombuffer(pool.map, np.uint8).reshape(pool.height, pool.stride)
        img = rows[:, : pool.width * 4].reshape(pool.height, pool.width, 4)
        if frame.flags & SCREENCOPY_Y_INVERT:
            img = img[::-1]
        if pool.format in (SHM_ABGR8888, SHM_XBGR8888):
            img = img[:, :, [2, 1, 0, 3]]  # R,G,B,X in memory -> B,G,R,X (a copy)
        elif copy:
            img = img.copy()
        self.output.width, self.output.height = pool.width, pool.height
        self.capture_ms.append((time.perf_counter() - t0) * 1000)
        return img

    def close(self) -> None:
        if not self.display.closed:
            try:
                if self._pending is not None:
                    self._pending.destroy()
                for pool in self._pools:
                    if pool is not None:
                        pool.destroy()
                self.display.flush()
            except WaylandError:
                pass
        self._pending = None
        self._pools = [None, None]
        self.display.close()

    def __enter__(self) -> ScreenCopy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
