"""Capture backends: which one a session uses, whether each works here and why not.

The setting is `capture` (inherited name) or `capture_method` (the management API's field),
else the environment's `HOST_CAPTURE_METHOD`, else `auto`. Backends:

* `x11`: an existing X display the host does not own: `output_name` when it names a local
  display (`:1`), else the host's own `DISPLAY`. Captured with mss (XShm), one monitor of it
  (the pin `HOST_CAPTURE_MONITOR` / policy `capture_monitor`, else `output_name` when it names
  a monitor, else the primary one); input with XTest into that display.
* `wlr`: the operator's wlroots compositor at `WAYLAND_DISPLAY` (live socket, screencopy in its
  registry): the output `output_name` / `capture_monitor` names, else its first; captured with
  wlr-screencopy, input through the virtual keyboard and pointer protocols. Attached: never
  owned, never torn down.
* `gnome`: the operator's GNOME (mutter) desktop on the session bus
  (`DBUS_SESSION_BUS_ADDRESS`): the monitor `capture_monitor` / `output_name` names (a
  connector such as `DP-1`), else the primary one; captured with mutter's ScreenCast over
  PipeWire (gst-launch-1.0 with pipewiresrc), input through mutter's RemoteDesktop. Attached.
* `kwin`: the operator's KDE Plasma desktop: KWin at WAYLAND_DISPLAY in a KDE session
  (XDG_CURRENT_DESKTOP names KDE) that lets this process use its screencast and fake-input
  protocols (a desktop file, docs/kde-capture.md): the output `capture_monitor` /
  `output_name` names, else its first; captured through zkde_screencast_unstable_v1 over
  PipeWire (the same gst-launch reader as gnome), input through org_kde_kwin_fake_input.
  Attached.
* `portal`: xdg-desktop-portal's ScreenCast on the session bus, for desktops whose own
  interfaces the host cannot use (KDE, Hyprland without screencopy, ...): the person picks
  the screen in the portal's dialog once, and the restore token the portal gives (kept in
  the state directory) starts later sessions unattended, where the portal's backend grants
  persistence (media/portal/screencast.py). Input through the compositor's wlroots virtual
  keyboard and pointer when it has them; the RemoteDesktop portal is not used yet.
* `headless` (`headless_mode = true`): a display per session. On a GNOME session (and
  `compositor_backend` auto or mutter) a virtual monitor of the person's own desktop
  (displays/gnome_monitors.py), captured and driven like `gnome`; else an output of the host's
  own headless sway (displays/headless.py), captured and driven like wlr.
* `xvfb`: a private Xvfb per session (displays/xvfb.py), the fallback.

`auto` is wlr when WAYLAND_DISPLAY answers with screencopy, else kwin on a KDE session whose
KWin lets this process stream, else gnome when the session bus
has mutter's ScreenCast (on GNOME Wayland DISPLAY is Xwayland, whose root shows only X
windows: never the desktop), else portal in a Wayland session (WAYLAND_DISPLAY set) whose
portal has ScreenCast (DISPLAY is Xwayland there too), else x11 when the host's DISPLAY
answers (it runs inside a desktop session), else xvfb.
Probes open only what a session would read from (an X connection, a socket connect), so
`/capture/methods` and preflight stay read-only.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

import mss

from displays import headless, policy, xvfb
from displays.sway import CompositorError
from hostconfig import schema, store
from hostconfig.schema import CAPTURE_UNSUPPORTED
from media.kwin.input import FAKE_INPUT
from media.kwin.screencast import SCREENCAST as KWIN_SCREENCAST
from media.kwin.screencast import refused_reason
from media.mutter import screencast as mutter_cast
from media.mutter.remotedesktop import REMOTEDESKTOP
from media.portal import screencast as portal_cast
from media.wayland.client import Display, WaylandError

METHODS = (
    ("auto", "Automatic"),
    ("x11", "X11 display of the desktop session (XShm)"),
    ("wlr", "wlroots screencopy"),
    ("gnome", "GNOME (mutter) ScreenCast and RemoteDesktop"),
    ("kwin", "KDE Plasma (KWin) screencast and fake input"),
    ("portal", "XDG desktop portal ScreenCast (PipeWire)"),
    ("xvfb", "Private Xvfb display"),
    ("kms", "KMS/DRM framebuffer"),
    ("nvfbc", "NVIDIA FBC"),
)
# Only local displays: XShm needs the server on this machine, and a TCP display would send the
# operator's screen over the network.
LOCAL_X = re.compile(r"^:(\d{1,5})(?:\.(\d{1,2}))?$")
X_PROBE_TIMEOUT_S = 3.0
CONFIG_KEYS = ("capture", "capture_method")
ENV_METHOD = "HOST_CAPTURE_METHOD"


class CaptureError(Exception):
    """The configured backend cannot be used; `status` is what an API answers."""

    def __init__(self, message: str, status: int = 503):
        super().__init__(message)
        self.message, self.status = message, status


@dataclass
class XDisplay:
    """What a probe of one X display found: reachable, its monitors, or why not."""

    name: str
    ok: bool
    reason: str = ""
    monitors: list[dict] = field(default_factory=list)  # mss monitors[1:], with "output"


@dataclass
class Selection:
    requested: str  # the configured value: auto, x11, wlr, gnome, kwin or xvfb
    source: str  # where it came from: capture, capture_method, HOST_CAPTURE_METHOD, default
    backend: str  # what a session gets: x11, wlr, gnome, kwin, headless or xvfb
    reason: str  # why that backend
    error: str = ""  # non-empty: the session must not start (the backend cannot be used)
    x_display: str = ""  # x11: the display to attach to
    region: dict | None = None  # x11: {left, top, width, height} of the captured monitor
    wayland_socket: str = ""  # wlr, kwin: the operator compositor's socket (absolute)
    output: str = ""  # wlr, kwin: the output captured; gnome: the connector (monitor) captured
    headless: str = ""  # headless: what each display is, "mutter" (GNOME) or "sway"
    gnome_why: str = ""  # why the user's GNOME cannot take virtual monitors ("" when it can)
    unusable: dict[str, str] = field(default_factory=dict)  # backend -> why not here


# -- probes ------------------------------------------------------------------------------------
def probe_x(name: str, timeout: float = X_PROBE_TIMEOUT_S) -> XDisplay:
    """Connect to X display `name` as the capture would (mss) and list its monitors.

    In a thread with a deadline: a server that accepts but never answers must not hang a
    session start or the preflight report.
    """
    if not LOCAL_X.match(name or ""):
        return XDisplay(name, False, f"{name!r} is not a local X display (:N)")
    box: dict = {}

    def run() -> None:
        try:
            with mss.MSS(display=name) as sct:
                box["monitors"] = [dict(m) for m in sct.monitors[1:]]
        except Exception as exc:  # any failure is the answer
            box["error"] = f"{exc.__class__.__name__}: {exc}"

    worker = threading.Thread(target=run, name=f"x-probe-{name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return XDisplay(name, False, f"X display {name} did not answer within {timeout:g} s")
    if "error" in box:
        return XDisplay(name, False, f"X display {name} is not reachable ({box['error']})")
    if not box.get("monitors"):
        return XDisplay(name, False, f"X display {name} has no monitor to capture")
    return XDisplay(name, True, monitors=box["monitors"])


def wayland_socket(env) -> str | None:
    """The path WAYLAND_DISPLAY names (relative to XDG_RUNTIME_DIR), or None when unset."""
    name = env.get("WAYLAND_DISPLAY") or ""
    if not name:
        return None
    if name.startswith("/"):
        return name
    runtime = env.get("XDG_RUNTIME_DIR") or ""
    return os.path.join(runtime, name) if runtime else None


def _socket_live(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wlr_screencopy_advertised(socket_path: str,
                              name: str = "zwlr_screencopy_manager_v1") -> bool | None:  # fmt: skip
    """True when the compositor at `socket_path` advertises global `name` (screencopy unless
    told) in its registry, False when it does not, None when its registry could not be read."""
    try:
        with Display(socket_path, timeout=X_PROBE_TIMEOUT_S) as d:
            return d.find_global(name) is not None
    except (WaylandError, OSError):
        return None


def wlr_outputs(socket_path: str) -> list[dict]:
    """The compositor's outputs: name, x, y, width, height (its registry, read-only)."""
    with Display(socket_path, timeout=X_PROBE_TIMEOUT_S) as d:
        return [{"name": o.name, "x": o.x, "y": o.y, "width": o.width, "height": o.height}
                for o in d.outputs()]  # fmt: skip


