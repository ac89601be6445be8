"""The session's frame source: the session's X display (a private Xvfb, or the operator's
desktop when capture is attached), grabbed with mss (XShm) once per frame and scaled to the
client's mode when the two differ.

StreamSession calls it from its video thread with the negotiated size; the mss handle is
opened there on first use (an X connection belongs to the thread that uses it). Capture times
are kept for `/api/stream/latency` and the history record. A grab that fails (the X server
died under us) repeats the last frame and counts the failure rather than killing the video
thread, so the session still ends through its normal path: the session's watch loop ends it
(`display_lost`) once every grab has failed for LOST_AFTER_S.
"""

from __future__ import annotations

import logging
import os
import time

import mss
import numpy as np

from common.samples import Samples
from media.kwin.screencast import KWinScreenCast
from media.mutter.frames import PipeWireFrames
from media.mutter.screencast import ScreenCast
from media.portal.screencast import (
    CONSENT_TIMEOUT_S,
    PortalRefused,
    PortalScreenCast,
    save_state,
)
from media.wayland.screencopy import ScreenCopy

log = logging.getLogger("streaming.sessions")

LOST_AFTER_S = 3.0  # every grab failing this long: the display is gone (the session ends)


def _shm_view(sct, monitor: dict) -> np.ndarray | None:
    """XShmGetImage into mss's shared segment, and the picture as a read-only view of it: no
    copy (mss copies each 1080p grab into a new bytearray: 8 MB, ~2 ms of CPU a frame, issue
    23). The view holds until the next grab overwrites it, which suits every caller: the
    engine and the native encoder convert each frame before they grab the next. None when mss
    is not on its working XShm path (another backend, SHM not yet proven or unavailable, an
    mss without these internals): the caller grabs the usual way then, which also lets mss
    probe and fall back as it does."""
    impl = getattr(sct, "_impl", None)
    buf = getattr(impl, "_buf", None)
    try:
        from mss.linux import xcb  # optional: mss internals, absent from another mss
        from mss.linux.xshmgetimage import ShmStatus  # optional: as above
    except ImportError:
        return None
    if buf is None or getattr(impl, "shm_status", None) != ShmStatus.AVAILABLE:
        return None
    width, height = monitor["width"], monitor["height"]
    if width * height * 4 > impl._bufsize:
        return None
    reply = xcb.shm_get_image(impl.conn, impl.drawable, monitor["left"], monitor["top"],
                              width, height, _ALL_PLANES, xcb.ImageFormat.ZPixmap,
                              impl._shmseg, 0)  # fmt: skip
    if reply.depth != impl.drawable_depth or reply.visual != impl.drawable_visual_id:
        return None  # mss's own grab reports this one
    return np.frombuffer(buf, np.uint8, count=width * height * 4).reshape(height, width, 4)


_ALL_PLANES = 0xFFFFFFFF


class _FrameSource:
    """What every frame source does around its grab: time it, give the client's size, and on
    a failure repeat the last frame, count the failure and time the run of them for `lost`.
    A source supplies `what`, `_grab(width, height)` and, when it reopens after a failure,
    `_drop()`."""

    what = ""

    def _start_counting(self) -> None:
        self.capture_ms = Samples()
        self.failures = 0
        self.failing_since: float | None = None  # first failure of the current run of them
        self._last: np.ndarray | None = None

    def _grab(self, width: int, height: int) -> np.ndarray:
        raise NotImplementedError

    def _drop(self) -> None:
        """Forget the connection after a failure, so the next grab opens it again."""

    def __call__(self, width: int, height: int) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            frame = self._grab(width, height)
            if frame.shape[0] != height or frame.shape[1] != width:
                # heavy: OpenCV only for another size than the client's (an attached
                # desktop, or /launch)
                import cv2

                # LINEAR, not AREA: 1920x1080 -> 1280x720 took 16 ms (p50) with AREA on this
                # 2-core box, a whole 60 fps frame; LINEAR 3.3 ms.
                frame = cv2.resize(frame, (width, height), interpolation=cv2.INTER_LINEAR)
            self.failing_since = None
        except Exception as exc:  # see module docstring
            self._drop()
            if self.failing_since is None:
                self.failing_since = time.monotonic()
            self.failures += 1
            if self.failures == 1:
                log.warning("capture of %s failed: %s", self.what, exc)
            frame = self._last if self._last is not None else np.zeros((height, width, 4), np.uint8)
        self.capture_ms.append((time.perf_counter() - t0) * 1000)
        self._last = frame
        return frame

    def lost(self, after_s: float = LOST_AFTER_S) -> bool:
        """True when every grab has failed for `after_s`: the display is gone (an operator's
        desktop logged out, a killed Xvfb or compositor); the session ends instead of
        repeating a frame."""
        since = self.failing_since
        return since is not None and time.monotonic() - since >= after_s


