"""What a session of either plane does with the display `machine.acquire` gave it.

Why one module: the compat runner (compat/session.py) and the native peer
(native/peer.py) stream the same backends (`xvfb`, `x11`, `wlr`, `gnome`, `kwin`, `sway`), so
the choices that depend on the backend live here once: which X display an app gets, the
virtual keyboard and pointer of a wlroots output, a GNOME monitor or a KDE output, launching
onto an output of the host's headless compositor, the frame source, and whether the
compositor under a session is gone. Plain Python; no Django.
"""

from __future__ import annotations

import logging
import os

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
    if display.get("backend") in ("wlr", "gnome", "kwin"):
        return (os.environ.get("DISPLAY") or "").strip()
    return display.get("x_display") or ""


def input_at_start(display: dict) -> bool:
    """Backends whose keyboard and pointer are made at session start (Wayland, GNOME): apps
    bind a seat's new devices when they appear; X11 gets XTest on the first event."""
    return is_wayland(display) or display.get("backend") == "gnome"


def session_input(display: dict, label: str = ""):
    """The session's keyboard and pointer on `input_at_start` backends: MutterInput on the
    GNOME monitor, KWinInput on the KDE output, else WlrInput on the wlroots output; None
    (logged) when unavailable."""
    if display.get("backend") == "kwin":
        from media.kwin.input import KWinInput, KWinInputUnavailable

        try:
            return KWinInput(display["wayland_display"], display["output"])
        except KWinInputUnavailable as exc:
            log.warning("no input for session %s: %s", label, exc)
            return None
    if display.get("backend") != "gnome":
        return wlr_input(display, label)
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
    from media.wayland.vinput import WlrInput, WlrInputUnavailable

    try:
        return WlrInput(display["wayland_display"], display["output"])
    except WlrInputUnavailable as exc:
        log.warning("no input for session %s: %s", label, exc)
        return None


def launch_in_compositor(display: dict, cmd: str, env: dict, working_dir: str,
                         exit_timeout: float, map_timeout: float):  # fmt: skip
    """The app onto the session's output of the headless compositor, fullscreen (`env`: the
    session's own variables, `apprun.app_vars`); it must map a window within `map_timeout`,
    else DisplayLaunchError and nothing of it stays."""
    from displays import headless
    from displays.sway import CompositorError
    from games.apprun import CompositorApp

    comp = proc = None
    try:
        comp = headless.current()
        if comp is None:
            raise DisplayLaunchError(503, "No virtual display: the headless compositor is gone")
        proc = CompositorApp(comp, display["output"], cmd, env, working_dir, exit_timeout)
        comp.wait_window(proc.pid, display["output"], timeout=map_timeout)
        return proc
    except CompositorError as exc:
        if proc is not None:
            proc.terminate()
        raise DisplayLaunchError(500, f"App failed to start: {exc}") from None
    finally:
        if comp is not None:
            comp.detach()


def open_capture(display: dict):
    """The frame source of the session: mutter's ScreenCast of its monitor on `gnome`
    (the host's session bus and XDG_RUNTIME_DIR), KWin's screencast of its output on `kwin`
    (the host's XDG_RUNTIME_DIR for PipeWire), wlr-screencopy of its output on wlroots
    backends, else an X grab of its display (the attached monitor's region, or the whole Xvfb)."""
    from media.framesource import DisplayCapture, KWinCapture, MutterCapture, WaylandCapture

    if display.get("backend") == "gnome":
        return MutterCapture(display["output"])
    if display.get("backend") == "kwin":
        return KWinCapture(display["wayland_display"], display["output"])
    if is_wayland(display):
        return WaylandCapture(display["wayland_display"], display.get("output"))
    return DisplayCapture(display["x_display"], display.get("region"))


def compositor_gone(display: dict | None) -> str:
    """Headless sessions: why the compositor under the session is gone, else ""."""
    if display is None or display.get("backend") != "sway":
        return ""
    from displays.sway import _alive

    pid = display.get("pid")
    if pid and not _alive(pid):
        where = display.get("wayland_display")
        return f"output {display.get('output')} of the compositor at {where} is gone"
    return ""
