"""A private sway with xdg-desktop-portal in front of it, for the `portal` capture tests: a
headless sway (as `nobody` when we are root: sway refuses root) and, in a session of our own,
a dbus-daemon, a 0700 XDG_RUNTIME_DIR, PipeWire and WirePlumber, xdg-desktop-portal-wlr (the
wlroots backend) and xdg-desktop-portal (the front end a host talks to).

The front end (1.16 in Debian 12) picks a backend by the `UseIn=` line of its .portal file
against XDG_CURRENT_DESKTOP, so the session says `sway`. xdg-desktop-portal-wlr reads the
config file given with `-c`: `chooser_type=none` with `output_name=` picks an output without
asking anyone, and `chooser` here can make it refuse instead (an output that does not exist,
which xdpw answers with response 1). `persist` sets XDPW_PERSIST_MODE, without which xdpw 0.7
never grants persistence (it has no dialog to ask the person about it).

The daemons run as root in their own runtime directory and reach sway through the absolute
path of its Wayland socket (file permissions do not stop root). HOME and the XDG data and
config homes are the desktop's own, so the permission store (activated on the private bus)
writes nowhere else. Everything ends when the context does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from tests.support import gnome
from tests.support.gnome import Gnome, _wait, name_on_bus

NOBODY = (65534, 65534)
PORTAL = "/usr/libexec/xdg-desktop-portal"
XDPW = "/usr/libexec/xdg-desktop-portal-wlr"
TOOLS = ("sway", "dbus-daemon", "pipewire", "wireplumber", "gst-launch-1.0", PORTAL, XDPW)


def missing_tools() -> list[str]:
    """What this machine lacks for a portal capture test (scripts/system-deps.sh installs it)."""
    return gnome.missing_tools(TOOLS)


class PortalDesktop(Gnome):
    """`chooser`: the [screencast] lines of xdpw's config (default: the first output, no
    question asked). `persist`: XDPW_PERSIST_MODE (`permanent`, `transient`, or "" for none).
    `portal`: False boots everything but the front end (a bus where no portal answers)."""

    def __init__(self, root: Path, chooser: str = "", persist: str = "permanent",
                 backends: bool = True):  # fmt: skip
        super().__init__(root)
        self.backends = backends
        self.home = root / "home"
        self.home.mkdir(mode=0o700)
        self.chooser = chooser or "chooser_type=none\noutput_name=HEADLESS-1\n"
        self.persist = persist
        self.sway = None

    @property
    def env(self) -> dict:
        env = super().env
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local/share"),
            XDG_CURRENT_DESKTOP="sway",
            XDG_SESSION_TYPE="wayland",
            WAYLAND_DISPLAY=self.sway.wayland_socket if self.sway else "",
        )
        if not self.backends:  # the front end finds no .portal file: no ScreenCast at all
            env["XDG_DESKTOP_PORTAL_DIR"] = str(self.root / "no-portals")
        if self.persist:
            env["XDPW_PERSIST_MODE"] = self.persist
        else:
            env.pop("XDPW_PERSIST_MODE", None)
        return env

    def boot(self, size: str = "1280x720", portal: bool = True) -> None:
        from displays.sway import SwayCompositor

        self.sway = SwayCompositor(run_as=NOBODY if os.geteuid() == 0 else None,
                                   xwayland=False, owner="portaltest")  # fmt: skip
        self.sway.start()
        name = self.sway.outputs()[0]["name"]
        self.sway.command(f"output {name} mode {size}@60Hz")
        self.output = name
        self.start_session()
        (self.root / "no-portals").mkdir()
        conf = self.root / "xdpw.conf"
        conf.write_text("[screencast]\n" + self.chooser)
        xdpw = self.start("xdpw", [XDPW, "-l", "DEBUG", "-c", str(conf)])
        _wait("xdg-desktop-portal-wlr on the bus",
              lambda: name_on_bus(self.bus_address, "org.freedesktop.impl.portal.desktop.wlr"),
              15, xdpw, self.root / "xdpw.log")  # fmt: skip
        if portal:
            front = self.start("portal", [PORTAL, "--verbose"])
            _wait("xdg-desktop-portal on the bus",
                  lambda: name_on_bus(self.bus_address, "org.freedesktop.portal.Desktop"),
                  15, front, self.root / "portal.log")  # fmt: skip

    def stop(self) -> None:
        # The permission store was started by the bus (activation), not by us: find it by
        # its environment's runtime dir and end it with the rest.
        for pid in activated(self):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        super().stop()
        if self.sway is not None:
            self.sway.stop()


def activated(desk) -> list[int]:
    """Processes the private bus started by activation (xdg-permission-store): they carry this
    desktop's XDG_RUNTIME_DIR but are none of ours."""
    import psutil

    mark = f"XDG_RUNTIME_DIR={desk.runtime_dir}\0".encode()
    ours = {p.pid for p in desk.procs.values()}
    found = []
    for p in psutil.process_iter():
        if p.pid in ours or p.pid == os.getpid():
            continue
        try:
            if mark in Path(f"/proc/{p.pid}/environ").read_bytes() + b"\0":
                found.append(p.pid)
        except OSError:
            continue
    return found


