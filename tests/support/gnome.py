"""A private headless GNOME compositor for capture tests and benches: its own session bus
(dbus-daemon), a 0700 XDG_RUNTIME_DIR, PipeWire and WirePlumber in it, and `mutter --headless`
with one virtual monitor (connector Meta-0), as ../shared/reference/linux-av-recipes.md
measured on Debian 12 (runs as root, no GPU: shared-memory frames only).

Every process starts in its own process group; leaving the context ends each group and every
descendant still alive (foot's shell makes a session of its own, outside foot's group), so a
failed test leaks nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

TOOLS = ("dbus-daemon", "pipewire", "wireplumber", "mutter", "gst-launch-1.0", "foot")


def missing_tools(tools=TOOLS) -> list[str]:
    """What this machine lacks for a test desktop of `tools` (scripts/system-deps.sh installs
    it), with the GStreamer elements every PipeWire capture reads through."""
    from displays.capture import GST_ELEMENTS

    out = [t for t in tools if shutil.which(t) is None]
    if not out:
        for element, package in GST_ELEMENTS:
            if subprocess.run(["gst-inspect-1.0", element], capture_output=True).returncode:
                out.append(f"GStreamer's {element} ({package})")
    return out


SHELL_ENV = "HOST_TEST_GNOME_SHELL"


def shell_argv() -> list[str]:
    """`mutter`, or with HOST_TEST_GNOME_SHELL=1 `gnome-shell` (GNOME Shell 43 takes the same
    headless arguments), so the same tests run by hand against the shell a person's GNOME
    runs (the suite installs mutter only). The shell wants a system bus (it gets the private
    one) and reads logind when /run/systemd/seats exists: a machine without a running systemd
    (a container, this one) hides that directory in a mount namespace of the shell's own,
    so it takes its no-logind path."""
    if os.environ.get(SHELL_ENV) != "1":
        return ["mutter"]
    if os.path.isdir("/run/systemd/seats") and not os.path.isdir("/run/systemd/system"):
        script = 'mount -t tmpfs none /run/systemd && exec gnome-shell "$@"'
        return ["unshare", "-m", "sh", "-c", script, "gnome-shell"]
    return ["gnome-shell"]


def _wait(what: str, ok, timeout: float, proc: subprocess.Popen | None = None, log=None) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if proc is not None and proc.poll() is not None:
            tail = Path(log).read_text(errors="replace")[-800:] if log else ""
            raise RuntimeError(f"{what}: the process exited ({proc.returncode}): {tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready in {timeout:g} s")
        time.sleep(0.05)


def name_on_bus(address: str, name: str) -> bool:
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection

    bus = DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus")
    with open_dbus_connection(address) as conn:
        reply = conn.send_and_get_reply(new_method_call(bus, "NameHasOwner", "s", (name,)))
    return bool(reply.body[0])


class Gnome:
    def __init__(self, root: Path):
        self.root = root
        self.runtime_dir = root / "run"
        self.runtime_dir.mkdir(mode=0o700)
        self.wayland_display = "wayland-test"
        self.bus_address = ""
        self.procs: dict[str, subprocess.Popen] = {}
        self.extra_env: dict[str, str] = {}  # more variables for every process started later

    @property
    def env(self) -> dict:
        """The environment of a client of this desktop (foot, gst-launch, pw-dump)."""
        env = dict(os.environ)
        env.update(
            XDG_RUNTIME_DIR=str(self.runtime_dir),
            DBUS_SESSION_BUS_ADDRESS=self.bus_address,
            WAYLAND_DISPLAY=self.wayland_display,
        )
        env.pop("DISPLAY", None)
        env.pop("PIPEWIRE_REMOTE", None)
        env.update(self.extra_env)
        return env

    def start(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it
        kw.setdefault("stdout", log)
        kw.setdefault("env", self.env)
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stderr=log, start_new_session=True, **kw
        )
        log.close()
        key, n = name, 1
        while key in self.procs:  # a second foot: both are ended at stop()
            n += 1
            key = f"{name}-{n}"
        self.procs[key] = proc
        return proc

    def start_session(self) -> None:
        """The desktop session's services: its bus (dbus-daemon), PipeWire and WirePlumber."""
        dbus = self.start(
            "dbus", ["dbus-daemon", "--session", "--nofork", "--print-address"],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        self.bus_address = dbus.stdout.readline().decode().strip()
        if not self.bus_address:
            raise RuntimeError(f"dbus-daemon gave no address: {self.log('dbus')}")
        pw = self.start("pipewire", ["pipewire"])
        _wait("pipewire", (self.runtime_dir / "pipewire-0").exists, 10, pw,
              self.root / "pipewire.log")  # fmt: skip
        self.start_wireplumber()

    def start_wireplumber(self) -> subprocess.Popen:
        """WirePlumber, the session manager that links a capture to its stream, with its
        Bluetooth monitor off: that monitor needs systemd-logind, and WirePlumber 0.4 quits
        when logind cannot be watched (a fresh Debian root has no /run/systemd; measured),
        leaving every stream unlinked. A person's desktop runs its own."""
        conf = self.root / "wireplumber-config"
        (conf / "wireplumber/bluetooth.lua.d").mkdir(parents=True, exist_ok=True)
        (conf / "wireplumber/bluetooth.lua.d/80-no-bluez.lua").write_text(
            "bluez_monitor.enabled = false\n"
        )
        proc = self.start("wireplumber", ["wireplumber"],
                          env={**self.env, "XDG_CONFIG_HOME": str(conf)})  # fmt: skip
        time.sleep(0.3)
        if proc.poll() is not None:
            raise RuntimeError(f"wireplumber exited ({proc.returncode}): {self.log('wireplumber')}")
        return proc

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def boot(self, size: str) -> None:
        self.start_session()
        mutter = self.start(
            "mutter",
            [*shell_argv(), "--headless", "--virtual-monitor", size, "--wayland", "--no-x11",
             "--wayland-display", self.wayland_display],
            env={**self.env, "DBUS_SYSTEM_BUS_ADDRESS": self.bus_address},
        )  # fmt: skip
        _wait(
            "mutter's ScreenCast on the bus",
            lambda: name_on_bus(self.bus_address, "org.gnome.Mutter.ScreenCast"),
            20, mutter, self.root / "mutter.log",
        )  # fmt: skip
        _wait("mutter's Wayland socket", (self.runtime_dir / self.wayland_display).exists, 5)
        if os.environ.get(SHELL_ENV) == "1":
            self.leave_overview()

    def leave_overview(self) -> None:
        """GNOME Shell starts in the overview, which takes the keyboard and pointer: leave it
        with Escape, as the person at the desktop would."""
        from media.mutter.remotedesktop import MutterInput

        time.sleep(2.0)  # the startup animation
        with MutterInput("Meta-0", bus_address=self.bus_address) as inp:
            inp.key(0x1B, True)  # VK_ESCAPE
            inp.key(0x1B, False)
        time.sleep(1.0)  # the overview's closing animation

    def foot(self, background: str, command: list[str]) -> subprocess.Popen:
        """A fullscreen foot (native Wayland) filled with `background` (RRGGBB): a known
        colour on the whole monitor, no padding, the cursor cell at the top left."""
        conf = self.root / "foot.ini"
        conf.write_text(f"[main]\npad=0x0\n[colors]\nbackground={background}\n")
        return self.start("foot", ["foot", "--config", str(conf), "--fullscreen", *command])

    def stop(self) -> None:
        procs = list(self.procs.values())
        family = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                family += psutil.Process(proc.pid).children(recursive=True)
        # Clients first (foot, then mutter's), the daemons last: no reconnect storms.
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            if proc.stdout:
                proc.stdout.close()
        for child in family:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(family, timeout=5)


@contextlib.contextmanager
def running_gnome(size: str = "1280x720"):
    """A booted private GNOME (mutter) desktop; everything ends when the block does."""
    root = Path(tempfile.mkdtemp(prefix="gnome-"))
    gnome = Gnome(root)
    try:
        gnome.boot(size)
        yield gnome
    finally:
        gnome.stop()
        shutil.rmtree(root, ignore_errors=True)


def gst_pipelines(desk) -> list[int]:
    """Live gst-launch processes reading this desktop's PipeWire (by their runtime dir)."""
    mark = f"XDG_RUNTIME_DIR={desk.runtime_dir}".encode()
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            if (
                p.info["name"].startswith("gst-launch")
                and p.status() != psutil.STATUS_ZOMBIE
                and mark + b"\0" in Path(f"/proc/{p.pid}/environ").read_bytes() + b"\0"
            ):
                found.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return found