class DisplayCapture(_FrameSource):
    def __init__(self, x_display: str, region: dict | None = None):
        """`region` ({left, top, width, height}): one monitor of an attached desktop; None
        grabs the display's first monitor (the whole screen of a private Xvfb)."""
        self.x_display = x_display
        self.what = f"X display {x_display}"
        self.region = dict(region) if region else None
        self._start_counting()
        self._sct = None
        self._monitor = None

    def _grab(self, width: int, height: int) -> np.ndarray:
        # No reopen after a failure: the mss handle outlives a failed grab of a live server.
        if self._sct is None:
            self._sct = mss.MSS(display=self.x_display)
            self._monitor = self.region or self._sct.monitors[1]
        frame = _shm_view(self._sct, self._monitor)
        if frame is None:
            shot = self._sct.grab(self._monitor)
            frame = np.frombuffer(shot.raw, np.uint8).reshape(shot.height, shot.width, 4)
        return frame

    def close(self) -> None:
        self._last = None  # may be a view of mss's shared memory, which close unmaps
        if self._sct is not None:
            try:
                self._sct.close()
            except Exception:  # the server may be gone already
                pass
            self._sct = None


class WaylandCapture(_FrameSource):
    """The same frame source over one output of a wlroots compositor (wlr-screencopy): the
    operator's (capture `wlr`) or an output of the host's headless sway. Opened in the video
    thread on first use (a Wayland connection is used from one thread); reopened after a
    failure, so a grab that fails for LOST_AFTER_S means the compositor or output is gone."""

    def __init__(self, wayland_socket: str, output: str | None):
        self.wayland_socket, self.output = wayland_socket, output
        self.x_display = ""  # the X path's name, kept for callers that read it
        self.what = f"output {output} of the compositor at {wayland_socket}"
        self._start_counting()
        self._cap = None

    def _grab(self, width: int, height: int) -> np.ndarray:
        if self._cap is None:
            self._cap = ScreenCopy(
                self.wayland_socket, self.output, timeout=2.0, prefetch=True
            )  # see docs/host-state.md
        return self._cap.grab()  # a copy: the shared buffer is reused by the next grab

    def _drop(self) -> None:
        if self._cap is not None:
            try:
                self._cap.close()
            except Exception:  # the compositor may be gone already
                pass
            self._cap = None

    def close(self) -> None:
        self._drop()


class _PipeWireCapture(_FrameSource):
    """A frame source read from a PipeWire stream a desktop casts: `_open` makes `_cast` (the
    cast session: `ended()`, `close()`) and `_frames` (its media/mutter/frames.py reader) at
    the first grab's size. Desktops send frames on damage only, so a grab returns the newest
    frame at once: a static screen still feeds the encoder at the stream's rate."""

    _cast = None
    _frames = None

    @property
    def frames_received(self) -> int:
        """Frames the current stream has delivered (the damage rate, not the grab rate)."""
        return self._frames.frames if self._frames is not None else 0

    @property
    def node_id(self) -> int | None:
        return self._cast.node_id if self._cast is not None else None

    def _open(self, width: int, height: int) -> None:
        raise NotImplementedError

    def _grab(self, width: int, height: int) -> np.ndarray:
        # Opened at this call's size; a later size change is resized by __call__.
        if self._cast is None:
            self._open(width, height)
        ended = self._cast.ended()
        if ended:
            raise RuntimeError(ended)
        return self._frames.latest(self.first_frame_timeout)

    def _drop(self) -> None:
        frames, self._frames = self._frames, None
        cast, self._cast = self._cast, None
        if frames is not None:
            frames.close()
        if cast is not None:
            cast.close()

    def close(self) -> None:
        self._drop()


class MutterCapture(_PipeWireCapture):
    """The same frame source over a GNOME (mutter) monitor: a ScreenCast session on the desktop
    user's session bus and its PipeWire stream read through gst-launch (media/mutter/).
    `connector` names the monitor (DisplayConfig's connector, e.g. "Meta-0", "DP-1"); None
    asks mutter for a new virtual monitor of the client's size (RecordVirtual), which exists
    as long as this source. Opened in the video thread on first use, at that call's size
    (pipewiresrc's videoscale then gives every frame the client's size); reopened after a
    failure like WaylandCapture. Mutter sends frames on damage only, so a grab returns the
    newest frame at once: a static screen still feeds the encoder at the stream's rate.

    `bus_address` and `env` (the gst-launch environment: it needs the user's XDG_RUNTIME_DIR
    for PipeWire) default to this process's own, which suits a host running in the user's
    GNOME session; a host serving another user's desktop passes that user's."""

    def __init__(
        self,
        connector: str | None = "Meta-0",
        *,
        bus_address: str | None = None,
        env: dict | None = None,
        first_frame_timeout: float = 2.0,
    ):
        self.connector, self.bus_address, self.env = connector, bus_address, env
        self.first_frame_timeout = first_frame_timeout
        self.x_display = ""  # the X path's name, kept for callers that read it
        where = f"monitor {connector}" if connector else "a virtual monitor"
        self.what = f"{where} of mutter's ScreenCast"
        self._start_counting()

    def _open(self, width: int, height: int) -> None:
        self._cast = ScreenCast(self.connector, bus_address=self.bus_address)
        self._frames = PipeWireFrames(self._cast.node_id, width, height, env=self.env)