def probe_wlr(env) -> tuple[bool, str]:
    """(available, reason): a live WAYLAND_DISPLAY socket whose compositor has screencopy."""
    path = wayland_socket(env)
    if path is None:
        if env.get("WAYLAND_DISPLAY"):
            return False, "WAYLAND_DISPLAY is relative and XDG_RUNTIME_DIR is not set"
        return False, "WAYLAND_DISPLAY is not set (the host does not run in a Wayland session)"
    if not _socket_live(path):
        return False, f"no compositor answers at WAYLAND_DISPLAY ({path})"
    advertised = wlr_screencopy_advertised(path)
    if advertised is None:
        return False, f"the compositor at {path} did not answer its registry"
    if not advertised:
        return False, f"the compositor at {path} does not offer zwlr_screencopy_manager_v1"
    return True, ""


def session_bus_live(env=None) -> bool:
    """Cheap liveness for listings: the session bus's unix socket accepts a connection."""
    env = os.environ if env is None else env
    addr = env.get("DBUS_SESSION_BUS_ADDRESS") or ""
    m = re.search(r"unix:(path|abstract)=([^,;]+)", addr)
    if not m:
        return False
    return _socket_live(m.group(2) if m.group(1) == "path" else "\0" + m.group(2))


GST_ELEMENTS = (("pipewiresrc", "gstreamer1.0-pipewire"),
                ("videoconvert", "gstreamer1.0-plugins-base"))  # fmt: skip


