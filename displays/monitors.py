"""Monitors: the outputs of the wlroots compositor the host runs in (`WAYLAND_DISPLAY`), else
the heads of its X server, else the connected DRM connectors.

Our own Xvfb servers are not monitors and are never listed; the outputs of the host's own
headless compositor are, marked `managed` (the host made them and will retire them).
"""

from __future__ import annotations

import os
from pathlib import Path

import mss

from displays import capture, headless, policy

ENV_PIN = "HOST_CAPTURE_MONITOR"


def _x_heads(display: str) -> list[dict]:
    with mss.MSS(display=display) as sct:
        heads = sct.monitors[1:]
    out = []
    for i, head in enumerate(heads):
        connector = str(head.get("output") or head.get("name") or f"screen-{i}")
        out.append(
            _head(connector, head["width"], head["height"], head["left"], head["top"],
                  primary=bool(head.get("is_primary", i == 0)))
        )  # fmt: skip
    return out


def _head(connector: str, width: int, height: int, x: int, y: int, **kw) -> dict:
    return {
        "connector": connector,
        "description": connector,
        "mode": f"{width}x{height}",
        "x": x,
        "y": y,
        "scale": 1.0,
        "primary": False,
        "enabled": True,
        "managed": False,
        **kw,
    }


def _wlr_heads(socket_path: str) -> list[dict]:
    outs = capture.wlr_outputs(socket_path)
    return [
        _head(o["name"], o["width"], o["height"], o["x"], o["y"], primary=i == 0)
        for i, o in enumerate(outs)
    ]


def _headless_heads() -> list[dict]:
    """The live outputs of the host's own headless compositor (none when it does not run)."""
    heads = []
    for out in headless.status().get("outputs", []):
        mode, rect = out.get("mode") or {}, out.get("rect") or {}
        if not mode:
            continue
        heads.append(
            _head(out["name"], mode["width"], mode["height"], rect.get("x", 0),
                  rect.get("y", 0), managed=True)
        )  # fmt: skip
    return heads


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


def monitors(
    sysfs: str | Path = "/sys",
    display: str | None = None,
    pin: str | None = None,
    wayland: str | None = None,
):
    """`display` / `wayland` (a socket path): the X display and compositor to ask, by default
    the host's own `DISPLAY` and `WAYLAND_DISPLAY`; "" asks none."""
    display = os.environ.get("DISPLAY") if display is None else display
    wayland = capture.wayland_socket(os.environ) if wayland is None else wayland
    error = None
    heads: list[dict] = []
    compositor = None
    if wayland:
        try:
            heads = _wlr_heads(wayland)
            compositor = "wlr"
        except Exception as exc:  # an unreachable compositor is reported
            error = f"compositor at {wayland} not reachable: {exc.__class__.__name__}"
    if display and not heads:
        try:
            heads = _x_heads(display)
            compositor = "x11"
        except Exception as exc:  # an unreachable X server is reported, not raised
            error = f"X server {display} not reachable: {exc.__class__.__name__}"
    if not heads:
        heads = _drm_heads(Path(sysfs))
    heads += _headless_heads()
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
