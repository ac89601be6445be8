"""What a session of either plane does with the display `machine.acquire` gave it.

Why one module: the compat runner (compat/session.py) and the native peer (native/peer.py)
stream the same backends (`xvfb`, `x11`, `wlr`, `gnome`, `kwin`, `portal`, `sway`, and
`mutter`: a virtual monitor of the user's GNOME), so the choices that depend on the backend
live here once: which X display an app gets, the virtual keyboard and pointer of a wlroots
output, a GNOME monitor or a KDE output, launching onto an output of the host's headless
compositor, the frame source, and whether the compositor under a session is gone. Plain
Python; no Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time

from common import procs
from common.statedir import state_dir
from displays import gnome_monitors

log = logging.getLogger("streaming.sessions")


class DisplayLaunchError(Exception):
    """The app could not be put on the session's output (status, message as for /launch)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def map_timeout() -> float:
    """Seconds a headless app has to map its first window (HOST_APP_MAP_TIMEOUT_S, 1-600)."""
    try:
        return min(max(float(os.environ.get("HOST_APP_MAP_TIMEOUT_S") or 30), 1.0), 600.0)
    except ValueError:
        return 30.0


def is_wayland(display: dict) -> bool:
    """Backends on a Wayland socket (`wlr`: the operator's wlroots compositor, `kwin`: the
    operator's KWin, `sway`: the host's headless compositor)."""
    return bool(display.get("wayland_display"))


def app_x_display(display: dict) -> str:
    """DISPLAY for the session's app: the display's own X server; on `wlr` the operator's
    compositor's Xwayland (the host's DISPLAY), since the output has no X server of ours."""
    if display.get("backend") in ("wlr", "gnome", "mutter", "kwin", "portal"):
        return (os.environ.get("DISPLAY") or "").strip()
    return display.get("x_display") or ""


def app_wayland_display(display: dict) -> str:
    """WAYLAND_DISPLAY for the session's app: the display's compositor on wlroots backends;
    on GNOME the user's own (native Wayland apps open on the desktop, on the pointer's
    monitor), as on a portal's desktop; "" on X-only backends, so an app never lands on
    another compositor."""
    if is_gnome(display) or display.get("backend") == "portal":
        return (os.environ.get("WAYLAND_DISPLAY") or "").strip()
    return display.get("wayland_display") or ""


def is_gnome(display: dict) -> bool:
    """A monitor of the user's GNOME: attached (`gnome`) or a virtual one (`mutter`)."""
    return display.get("backend") in ("gnome", "mutter")


def input_at_start(display: dict) -> bool:
    """Backends whose keyboard and pointer are made at session start (Wayland, GNOME): apps
    bind a seat's new devices when they appear; X11 gets XTest on the first event."""
    return is_wayland(display) or is_gnome(display) or display.get("backend") == "portal"


def session_input(display: dict, label: str = ""):
    """The session's keyboard and pointer on `input_at_start` backends: MutterInput on the
    GNOME monitor, KWinInput on the KDE output, else WlrInput on the wlroots output (on
    `portal`: the compositor's, when it has the wlroots virtual devices); None (logged) when
    unavailable."""
    if display.get("backend") == "kwin":
        # spawned child: the encoder imports this module for open_capture alone
        from media.kwin.input import KWinInput, KWinInputUnavailable

        try:
            return KWinInput(display["wayland_display"], display["output"])
        except KWinInputUnavailable as exc:
            log.warning("no input for session %s: %s", label, exc)
            return None
    if display.get("backend") == "portal" and not is_wayland(display):
        log.warning("no input for session %s: the desktop has no wlroots virtual keyboard and "
                    "pointer, and the RemoteDesktop portal is not used yet", label)  # fmt: skip
        return None
    if not is_gnome(display):
        return wlr_input(display, label)
    # spawned child: the encoder imports this module for open_capture alone
    from media.mutter.remotedesktop import MutterInput, MutterInputUnavailable

    try:
        return MutterInput(display["output"])
    except MutterInputUnavailable as exc:
        log.warning("no input for session %s: %s", label, exc)
        return None


def wlr_input(display: dict, label: str = ""):
    """Virtual keyboard and pointer on the session's output (a WlrInput, XInput's interface);
    None (logged) when the compositor lacks them: the session still streams. Made at session
    start: apps (Xwayland among them) bind the seat's devices when they appear."""
    # spawned child: the encoder imports this module for open_capture alone
    from media.wayland.vinput import WlrInput, WlrInputUnavailable

    try:
        return WlrInput(display["wayland_display"], display["output"] or None)
    except WlrInputUnavailable as exc:
        log.warning("no input for session %s: %s", label, exc)
        return None