_GST_CHECK_TTL_S = 60.0
_gst_checked: dict[str, tuple[float, str]] = {}  # PATH -> (when, answer)


def gst_missing() -> str:
    """Why GNOME frames cannot be read here ("" when they can): gst-launch-1.0 and the
    elements of media/mutter/frames.py's pipeline. Remembered for a minute per PATH: every
    selection asks (each session start, /capture/methods, preflight) and the answer is two
    gst-inspect runs, while installed packages change only by hand."""
    key = os.environ.get("PATH", "")
    hit = _gst_checked.get(key)
    if hit is not None and time.monotonic() - hit[0] < _GST_CHECK_TTL_S:
        return hit[1]
    answer = _gst_missing_now()
    _gst_checked[key] = (time.monotonic(), answer)
    return answer


def _gst_missing_now() -> str:
    if shutil.which("gst-launch-1.0") is None:
        return "gst-launch-1.0 is not installed (Debian package gstreamer1.0-tools)"
    for element, package in GST_ELEMENTS:
        try:
            done = subprocess.run(["gst-inspect-1.0", element],
                                  capture_output=True, timeout=X_PROBE_TIMEOUT_S)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"gst-inspect-1.0 could not check for {element}: {exc}"
        if done.returncode:
            return f"GStreamer has no {element} element (Debian package {package})"
    return ""


def probe_gnome(env) -> tuple[list | None, str]:
    """(monitors, why not): mutter's monitors when its ScreenCast and RemoteDesktop are on the
    session bus and GStreamer can read PipeWire, else None and the reason. Read-only: it asks
    the bus which names exist and DisplayConfig for its state; it creates no session."""
    bus = (env.get("DBUS_SESSION_BUS_ADDRESS") or "").strip()
    if not bus:
        return (
            None,
            "DBUS_SESSION_BUS_ADDRESS is not set (the host does not run in a desktop session)",
        )
    try:
        heads = mutter_cast.monitors(bus, timeout=X_PROBE_TIMEOUT_S,
                                     require=(mutter_cast.SCREENCAST, REMOTEDESKTOP))  # fmt: skip
    except mutter_cast.ScreenCastError as exc:
        return None, str(exc)
    why = gst_missing()
    return (None, why) if why else (heads, "")


