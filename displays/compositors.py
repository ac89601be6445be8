"""Compositor backends found on PATH: the ones a session may run games in."""

from __future__ import annotations

import os
import shutil

from displays import xvfb
from displays.capture import probe_gnome
from hostconfig.schema import COMPOSITOR_BACKEND_REFUSED

# id -> (label, binaries that provide it)
COMPOSITORS = {
    "kwin": ("KWin (KDE Plasma)", ("kwin_wayland",)),
    "gamescope": ("Gamescope", ("gamescope",)),
    "mutter": ("Mutter (GNOME)", ("mutter", "gnome-shell")),
    "wlroots": ("wlroots (sway, labwc, river)", ("sway", "labwc", "river")),
    "hyprland": ("Hyprland", ("Hyprland", "hyprland")),
}
DESKTOP_HINTS = {"kde": "kwin", "gnome": "mutter", "sway": "wlroots", "hyprland": "hyprland"}
# The headless backends `compositor_backend` names (with `auto`), then Xvfb, the fallback.
HEADLESS = {
    "sway": ("sway (wlroots)", "sway"),
    "mutter": ("GNOME virtual monitors (mutter)", "mutter"),
    "labwc": ("labwc (wlroots)", "labwc"),
    "krfb": ("krfb-virtualmonitor", "krfb-virtualmonitor"),
    "gamescope": ("Gamescope", "gamescope"),
    "xvfb": ("Xvfb (X virtual framebuffer)", "Xvfb"),
}


def _on_path(names) -> bool:
    return any(shutil.which(n) for n in names)


def compositors(configured: str | None = None) -> list[dict]:
    """Every known backend, whether usable now, and which one an `Auto` request resolves to."""
    available = {cid: _on_path(bins) for cid, (_, bins) in COMPOSITORS.items()}
    desktop = os.environ.get("XDG_CURRENT_DESKTOP", "").lower()
    default = None
    if configured in available and available[configured]:
        default = configured
    for hint, cid in DESKTOP_HINTS.items():
        if default is None and hint in desktop and available[cid]:
            default = cid
    if default is None:
        default = next((cid for cid, ok in available.items() if ok), None)
    return [
        {"id": cid, "label": label, "available": available[cid], "default": cid == default}
        for cid, (label, _) in COMPOSITORS.items()
    ]


def headless(gnome_why: str | None = None) -> list[dict]:
    """`auto` (available when any concrete one is), then each backend: available only when it
    is installed and this build can drive it (the `compositor_backend` refusals say why not).
    `gnome_why`: a capture selection's finding on the user's GNOME ("" usable), so a caller
    that has one does not probe the session bus again."""
    rows = []
    for hid, (label, binary) in HEADLESS.items():
        row = {"id": hid, "label": label, "available": False}
        if hid == "xvfb":
            row["available"] = xvfb.available()
        elif hid == "mutter":  # the user's running GNOME, not a binary the host starts
            why = gnome_why
            if why is None:
                heads, why = probe_gnome(os.environ)
                why = "" if heads is not None else why
            row["available"] = not why
            if why:
                row["reason"] = why
        elif hid in COMPOSITOR_BACKEND_REFUSED:
            row["reason"] = COMPOSITOR_BACKEND_REFUSED[hid]
        else:
            row["available"] = shutil.which(binary) is not None
        if not row["available"] and "reason" not in row:
            row["reason"] = f"{binary} is not installed"
        rows.append(row)
    return [{"id": "auto", "label": "Auto", "available": any(r["available"] for r in rows)}, *rows]
