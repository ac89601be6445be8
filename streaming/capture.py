"""Capture methods: which backends this machine offers, and a real X11 frame grab.

Availability is a best-effort probe of the environment (the session opens the real thing);
`x11` is available when an X server is reachable or Xvfb can start one for a virtual display.
"""

from __future__ import annotations

import ctypes
import glob
import os

from streaming.displays import xvfb

METHODS = (
    ("auto", "Automatic"),
    ("portal", "XDG desktop portal (PipeWire)"),
    ("kwin", "KWin screencast"),
    ("wlr", "wlroots screencopy"),
    ("kms", "KMS/DRM framebuffer"),
    ("x11", "X11 (XShm)"),
    ("nvfbc", "NVIDIA FBC"),
)


def _x_reachable(display: str | None) -> bool:
    if not display or not display.startswith(":"):
        return False
    number = display[1:].split(".", 1)[0]
    return os.path.exists(f"/tmp/.X11-unix/X{number}")


def _loadable(name: str) -> bool:
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


def probe(env: dict | None = None) -> dict[str, bool]:
    env = os.environ if env is None else env
    desktop = env.get("XDG_CURRENT_DESKTOP", "").lower()
    portal = bool(env.get("XDG_RUNTIME_DIR")) and any(
        os.path.exists(p)
        for p in ("/usr/libexec/xdg-desktop-portal", "/usr/lib/xdg-desktop-portal")
    )
    return {
        "auto": True,
        "portal": portal,
        "kwin": portal and "kde" in desktop,
        "wlr": bool(env.get("WAYLAND_DISPLAY")),
        "kms": any(os.access(p, os.R_OK) for p in glob.glob("/dev/dri/card*")),
        "x11": _x_reachable(env.get("DISPLAY")) or xvfb.available(),
        "nvfbc": _loadable("libnvidia-fbc.so.1"),
    }


def methods() -> list[dict]:
    """`auto` first (always available), then the concrete backends in preference order."""
    found = probe()
    return [{"id": i, "label": label, "available": found[i]} for i, label in METHODS]


def grab(x_display: str, region: dict | None = None):
    """One frame (an `mss` ScreenShot: `.size`, `.rgb`, `.bgra`) of an X display, e.g. `:5`."""
    import mss

    with mss.MSS(display=x_display) as sct:
        return sct.grab(region or sct.monitors[1])