def probe_portal(env) -> tuple[int | None, str]:
    """(ScreenCast version, why not): the desktop portal's ScreenCast version when the portal
    and its ScreenCast interface are on the session bus and GStreamer can read PipeWire, else
    None and the reason. Read-only: no session is created, so no dialog is shown."""
    bus = (env.get("DBUS_SESSION_BUS_ADDRESS") or "").strip()
    if not bus:
        return (
            None,
            "DBUS_SESSION_BUS_ADDRESS is not set (the host does not run in a desktop session)",
        )
    try:
        version = portal_cast.probe(bus, timeout=X_PROBE_TIMEOUT_S)
    except portal_cast.PortalError as exc:
        return None, str(exc)
    why = gst_missing()
    return (None, why) if why else (version, "")


def portal_consent(version: int | None = None) -> dict:
    """What the host knows of the person's consent to the portal screencast, for
    /capture/methods and preflight: `kept` (a restore token is stored: sessions start without
    asking), `state` (the last outcome, or `none`) and `detail`, a sentence that says how to
    give consent when there is none. Never asks the portal (that could show a dialog)."""
    kept = portal_cast.load_state()
    token, outcome = kept.get("restore_token"), kept.get("outcome") or "none"
    if version is not None and version < portal_cast.PERSIST_VERSION:
        detail = (f"the portal's ScreenCast is version {version}, which cannot keep consent "
                  f"(restore tokens need version {portal_cast.PERSIST_VERSION}): every session "
                  "asks at the desktop")  # fmt: skip
    elif token:
        detail = "consent is kept (a restore token is stored): sessions start without asking"
    elif outcome in ("refused", "timeout"):
        what = "was refused" if outcome == "refused" else "got no answer"
        detail = f"the last screen-sharing request {what} at the desktop; to allow it, "
        detail += portal_cast.HOW_TO_CONSENT
    elif outcome in ("not-persisted", "failed"):
        detail = str(kept.get("detail") or outcome)[:400]
    else:
        detail = "no consent is kept yet: the first session asks at the desktop; to allow it, "
        detail += portal_cast.HOW_TO_CONSENT
    return {"kept": bool(token), "state": outcome, "detail": detail}


def kde_session(env) -> bool:
    """XDG_CURRENT_DESKTOP names KDE (a colon-separated list: "KDE", "KDE:plasma")."""
    parts = (env.get("XDG_CURRENT_DESKTOP") or "").split(":")
    return any(p.strip().lower() == "kde" for p in parts)


def probe_kwin(env) -> tuple[list | None, str]:
    """(outputs, why not): KWin's outputs (name, x, y, width, height) when the host runs in a
    KDE session whose KWin, at WAYLAND_DISPLAY, offers this process its screencast and fake
    input and GStreamer can read PipeWire; else None and the reason. Read-only: it reads the
    registry and the outputs; it starts no stream."""
    if not kde_session(env):
        desktop = (env.get("XDG_CURRENT_DESKTOP") or "").strip()
        return None, (f"XDG_CURRENT_DESKTOP is {desktop[:40]!r}, not a KDE session" if desktop
                      else "XDG_CURRENT_DESKTOP is not set (the host does not run in a KDE "
                      "session)")  # fmt: skip
    path = wayland_socket(env)
    if path is None:
        return None, "WAYLAND_DISPLAY is not set, or relative without XDG_RUNTIME_DIR"
    if not _socket_live(path):
        return None, f"no compositor answers at WAYLAND_DISPLAY ({path})"
    try:
        with Display(path, timeout=X_PROBE_TIMEOUT_S) as d:
            if d.find_global(KWIN_SCREENCAST) is None:
                return None, refused_reason(path)
            fake = d.find_global(FAKE_INPUT)
            if fake is None or fake.version < 4:
                return None, (f"KWin at {path} does not offer {FAKE_INPUT} (version 4) to this "
                              "process: the desktop file's X-KDE-Wayland-Interfaces must name it "
                              "too (docs/kde-capture.md)")  # fmt: skip
            outs = [{"name": o.name, "x": o.x, "y": o.y, "width": o.width, "height": o.height}
                    for o in d.outputs()]  # fmt: skip
    except (WaylandError, OSError) as exc:
        return None, f"KWin at {path} did not answer its registry ({exc})"
    why = gst_missing()
    return (None, why) if why else (outs, "")


