"""A client of KWin's screencast protocol (zkde_screencast_unstable_v1) on our Wayland client.

KWin streams an output (or a virtual output it creates for the stream) into PipeWire and
tells the client the node id (`created`); the stream lives as long as the client's stream
object and connection, so each `KWinScreenCast` holds ONE Wayland connection from the
request until `close`. KWin offers the protocol only to privileged clients (a desktop file
naming the client's executable with X-KDE-Wayland-Interfaces, or a compositor started with
KWIN_WAYLAND_NO_PERMISSION_CHECKS=1; docs/kde-capture.md): to anyone else it is simply
absent from the registry, which `ScreenCastRefused` reports as such.
"""

from __future__ import annotations

import os
import sys

from media.wayland.client import Display, MissingGlobal, WaylandError
from media.wayland.protocols import KDE_POINTER_EMBEDDED

SCREENCAST = "zkde_screencast_unstable_v1"
VIRTUAL_SINCE = 2  # stream_virtual_output


class KWinScreenCastError(WaylandError):
    """The stream could not be set up or went away; the message names why."""


class ScreenCastRefused(KWinScreenCastError):
    """KWin does not offer zkde_screencast_unstable_v1 to this client."""


def refused_reason(path: str) -> str:
    return (
        f"the compositor at {path} does not offer {SCREENCAST} to this process: KWin "
        "gives it only to clients a desktop file allows (X-KDE-Wayland-Interfaces, "
        "docs/kde-capture.md), or it is not KWin"
    ) + grant_hint()


def grant_hint() -> str:
    """What to add to a refusal when another desktop file may be hiding the host's grant."""
    others = ungranted_desktop_files()
    if not others:
        return ""
    return (
        f"; {', '.join(others[:3])} also names this interpreter "
        f"({os.path.realpath(sys.executable)}) without the grant, and KWin may read that one: "
        "give the host an interpreter of its own (python3 -m venv --copies) and name it in Exec="
    )


