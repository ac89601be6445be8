"""A private KWin (KDE Plasma's compositor, 5.27 in Debian 12) for capture and input tests:
its own session bus, a 0700 XDG_RUNTIME_DIR, PipeWire and WirePlumber in it, and
`kwin_wayland --virtual` with one output (Virtual-0), on llvmpipe, as root.

KWin hands its screencast and fake-input protocols only to clients a desktop file allows
(X-KDE-Wayland-Interfaces, matched against the client's executable): the fixture writes one
naming this test's own Python interpreter into a private XDG_DATA_HOME, which is exactly
what a person does for the host (docs/kde-capture.md). `grant=None` leaves it out, to see
the refusal. Debian's kwin_wayland carries a file capability (cap_sys_resource) that some
machines refuse to execute; then a plain copy runs, which must keep the name
`kwin_wayland` (its Qt platform plugin loads only for that name).

Every process runs in its own process group; leaving the context ends them all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support import gnome
from tests.support.gnome import Gnome, _wait

TOOLS = ("dbus-daemon", "pipewire", "wireplumber", "kwin_wayland", "gst-launch-1.0")
PRIVILEGED = ("zkde_screencast_unstable_v1", "org_kde_kwin_fake_input",
              "org_kde_plasma_window_management")  # fmt: skip


def missing_tools() -> list[str]:
    """What this machine lacks for a KWin test (scripts/system-deps.sh installs it)."""
    return gnome.missing_tools(TOOLS)


def grant_file(interfaces, executable: str | None = None) -> str:
    """The desktop file that lets `executable` (default: this interpreter, resolved as
    KWin resolves /proc/PID/exe) bind KWin's restricted `interfaces`."""
    exe = os.path.realpath(executable or sys.executable)
    return ("[Desktop Entry]\nType=Application\nName=Game streaming host (test)\n"
            f"Exec={exe}\nNoDisplay=true\n"
            f"X-KDE-Wayland-Interfaces={','.join(interfaces)}\n")  # fmt: skip


class Kde(Gnome):
    """The GNOME fixture's process handling (start, log, stop), with KWin instead of mutter
    and private XDG data, config and cache homes (KWin's config, the desktop file and
    KDE's service cache stay in the temp dir)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.wayland_display = "wayland-kde"
        for sub in ("share/applications", "config", "cache", "bin"):
            (root / sub).mkdir(parents=True)

    @property
    def env(self) -> dict:
        env = super().env
        env.update(
            XDG_DATA_HOME=str(self.root / "share"),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_CACHE_HOME=str(self.root / "cache"),
            XDG_CURRENT_DESKTOP="KDE",
        )
        return env

    @property
    def socket(self) -> str:
        return str(self.runtime_dir / self.wayland_display)

    def boot(self, width: int = 1280, height: int = 720, grant=PRIVILEGED) -> None:
        if grant:
            desktop = self.root / "share/applications/host-test.desktop"
            desktop.write_text(grant_file(grant))
        self.start_session()
        argv = ["--virtual", "--width", str(width), "--height", str(height),
                "--socket", self.wayland_display, "--no-lockscreen", "--no-global-shortcuts",
                "--no-kactivities"]  # fmt: skip
        env = {**self.env, **self._data_dirs()}
        try:
            kwin = self.start("kwin", [shutil.which("kwin_wayland"), *argv], env=env)
        except PermissionError:  # a file capability this machine will not execute
            copy = self.root / "bin/kwin_wayland"
            shutil.copyfile(shutil.which("kwin_wayland"), copy)  # the copy has no capability
            copy.chmod(0o755)
            kwin = self.start("kwin", [str(copy), *argv], env=env)
        _wait("KWin's Wayland socket", Path(self.socket).exists, 20, kwin, self.root / "kwin.log")

    def _data_dirs(self) -> dict:
        """KWin reads the first desktop file naming a client's executable, and Debian's
        python3.11.desktop names /usr/bin/python3.11, the interpreter of a venv made from the
        system Python (a fresh Debian root's): it would hide the grant. A person gives the
        host an interpreter of its own (docs/kde-capture.md); the test interpreter cannot
        change, so this KWin sees /usr/share with those files left out: {} when none."""
        from media.kwin.screencast import ungranted_desktop_files

        system = {"XDG_DATA_HOME": str(self.root / "share"), "XDG_DATA_DIRS": "/usr/share"}
        hidden = {os.path.basename(p) for p in ungranted_desktop_files(env=system)}
        if not hidden and not os.environ.get("KDE_FORCE_VIEW"):
            return {}
        view = self.root / "usr-share"
        view.mkdir()
        for entry in os.listdir("/usr/share"):
            if entry != "applications":
                (view / entry).symlink_to(f"/usr/share/{entry}")
        (view / "applications").mkdir()
        for entry in os.listdir("/usr/share/applications"):
            if entry not in hidden:
                (view / "applications" / entry).symlink_to(f"/usr/share/applications/{entry}")
        return {"XDG_DATA_DIRS": f"/usr/local/share:{view}"}

    def window_uuids(self) -> list[str]:
        """KWin's uuids of the mapped windows, bottom to top (plasma window management,
        itself restricted: the grant must name it)."""
        from media.wayland.client import Display

        found: list[str] = []
        with Display(self.socket) as d:
            wm = d.bind("org_kde_plasma_window_management", 16, 12)
            wm.on(
                "stacking_order_uuid_changed", lambda s: found.extend(u for u in s.split(";") if u)
            )
            d.roundtrip()
        return found

    def app(self, fullscreen: bool = True):
        """The quadrant-painting native client (tests/support/wl_app.py), painted."""
        from tests.support.wl_app import WaylandApp

        app = WaylandApp(self.socket, title="kde-test-app", fullscreen=fullscreen)
        if not app.painted.wait(10):
            app.close()
            raise RuntimeError("the test client was never configured by KWin")
        return app


@contextlib.contextmanager
def running_kde(width: int = 1280, height: int = 720, grant=PRIVILEGED):
    """A booted private KWin; everything ends when the block does."""
    root = Path(tempfile.mkdtemp(prefix="kde-"))
    kde = Kde(root)
    try:
        kde.boot(width, height, grant)
        yield kde
    finally:
        kde.stop()
        shutil.rmtree(root, ignore_errors=True)