# -- the setting ---------------------------------------------------------------------------------
def configured(env=None) -> tuple[str, str, str]:
    """(value, source, conflict): the capture setting in force and where it came from.

    `capture` and `capture_method` are one setting under two names; set to two different
    values they are a conflict (reported; sessions refuse to start) rather than one silently
    winning. A value the host cannot do (a hand edit: the APIs refuse it) is a conflict too.
    """
    env = os.environ if env is None else env
    raw = store.read_raw()
    found: dict[str, str] = {}
    for name in CONFIG_KEYS:
        text = (raw.get(name) or "").strip()
        if not text:
            continue
        try:
            found[name] = schema.key(name).parse(text)
        except ValueError as exc:
            return "", name, f"{name} = {text[:32]} in host.conf: {exc}"
    values = set(found.values())
    if len(values) > 1:
        pairs = ", ".join(f"{k} = {v}" for k, v in found.items())
        return "", "host.conf", f"{pairs} disagree; set one of them (or both alike)"
    if found:
        name = "capture" if "capture" in found else "capture_method"
        return found[name], name, ""
    text = (env.get(ENV_METHOD) or "").strip()
    if text:
        try:
            return schema.key("capture_method").parse(text), ENV_METHOD, ""
        except ValueError as exc:
            return "", ENV_METHOD, f"{ENV_METHOD}={text[:32]}: {exc}"
    return "auto", "default", ""


def _output_name() -> str:
    return (store.get("output_name") or "").strip()


def _monitor_pin(env) -> str:
    pin = (env.get("HOST_CAPTURE_MONITOR") or "").strip()
    if pin:
        return pin
    try:
        return (policy.load()[0].get("capture_monitor") or "").strip()
    except Exception:  # a broken policy file is reported by its own route
        return ""


def _output_name_of(head: dict) -> str | None:
    return head["name"]


def _pinned(heads: list, pin: str, name_of, noun: str, where: str) -> tuple[object | None, str]:
    """(the head `pin` names, case-insensitive, "") or (None, why: the names there are)."""
    head = next((h for h in heads if (name_of(h) or "").lower() == pin.lower()), None)
    if head is not None:
        return head, ""
    names = ", ".join(str(name_of(h)) for h in heads) or "none"
    return None, f"no {noun} named {pin!r} on {where} ({noun}s: {names})"


def _head_region(head: dict) -> dict:
    """A wlroots or KWin output's rectangle as a Selection region."""
    return {"left": head["x"], "top": head["y"], "width": head["width"], "height": head["height"]}


def _pick_monitor(found: XDisplay, pin: str) -> tuple[dict | None, str]:
    """The monitor to capture: the pinned one (by RandR output name), else the primary."""
    heads = found.monitors
    if pin:
        for head in heads:
            if str(head.get("output", "")).lower() == pin.lower():
                return head, ""
        names = ", ".join(str(h.get("output", "?")) for h in heads) or "none"
        return None, f"no monitor named {pin!r} on {found.name} (monitors: {names})"
    for head in heads:
        if head.get("is_primary"):
            return head, ""
    return heads[0], ""