def launch_in_compositor(display: dict, cmd: str, env: dict, working_dir: str,
                         exit_timeout: float, map_timeout: float):  # fmt: skip
    """The app onto the session's output of the headless compositor, fullscreen (`env`: the
    session's own variables, `apprun.app_vars`); it must map a window within `map_timeout`,
    else DisplayLaunchError and nothing of it stays."""
    # spawned child: the encoder imports this module for open_capture alone
    from displays import headless, sway
    from games.apprun import CompositorApp  # spawned child, as above

    comp = proc = None
    try:
        comp = headless.current()
        if comp is None:
            raise DisplayLaunchError(503, "No virtual display: the headless compositor is gone")
        proc = CompositorApp(comp, display["output"], cmd, env, working_dir, exit_timeout)
        comp.wait_window(proc.pid, display["output"], timeout=map_timeout)
        return proc
    except sway.CompositorError as exc:
        if proc is not None:
            proc.terminate()
        raise DisplayLaunchError(500, f"App failed to start: {exc}") from None
    finally:
        if comp is not None:
            comp.detach()


PLACING_LOCK = "gnome-placing.lock"
PLACE_WAIT_MAX_S = 10.0


@contextlib.contextmanager
def placing(display: dict, timeout: float):
    """Around an app's launch on a GNOME monitor, so its window opens there. Mutter opens a
    new window on the pointer's monitor, and a GNOME desktop has one pointer: sessions
    starting together would race for it. So, under a host-wide lock, the pointer goes to the
    middle of this monitor, the app starts, and the lock is held until the monitor shows a
    change (the window mapped) or `timeout` (at most PLACE_WAIT_MAX_S) passes. Other
    backends place apps themselves: nothing happens."""
    if not is_gnome(display):
        yield
        return
    from media.framesource import MutterCapture  # heavy: numpy

    # spawned child: the encoder imports this module for open_capture alone
    from media.mutter.remotedesktop import MutterInput, MutterInputUnavailable

    with open(state_dir() / PLACING_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pointer = watch = None
        try:
            try:
                pointer = MutterInput(display["output"], home=True)
                watch = MutterCapture(display["output"])
                watch(64, 36)  # the first frame: what the monitor shows before the app
            except MutterInputUnavailable as exc:
                log.warning("app placement on %s: %s", display.get("output"), exc)
            wait = min(timeout, PLACE_WAIT_MAX_S) if watch and not watch.failures else 0.0
            yield
            deadline = time.monotonic() + wait
            while watch is not None and watch.frames_received < 2:
                if time.monotonic() > deadline:
                    log.info("no window seen on %s in %.0f s: a launch after this one may "
                             "take the pointer first", display.get("output"), wait)  # fmt: skip
                    break
                time.sleep(0.05)
        finally:
            for held in (watch, pointer):
                if held is not None:
                    held.close()
            fcntl.flock(lock, fcntl.LOCK_UN)


def open_capture(display: dict):
    """The frame source of the session: mutter's ScreenCast of its monitor on `gnome`
    (the host's session bus and XDG_RUNTIME_DIR), KWin's screencast of its output on `kwin`
    (the host's XDG_RUNTIME_DIR for PipeWire), wlr-screencopy of its output on wlroots
    backends, the desktop portal's ScreenCast on `portal` (the screen the person picked), else
    an X grab of its display (the attached monitor's region, or the whole Xvfb)."""
    # heavy: numpy, loaded only where frames are captured
    from media.framesource import (
        DisplayCapture,
        KWinCapture,
        MutterCapture,
        PortalCapture,
        WaylandCapture,
    )

    if is_gnome(display):
        return MutterCapture(display["output"])
    if display.get("backend") == "portal":
        return PortalCapture()
    if display.get("backend") == "kwin":
        return KWinCapture(display["wayland_display"], display["output"])
    if is_wayland(display):
        return WaylandCapture(display["wayland_display"], display.get("output"))
    return DisplayCapture(display["x_display"], display.get("region"))


def compositor_gone(display: dict | None) -> str:
    """Headless sessions: why the compositor (or GNOME virtual monitor) under the session is
    gone, else ""."""
    if display is not None and display.get("backend") == "mutter":
        if not gnome_monitors.alive(display.get("pid")):
            return f"the GNOME virtual monitor {display.get('output')} is gone"
        return ""
    if display is None or display.get("backend") != "sway":
        return ""
    pid = display.get("pid")
    if pid and not procs.alive(pid):
        where = display.get("wayland_display")
        return f"output {display.get('output')} of the compositor at {where} is gone"
    return ""