@contextlib.contextmanager
def running_portal(size: str = "1280x720", *, chooser: str = "", persist: str = "permanent",
                   portal: bool = True, backends: bool = True):  # fmt: skip
    """A booted private sway + portal session; everything ends when the block does.
    `backends` False: the front end runs without any backend (no ScreenCast interface)."""
    root = Path(tempfile.mkdtemp(prefix="portal-"))
    desk = PortalDesktop(root, chooser=chooser, persist=persist, backends=backends)
    try:
        desk.boot(size, portal=portal)
        yield desk
    finally:
        desk.stop()
        shutil.rmtree(root, ignore_errors=True)


XDPG = "/usr/libexec/xdg-desktop-portal-gnome"
# Where Debian 12's xdg-desktop-portal-gnome 43 draws its "Screen Share" dialog on a
# 1280x720 monitor (seen in a capture of it): the monitor's row, the Share and Cancel
# buttons, and a point of the dialog's light body (the desktop behind it is dark blue).
DIALOG_ROW, DIALOG_SHARE, DIALOG_CANCEL = (640, 385), (852, 232), (430, 232)
DIALOG_BODY = (640, 470)


def missing_gnome_tools() -> list[str]:
    return gnome.missing_tools((*gnome.TOOLS, PORTAL, XDPG))


@contextlib.contextmanager
def running_gnome_portal(size: str = "1280x720"):
    """A private headless GNOME (tests/support/gnome.py) with xdg-desktop-portal-gnome and the
    front end in its session (XDG_CURRENT_DESKTOP=GNOME). The front end logs verbosely: its
    log says when a screencast session is created and closed."""
    from tests.support.gnome import running_gnome

    with running_gnome(size) as desk:
        home = desk.root / "home"
        home.mkdir(mode=0o700)
        desk.extra_env = {"XDG_CURRENT_DESKTOP": "GNOME", "XDG_SESSION_TYPE": "wayland",
                          "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                          "XDG_DATA_HOME": str(home / ".local/share")}  # fmt: skip
        impl = desk.start("xdpg", [XDPG])
        _wait("xdg-desktop-portal-gnome on the bus",
              lambda: name_on_bus(desk.bus_address, "org.freedesktop.impl.portal.desktop.gnome"),
              15, impl, desk.root / "xdpg.log")  # fmt: skip
        front = desk.start("portal", [PORTAL, "--verbose"])
        _wait("xdg-desktop-portal on the bus",
              lambda: name_on_bus(desk.bus_address, "org.freedesktop.portal.Desktop"),
              15, front, desk.root / "portal.log")  # fmt: skip
        try:
            yield desk
        finally:
            for pid in activated(desk):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 15)


class Person:
    """The person at the GNOME desktop: sees the screen through mutter's own ScreenCast and
    clicks through its RemoteDesktop, as someone at the machine would answer the dialog."""

    def __init__(self, desk):
        from media.framesource import MutterCapture
        from media.mutter.remotedesktop import MutterInput

        self.desk = desk
        self.eyes = MutterCapture("Meta-0", bus_address=desk.bus_address, env=desk.env)
        self.hand = MutterInput("Meta-0", bus_address=desk.bus_address)

    def dialog_shown(self) -> bool:
        x, y = DIALOG_BODY
        b, g, r, _ = (int(v) for v in self.eyes(1280, 720)[y, x])
        return min(r, g, b) > 235  # the dialog's light body, not foot's colour behind it

    def wait_dialog(self, timeout: float = 10.0) -> bool:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.dialog_shown():
                return True
            time.sleep(0.1)
        return False

    def click(self, at: tuple[int, int]) -> None:
        import time

        self.hand.move_absolute(at[0], at[1], 1280, 720)
        time.sleep(0.1)
        self.hand.button(1, True)
        self.hand.button(1, False)
        time.sleep(0.2)

    def share(self) -> None:
        self.click(DIALOG_ROW)
        self.click(DIALOG_SHARE)

    def cancel(self) -> None:
        self.click(DIALOG_CANCEL)

    def close(self) -> None:
        self.eyes.close()
        self.hand.close()