def select(env=None) -> Selection:
    """Which backend a session opened now would use, and why the others are not usable."""
    env = os.environ if env is None else env
    requested, source, conflict = configured(env)
    output = _output_name()
    output_is_x = bool(LOCAL_X.match(output))
    x_name = output if output_is_x else (env.get("DISPLAY") or "").strip()
    x_from = "output_name" if output_is_x else "DISPLAY"
    pin = _monitor_pin(env) or ("" if output_is_x else output)

    unusable: dict[str, str] = dict(CAPTURE_UNSUPPORTED)
    if not xvfb.available():
        unusable["xvfb"] = "Xvfb is not installed (Debian package xvfb)"
    x_head, x_error_is_pin = None, False
    if not x_name:
        unusable["x11"] = "no DISPLAY in the host's environment and output_name names no display"
    else:
        found = probe_x(x_name)
        if not found.ok:
            unusable["x11"] = f"{x_from} {found.reason}"
        else:
            x_head, why = _pick_monitor(found, pin)
            if x_head is None:
                unusable["x11"], x_error_is_pin = why, True
    wlr_ok, wlr_why = probe_wlr(env)
    wlr_path = wayland_socket(env) or ""
    wlr_head, wlr_pin_error = None, False
    if wlr_ok:
        try:
            outs = wlr_outputs(wlr_path)
        except Exception as exc:  # a compositor going away is the answer
            outs, wlr_why = [], f"the compositor at {wlr_path} went away: {exc}"
        if pin:
            wlr_head, wlr_why = _pinned(outs, pin, _output_name_of, "output",
                                        f"the compositor at {wlr_path}")  # fmt: skip
            wlr_pin_error = wlr_head is None
        elif outs:
            wlr_head = outs[0]
        elif not wlr_why:
            wlr_why = f"the compositor at {wlr_path} has no output"
    if wlr_head is None:
        unusable["wlr"] = wlr_why
    gnome_head, gnome_pin_error = None, False
    heads, gnome_why = probe_gnome(env)
    if heads is not None:
        live = [h for h in heads if h.width]
        if pin:
            gnome_head, gnome_why = _pinned(live, pin, lambda h: h.connector, "monitor",
                                            "the GNOME desktop")  # fmt: skip
            gnome_pin_error = gnome_head is None
        else:
            gnome_head = next((h for h in live if h.primary), live[0] if live else None)
            if gnome_head is None:
                gnome_why = "the GNOME desktop has no monitor turned on"
    if gnome_head is None:
        unusable["gnome"] = gnome_why
    kwin_head, kwin_pin_error = None, False
    kwin_outs, kwin_why = probe_kwin(env)
    if kwin_outs is not None:
        live = [o for o in kwin_outs if o["width"]]
        if pin:
            kwin_head, kwin_why = _pinned(live, pin, _output_name_of, "output", "the KDE desktop")
            kwin_pin_error = kwin_head is None
        else:
            kwin_head = live[0] if live else None
            if kwin_head is None:
                kwin_why = "the KDE desktop has no output turned on"
    if kwin_head is None:
        unusable["kwin"] = kwin_why
    portal_version, portal_why = probe_portal(env)
    if portal_version is None:
        unusable["portal"] = portal_why

    sel = Selection(requested or "auto", source, "", "", unusable=unusable,
                    gnome_why="" if heads is not None else gnome_why)  # fmt: skip
    if conflict:
        sel.error = f"capture setting refused: {conflict}"
        return sel
    if _headless_mode():
        return _select_headless(sel)

    def chosen(name: str, attach_it) -> Selection:
        """`capture = name`: attached by `attach_it()`, or its reason as the error."""
        if name in unusable:
            sel.backend, sel.error = name, f"capture = {name}: {unusable[name]}"
            return sel
        return attach_it()

    region = None
    if x_head is not None:
        region = {k: int(x_head[k]) for k in ("left", "top", "width", "height")}

    def attach(reason: str) -> Selection:
        sel.backend, sel.reason, sel.x_display, sel.region = "x11", reason, x_name, region
        return sel

    if requested == "x11":
        return chosen("x11", lambda: attach(f"capture = x11 ({x_from} {x_name})"))

    def attach_wlr(reason: str) -> Selection:
        sel.backend, sel.reason = "wlr", reason
        sel.wayland_socket, sel.output = wlr_path, wlr_head["name"]
        sel.region = _head_region(wlr_head)
        return sel

    if requested == "wlr":
        return chosen(
            "wlr", lambda: attach_wlr(f"capture = wlr (output {wlr_head['name']} of {wlr_path})")
        )

    def attach_gnome(reason: str) -> Selection:
        sel.backend, sel.reason, sel.output = "gnome", reason, gnome_head.connector
        sel.region = {"left": 0, "top": 0, "width": gnome_head.width,
                      "height": gnome_head.height}  # fmt: skip
        return sel

    if requested == "gnome":
        return chosen(
            "gnome", lambda: attach_gnome(f"capture = gnome (monitor {gnome_head.connector})")
        )

    def attach_portal(reason: str) -> Selection:
        # The screen is the one the person picks in the portal's dialog; its size comes with
        # the stream. Input: the compositor's wlroots virtual devices, when it has them.
        sel.backend, sel.reason, sel.output = "portal", reason, ""
        path = wayland_socket(env) or ""
        if path and wlr_screencopy_advertised(path, "zwlr_virtual_pointer_manager_v1"):
            sel.wayland_socket = path
        return sel

    if requested == "portal":
        reason = f"capture = portal (ScreenCast version {portal_version})"
        return chosen("portal", lambda: attach_portal(reason))

    def attach_kwin(reason: str) -> Selection:
        sel.backend, sel.reason = "kwin", reason
        sel.wayland_socket, sel.output = wayland_socket(env) or "", kwin_head["name"]
        sel.region = _head_region(kwin_head)
        return sel

    if requested == "kwin":
        return chosen("kwin", lambda: attach_kwin(f"capture = kwin (output {kwin_head['name']})"))
    if requested == "xvfb":
        sel.backend, sel.reason = "xvfb", "capture = xvfb"
        if "xvfb" in unusable:
            sel.error = f"capture = xvfb: {unusable['xvfb']}"
        return sel
    # auto: the operator's wlroots compositor first (its DISPLAY, if any, is its Xwayland)
    if "wlr" not in unusable:
        return attach_wlr(f"capture = auto and a wlroots compositor answers at {wlr_path}")
    # then KDE: KWin has no screencopy, and its DISPLAY too is Xwayland
    if "kwin" not in unusable:
        return attach_kwin(f"capture = auto and KWin streams for this process on a KDE session "
                           f"(output {kwin_head['name']})")  # fmt: skip
    if kwin_pin_error:
        sel.backend, sel.error = "kwin", f"capture = auto: {unusable['kwin']}"
        return sel
    # then GNOME: its DISPLAY is Xwayland, whose root shows X windows only, never the desktop
    if "gnome" not in unusable:
        return attach_gnome(f"capture = auto and mutter's ScreenCast is on the session bus "
                            f"(monitor {gnome_head.connector})")  # fmt: skip
    if gnome_pin_error:
        sel.backend, sel.error = "gnome", f"capture = auto: {unusable['gnome']}"
        return sel
    # then the portal, in a Wayland session only: under X the x11 grab needs no consent
    if "portal" not in unusable and (env.get("WAYLAND_DISPLAY") or "").strip():
        return attach_portal(
            "capture = auto, neither wlroots screencopy, KWin nor mutter answers, and the desktop "
            f"portal has ScreenCast (version {portal_version})"
        )
    if "x11" not in unusable:
        return attach(f"capture = auto and {x_from} {x_name} answers (a desktop session)")
    if wlr_pin_error and (env.get("DISPLAY") or "").strip() == "":
        sel.backend, sel.error = "wlr", f"capture = auto: {unusable['wlr']}"
        return sel
    if output_is_x or x_error_is_pin:
        # The operator named a display or a monitor: falling back would stream something else.
        sel.backend, sel.error = "x11", f"capture = auto: {unusable['x11']}"
        return sel
    sel.backend = "xvfb"
    sel.reason = f"capture = auto and x11 is not usable ({unusable['x11']})"
    if "xvfb" in unusable:
        sel.error = f"no capture backend usable: x11: {unusable['x11']}; xvfb: {unusable['xvfb']}"
    return sel


