"""Physical monitors: the heads of the host's X server, else the connected DRM connectors.

Our own virtual displays (Xvfb servers) are not monitors and are never listed.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_PIN = "HOST_CAPTURE_MONITOR"


def _x_heads(display: str) -> list[dict]:
    import mss

    with mss.MSS(display=display) as sct:
        heads = sct.monitors[1:]
    out = []
    for i, head in enumerate(heads):
        connector = str(head.get("output") or head.get("name") or f"screen-{i}")
        out.append(
            {
                "connector": connector,
                "description": connector,
                "mode": f"{head['width']}x{head['height']}",
                "x": head["left"],
                "y": head["top"],
                "scale": 1.0,
                "primary": bool(head.get("is_primary", i == 0)),
                "enabled": True,
                "managed": False,
            }
        )
    return out


def _drm_heads(sysfs: Path) -> list[dict]:
    out = []
    drm = sysfs / "class" / "drm"
    try:
        entries = sorted(p for p in drm.iterdir() if p.name.startswith("card") and "-" in p.name)
    except OSError:
        return []
    for entry in entries:
        try:
            if (entry / "status").read_text().strip() != "connected":
                continue
            modes = (entry / "modes").read_text().split()
            enabled = (entry / "enabled").read_text().strip() == "enabled"
        except OSError:
            continue
        connector = entry.name.split("-", 1)[1]
        out.append(
            {
                "connector": connector,
                "description": connector,
                "mode": modes[0] if modes else "",
                "x": 0,
                "y": 0,
                "scale": 1.0,
                "primary": not out,
                "enabled": enabled,
                "managed": False,
            }
        )
    x = 0
    for head in out:  # DRM has no desktop layout: lay enabled heads out left to right
        head["x"] = x
        if head["enabled"] and "x" in head["mode"]:
            x += int(head["mode"].split("x")[0])
    return out


def monitors(sysfs: str | Path = "/sys", display: str | None = None, pin: str | None = None):
    from streaming.displays import policy

    display = os.environ.get("DISPLAY") if display is None else display
    error = None
    heads: list[dict] = []
    compositor = None
    if display:
        try:
            heads = _x_heads(display)
            compositor = "x11"
        except Exception as exc:  # noqa: BLE001 - an unreachable X server is reported, not raised
            error = f"X server {display} not reachable: {exc.__class__.__name__}"
    if not heads:
        heads = _drm_heads(Path(sysfs))
    if pin is None:
        pin = os.environ.get(ENV_PIN) or policy.load()[0].get("capture_monitor")
    for head in heads:
        head["selected"] = bool(pin) and head["connector"].lower() == pin.lower()
    heads.sort(key=lambda h: (h["x"], h["y"]))
    return {
        "compositor": compositor,
        "monitors": heads,
        "pinned": pin or None,
        "pin_supported": True,
        "error": error,
    }