def ungranted_desktop_files(exe: str | None = None, env=None) -> list[str]:
    """Desktop files in the XDG application directories whose Exec= names `exe` (this
    interpreter) and that grant no Wayland interface. KWin takes the first desktop file that
    names a client's executable, so such a file (Debian's python3.11.desktop names
    /usr/bin/python3.11) can hide the host's grant: measured on a Debian 12 root."""
    env = os.environ if env is None else env
    exe = os.path.realpath(exe or sys.executable)
    home = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or "/", ".local/share")
    dirs = [home, *(env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")]
    found = []
    for base in dirs:
        apps = os.path.join(base, "applications")
        try:
            names = sorted(n for n in os.listdir(apps) if n.endswith(".desktop"))
        except OSError:
            continue
        for name in names[:5000]:
            path = os.path.join(apps, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read(65536)
            except OSError:
                continue
            words = next((ln[5:].split() for ln in text.splitlines() if ln.startswith("Exec=")),
                         [])  # fmt: skip
            if (words and os.path.realpath(words[0]) == exe
                    and "X-KDE-Wayland-Interfaces=" not in text):  # fmt: skip
                found.append(path)
    return found


class KWinScreenCast:
    """A PipeWire stream of one KWin output (`output`, a wl_output name such as "Virtual-0"
    or "DP-1"; None for the only one), of one window (`window`, KWin's window uuid), or,
    with `virtual_size` (width, height), of a new virtual output named `virtual_name` that
    exists as long as the stream. After the constructor returns, `node_id` is the PipeWire
    node and `width`/`height` the output's size (0 for a window: the stream says).

    KWin 5.27 sends an output's frames when its backend reports a presented frame, which
    only the DRM (a real desktop) and nested-Wayland backends do: on `kwin_wayland
    --virtual` an output stream is created but never sends a frame, while a window stream
    (sent on the window's damage) does. Virtual outputs exist only on the DRM backend;
    elsewhere KWin answers "Could not find output" (docs/kde-capture.md)."""

    def __init__(
        self,
        wayland_socket: str,
        output: str | None = None,
        *,
        window: str | None = None,
        virtual_size: tuple[int, int] | None = None,
        virtual_name: str = "host-stream",
        pointer: int = KDE_POINTER_EMBEDDED,
        timeout: float = 5.0,
    ):
        self.wayland_socket, self.output = wayland_socket, output
        self.node_id: int | None = None
        self.width = self.height = 0
        self._timeout = timeout
        self._failed: str | None = None
        self._closed_by_kwin = False
        self._stream = None
        self._label = "the stream"
        self._d = Display(wayland_socket, timeout=timeout)
        try:
            self._start(output, window, virtual_size, virtual_name, pointer)
        except BaseException:
            self.close()
            raise

    def _start(self, output, window, virtual_size, virtual_name: str, pointer: int) -> None:
        d = self._d
        try:
            mgr = self._mgr = d.bind(SCREENCAST, 3)
        except MissingGlobal as exc:
            raise ScreenCastRefused(refused_reason(d.path)) from exc
        if window is not None:
            if not isinstance(window, str) or not window or len(window) > 64:
                raise KWinScreenCastError(f"window {window!r} is not a KWin window uuid")
            self.output, self._label = window, f"window {window}"
            stream = mgr.request("stream_window", window, pointer)
        elif virtual_size is not None:
            width, height = (int(v) for v in virtual_size)
            if not (0 < width <= 8192 and 0 < height <= 8192):
                raise KWinScreenCastError(f"virtual output size {width}x{height} is out of range")
            if mgr.version < VIRTUAL_SINCE:
                raise KWinScreenCastError(
                    f"KWin offers {SCREENCAST} version {mgr.version}: no virtual outputs"
                )
            self.output, self._label = virtual_name, f"virtual output {virtual_name}"
            stream = mgr.request("stream_virtual_output", virtual_name, width, height, 1.0, pointer)
            self.width, self.height = width, height
        else:
            head = d.output(output)
            self.output, self.width, self.height = head.name, head.width, head.height
            self._label = f"output {head.name}"
            stream = mgr.request("stream_output", head.proxy, pointer)
        self._stream = stream
        stream.on("created", lambda node: setattr(self, "node_id", node))
        stream.on("failed", lambda error: setattr(self, "_failed", error or "no reason given"))
        stream.on("closed", lambda: setattr(self, "_closed_by_kwin", True))
        what = f"KWin's stream of {self._label}"
        try:
            d.wait_for(lambda: self.node_id is not None or self._failed or self._closed_by_kwin,
                       self._timeout, f"{what} (created)")  # fmt: skip
        except WaylandError as exc:
            raise KWinScreenCastError(
                f"{exc} (is PipeWire running in KWin's XDG_RUNTIME_DIR?)"
            ) from exc
        if self._failed:
            raise KWinScreenCastError(f"KWin refused {what}: {self._failed}")
        if self.node_id is None:
            raise KWinScreenCastError(f"KWin closed {what} before it started")

    def ended(self) -> str | None:
        """Why the stream has ended (KWin closed it, or the compositor went away), or None
        while it runs. Never blocks: it reads what KWin has already sent."""
        if self._d.closed and self._stream is None:
            return "closed"
        try:
            self._d.dispatch(0)
        except WaylandError as exc:
            return f"the KWin connection ended ({exc})"
        if self._closed_by_kwin:
            return f"KWin closed the stream of {self._label}"
        if self._failed:
            return f"KWin's stream of {self._label} failed: {self._failed}"
        return None

    def close(self) -> None:
        """Close the stream (KWin removes its node; a virtual output goes with it) and the
        connection; safe to call twice, and when KWin is already gone."""
        stream, self._stream = self._stream, None
        if self._d.closed:
            return
        try:
            if stream is not None:
                stream.request("close")
            self._mgr.request("destroy")
            self._d.roundtrip(self._timeout)  # KWin has handled the close before we hang up
        except (WaylandError, AttributeError, OSError):
            pass  # KWin went away (or never bound): the stream went with it
        finally:
            self._d.close()