def _headless_mode() -> bool:
    return bool(store.get("headless_mode"))


def _select_headless(sel: Selection) -> Selection:
    """headless_mode = true: each session gets a display of its own, a virtual monitor of the
    user's GNOME (`sel.output` empty: made per display) or an output of the host's headless
    sway. A capture setting that names another backend contradicts it and is refused rather
    than one of the two silently winning."""
    sel.backend = "headless"
    name, why = headless.backend(sel.gnome_why)
    fits = {"mutter": ("auto", "gnome"), "sway": ("auto", "wlr")}.get(name or "", ("auto",))
    if sel.requested not in fits:
        sel.error = (f"headless_mode = true runs sessions on "
                     f"{'GNOME virtual monitors' if name == 'mutter' else 'a headless compositor'}"
                     f", but {sel.source} = {sel.requested}; set capture to "
                     f"{' or '.join(fits)}, or turn headless_mode off")  # fmt: skip
        return sel
    if name is None:
        sel.error = f"headless_mode = true: {why}"
        return sel
    sel.headless = name
    if name == "mutter":
        sel.reason = f"headless_mode = true: each session gets a virtual monitor of the " \
                     f"GNOME desktop ({why})"  # fmt: skip
        return sel
    try:
        user = headless.run_as()
    except CompositorError as exc:
        sel.error = f"headless_mode = true: {exc}"
        return sel
    who = f" as user {user[0]}" if user else ""
    sel.reason = f"headless_mode = true: each session gets an output of a headless {name}{who}"
    return sel