class PortalCapture(_PipeWireCapture):
    """The same frame source over the screen the person shared through the desktop portal
    (media/portal/): a ScreenCast session on the desktop user's session bus and its PipeWire
    stream, read through gst-launch on the remote the portal hands over (an fd). Opened in the
    video thread on first use, at that call's size; reopened after a failure like
    MutterCapture. The first open may wait up to `consent_timeout` for the person to answer
    the portal's dialog; with a restore token kept from an earlier session it does not ask.

    A refusal (or nobody answering) is final for this source: every later grab fails at once
    without asking again, so the session ends through `lost()` instead of showing the dialog
    sixty times a second. The outcome is kept in the state directory for /capture/methods."""

    def __init__(
        self,
        *,
        bus_address: str | None = None,
        env: dict | None = None,
        first_frame_timeout: float = 2.0,
        consent_timeout: float | None = None,
    ):
        self.bus_address, self.env = bus_address, env
        self.first_frame_timeout = first_frame_timeout
        self.consent_timeout = CONSENT_TIMEOUT_S if consent_timeout is None else consent_timeout
        self.x_display = ""  # the X path's name, kept for callers that read it
        self.what = "the screen shared through the desktop portal"
        self._start_counting()
        self.refused: str | None = None  # why consent is missing: final for this source

    @property
    def node_id(self) -> int | None:
        return self._cast.stream.node_id if self._cast is not None else None

    @property
    def cast(self):
        """The portal session (restore token, persistence), None while closed."""
        return self._cast

    def _grab(self, width: int, height: int) -> np.ndarray:
        if self.refused:
            raise RuntimeError(self.refused)
        return super()._grab(width, height)

    def _open(self, width: int, height: int) -> None:
        try:
            cast = PortalScreenCast(bus_address=self.bus_address,
                                    consent_timeout=self.consent_timeout)  # fmt: skip
        except PortalRefused as exc:
            self.refused = str(exc)
            save_state(outcome=exc.outcome, detail=str(exc))
            raise
        self._cast = cast
        cast.remember()
        log.info("portal screencast of node %s (%sx%s): consent %s", cast.stream.node_id,
                 cast.stream.width, cast.stream.height, cast.persistence())  # fmt: skip
        fd = cast.open_remote()
        try:
            self._frames = PipeWireFrames(cast.stream.node_id, width, height, env=self.env, fd=fd)
        finally:
            os.close(fd)  # gst-launch holds its own copy


class KWinCapture(_PipeWireCapture):
    """The same frame source over a KDE Plasma (KWin) output: a zkde_screencast_unstable_v1
    stream on KWin's Wayland socket (media/kwin/screencast.py) read through the same
    gst-launch pipewiresrc reader as mutter's. `output` names the output (wl_output name,
    e.g. "DP-1"; None for the only one); `window` (KWin's window uuid) streams one window
    instead. Opened in the video thread on first use and reopened after a failure, like
    MutterCapture; KWin sends frames on damage, so a grab returns the newest at once.

    `env` is the gst-launch environment: it needs the XDG_RUNTIME_DIR of the PipeWire
    daemon KWin streams to (the desktop user's). KWin must let this process in (a desktop
    file, docs/kde-capture.md)."""

    def __init__(
        self,
        wayland_socket: str,
        output: str | None = None,
        *,
        window: str | None = None,
        env: dict | None = None,
        first_frame_timeout: float = 2.0,
    ):
        self.wayland_socket, self.connector, self.window = wayland_socket, output, window
        self.env = env
        self.first_frame_timeout = first_frame_timeout
        self.x_display = ""  # the X path's name, kept for callers that read it
        where = f"window {window}" if window else f"output {output or '(the only one)'}"
        self.what = f"{where} of KWin at {wayland_socket}"
        self._start_counting()

    def _open(self, width: int, height: int) -> None:
        self._cast = KWinScreenCast(self.wayland_socket, self.connector, window=self.window)
        self._frames = PipeWireFrames(self._cast.node_id, width, height, env=self.env)