def require(env=None) -> Selection:
    """`select()`, raising CaptureError when the session must not start."""
    sel = select(env)
    if sel.error:
        raise CaptureError(sel.error)
    return sel


def methods(env=None) -> list[dict]:
    """`GET /capture/methods`: each backend, whether it works here, and why not.

    `auto` says what it resolves to now (`resolves_to`) or why it resolves to nothing.
    """
    env = os.environ if env is None else env
    sel = select(env)
    why_not = dict(sel.unusable)
    out = []
    for mid, label in METHODS:
        if mid == "auto":
            auto = _auto_view(sel, env)
            out.append({"id": "auto", "label": label, **auto})
            continue
        record = {"id": mid, "label": label, "available": mid not in why_not}
        if mid in why_not:
            record["reason"] = why_not[mid]
        if (mid == sel.backend or (mid == "wlr" and sel.backend == "headless")) and not sel.error:
            record["selected"] = True
        if mid == "portal" and mid not in why_not:
            record["consent"] = portal_consent()
        out.append(record)
    return out


def _auto_view(sel: Selection, env) -> dict:
    if sel.requested == "auto" and not sel.error:
        return {"available": True, "resolves_to": sel.backend}
    if sel.requested == "auto":
        return {"available": False, "reason": sel.error}
    # Not the setting in force: what auto would pick, from the same probes.
    if "wlr" not in sel.unusable:
        return {"available": True, "resolves_to": "wlr"}
    if "kwin" not in sel.unusable:
        return {"available": True, "resolves_to": "kwin"}
    if "gnome" not in sel.unusable:
        return {"available": True, "resolves_to": "gnome"}
    if "portal" not in sel.unusable and (env.get("WAYLAND_DISPLAY") or "").strip():
        return {"available": True, "resolves_to": "portal"}
    if "x11" not in sel.unusable:
        return {"available": True, "resolves_to": "x11"}
    if "xvfb" not in sel.unusable:
        return {"available": True, "resolves_to": "xvfb"}
    return {"available": False, "reason": "neither a reachable X display nor Xvfb"}


def x_display_live(name: str | None) -> bool:
    """Cheap liveness for listings: the local X socket of `name` exists."""
    m = LOCAL_X.match(name or "")
    return bool(m) and os.path.exists(f"/tmp/.X11-unix/X{m.group(1)}")


def grab(x_display: str, region: dict | None = None):
    """One frame (an `mss` ScreenShot: `.size`, `.rgb`, `.bgra`) of an X display, e.g. `:5`."""
    with mss.MSS(display=x_display) as sct:
        return sct.grab(region or sct.monitors[1])
