"""A private headless sway: virtual outputs at a client's mode, apps launched onto them.

`SwayCompositor.start()` runs sway with the headless backend and the pixman renderer in its own
session (process group). Its files live in a directory of the host (`base_dir`: the config,
the log, the launch scripts), which holds the compositor's runtime directory (`runtime_dir`,
XDG_RUNTIME_DIR, 0700 and the compositor user's: its Wayland and IPC sockets, the pid files of
launches). The host never writes into the user's directory, and reads from it only with
O_NOFOLLOW, trusting nothing it finds there: a pid an app reports is checked (`launch`).
Every process it starts — Xwayland, swaybg, launched apps, which sway double-forks out of its
group — inherits `HOST_COMPOSITOR_OWNER=<owner>:<id>`, and `stop()` kills the group and then
every process carrying the token, so nothing outlives it; `kill_owned(owner + ":",
prefix=True)` sweeps what a crashed host left behind.

sway refuses to run as root. The host should run as the desktop user; `run_as=(uid, gid)` runs
sway (and so its apps) as another user through setpriv, which needs root (a headless box, CI:
`HOST_COMPOSITOR_USER`). Every app launched into a stream runs as that user, so everything that
user can write is hostile to the root host: `base_dir` stays root's (group: the user's, 0750),
files are created with O_EXCL|O_NOFOLLOW, and only processes of that user are ever signalled.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence

from common import procs
from media.wayland.swayipc import SwayCommandError, SwayIPC, SwayIPCError, views

log = logging.getLogger(__name__)

OWNER_ENV = "HOST_COMPOSITOR_OWNER"
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
PARK_GAP = 1000  # px between the live outputs and parked ones: the pointer cannot cross it


def repaint_rate(refresh: int) -> int:
    """The output refresh (Hz) to ask sway for so its headless output repaints at least
    `refresh` times a second. wlroots' headless backend (0.15, Debian 12) re-arms its frame
    timer for `1000 // refresh` ms after each commit, so a frame takes that plus the render
    and copy time: 16 ms + 1-2 ms at 60 Hz, under 60 fps (measured: 57.7 fps at 1080p). Two
    milliseconds less on the timer leave room for the render (60 -> 71 Hz: 63 fps measured at
    1080p); the stream still takes frames at the client's rate, and an app on the output sees
    a slightly faster monitor."""
    delay_ms = max(1, 1000 // max(1, refresh) - 2)
    return max(refresh, 1000 // delay_ms)


X11_SOCKET_DIR = "/tmp/.X11-unix"
ROOT_REFUSAL = "sway refuses to run as root; run the host as your desktop user"


class CompositorError(RuntimeError):
    """The compositor cannot be started, reached or told to do something."""


def available() -> bool:
    return shutil.which("sway") is not None


def owned_pids(token: str, *, prefix: bool = False) -> list[int]:
    """Processes whose environment carries OWNER_ENV=token (ours, or any user's as root);
    with `prefix`, every value that starts with `token` (all compositors of one owner).
    As root, never a process with root among its uids: the compositor and its apps run as
    another user, and any of them can put the token into a setuid program's environment."""
    marker = f"{OWNER_ENV}={token}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
            if os.geteuid() == 0 and 0 in _uids(int(entry)):
                continue
        except OSError:
            continue  # gone, or another user's process we may not read (not ours then)
        for var in env.split(b"\0"):
            if var == marker or (prefix and var.startswith(marker)):
                pids.append(int(entry))
                break
    return pids


def _uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem uid of `pid` (OSError when it is gone)."""
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"Uid:"):
                return [int(u) for u in line.split()[1:]]
    raise OSError(f"no Uid line for {pid}")


def kill_owned(token: str, grace: float = STOP_GRACE_S, *, prefix: bool = False) -> list[int]:
    """SIGTERM every process carrying the token (see owned_pids), SIGKILL what is left after
    `grace`; the pids. `kill_owned(owner + ":", prefix=True)` at host start sweeps what a
    crashed host left of its compositors."""
    pids = owned_pids(token, prefix=prefix)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while any(procs.alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in [p for p in pids if procs.alive(p)] + owned_pids(token, prefix=prefix):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return pids


class SwayCompositor:
    """One headless sway. Not started by the constructor: call `start()`; `stop()` always."""

    def __init__(
        self,
        *,
        run_as: tuple[int, int] | None = None,
        background: str = "#000000",
        initial_outputs: int = 1,
        fullscreen_apps: bool = True,
        xwayland: bool = True,
        extra_config: str = "",  # trusted: the operator's own sway config lines, never API input
        env: Mapping[str, str] | None = None,
        owner: str = "host",
        start_timeout: float = START_TIMEOUT_S,
    ):
        if background and not re.fullmatch(r"#[0-9a-fA-F]{6}", background):
            raise CompositorError(f"background {background!r} is not a #RRGGBB colour")
        self.run_as = run_as
        self.background = background
        self.initial_outputs = initial_outputs
        self.fullscreen_apps = fullscreen_apps
        self.xwayland = xwayland
        self.extra_config = extra_config
        self.extra_env = dict(env or {})
        self.start_timeout = start_timeout
        if ":" in owner or "\0" in owner:
            raise CompositorError("owner may not contain ':' or NUL")
        self.owner = owner
        self.token = f"{owner}:{uuid.uuid4().hex}"  # unique; `owner:` prefixes all of one host
        self.runtime_dir: str | None = None
        self.wayland_socket: str | None = None  # absolute path
        self.ipc_socket: str | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: str | None = None
        self._ipc: SwayIPC | None = None
        self.base_dir: str | None = None  # the host's: config, log, launch scripts
        self._lock = threading.Lock()
        self._retired: list[str] = []
        self._pid: int | None = None  # attached (see `attach`): sway runs under another process

    @classmethod
    def attach(cls, record: Mapping) -> SwayCompositor:
        """A handle on a sway another process of this host started (`record()` of it): the
        host's processes share one headless compositor. IPC is connected now; `stop()` ends it
        by pid and token. Outputs parked by any process count as retired."""
        comp = cls(run_as=tuple(record["run_as"]) if record.get("run_as") else None,
                   owner=str(record["token"]).split(":", 1)[0])  # fmt: skip
        comp.token = str(record["token"])
        comp.runtime_dir = record["runtime_dir"]
        comp.base_dir = record.get("base_dir") or comp.runtime_dir
        comp.wayland_socket = record["wayland_socket"]
        comp.ipc_socket = record["ipc_socket"]
        comp._pid = int(record["pid"])
        comp.xwayland = bool(record.get("xwayland", True))
        comp.log_path = os.path.join(comp.base_dir, "sway.log")
        if not comp.alive():
            raise CompositorError(f"sway (pid {comp._pid}) is not running")
        try:
            comp._ipc = SwayIPC(comp.ipc_socket, peer_pid=comp._pid)
            comp._ipc.get_version()
        except SwayIPCError as e:
            comp._ipc = None
            raise CompositorError(f"sway is not answering: {e}") from e
        comp.refresh_retired()
        return comp

    def detach(self) -> None:
        """Drop this handle's IPC connection; the compositor runs on (see `attach`)."""
        if self._ipc is not None:
            self._ipc.close()
            self._ipc = None

    def record(self) -> dict:
        """What another process needs to `attach` to this compositor."""
        return {"pid": self.pid, "token": self.token, "runtime_dir": self.runtime_dir,
                "base_dir": self.base_dir,
                "wayland_socket": self.wayland_socket, "ipc_socket": self.ipc_socket,
                "run_as": list(self.run_as) if self.run_as else None,
                "xwayland": self.xwayland}  # fmt: skip

    def refresh_retired(self, in_use: set[str] = frozenset()) -> list[str]:
        """Retired outputs as sway shows them now (parked below the live ones, or disabled),
        less `in_use`: what another process retired is re-usable here too."""
        floor = 4320 + PARK_GAP
        with self._lock:
            self._retired = sorted(
                o["name"]
                for o in self.outputs()
                if o["name"] not in in_use and (not o.get("active") or o["rect"]["y"] >= floor)
            )
            return list(self._retired)

    # -- lifetime ---------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else self._pid

    @property
    def wayland_display(self) -> str | None:
        """The socket's name under runtime_dir (what WAYLAND_DISPLAY holds for clients)."""
        return os.path.basename(self.wayland_socket) if self.wayland_socket else None

    def alive(self) -> bool:
        if self.proc is None:
            return self._pid is not None and procs.alive(self._pid)
        return self.proc.poll() is None

    def start(self) -> None:
        if self.proc is not None:
            raise CompositorError("this compositor was started already")
        if os.geteuid() == 0 and self.run_as is None:
            raise CompositorError(ROOT_REFUSAL)
        exe = shutil.which("sway")
        if exe is None:
            raise CompositorError("sway is not installed (Debian package sway)")
        if self.run_as is not None and os.geteuid() != 0:
            raise CompositorError("run_as needs root (it is a testing aid)")
        if self.xwayland and os.geteuid() == 0 and not os.path.isdir(X11_SOCKET_DIR):
            # as X servers expect it (root's, sticky, world-writable), not created by the
            # unprivileged compositor on a fresh machine
            os.makedirs(X11_SOCKET_DIR, exist_ok=True)
            os.chmod(X11_SOCKET_DIR, 0o1777)
        # The host's directory (0700, or 0750 with the compositor user's group so sway reads
        # its config and the launch scripts), and in it the user's runtime directory.
        self.base_dir = tempfile.mkdtemp(prefix="host-sway-")
        self.runtime_dir = os.path.join(self.base_dir, "run")
        os.mkdir(self.runtime_dir, 0o700)
        gid = None
        if self.run_as is not None:
            uid, gid = self.run_as
            os.chown(self.base_dir, -1, gid)
            os.chmod(self.base_dir, 0o750)
            os.chown(self.runtime_dir, uid, gid)
        config = os.path.join(self.base_dir, "config")
        _create(config, self._config().encode(), gid)
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": self.runtime_dir if self.run_as else os.environ.get("HOME", self.runtime_dir),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "XDG_RUNTIME_DIR": self.runtime_dir,
            "WLR_BACKENDS": "headless",
            "WLR_RENDERER": "pixman",
            "WLR_LIBINPUT_NO_DEVICES": "1",
            "WLR_HEADLESS_OUTPUTS": str(self.initial_outputs),
            OWNER_ENV: self.token,
            **self.extra_env,
        }
        argv = [exe, "-c", config]
        if self.run_as is not None:
            uid, gid = self.run_as
            setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
            argv = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]
        self.log_path = os.path.join(self.base_dir, "sway.log")
        with os.fdopen(_create(self.log_path, b"", None, keep_open=True), "wb") as logf:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=self.runtime_dir,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _config(self) -> str:
        lines = [
            f"xwayland {'enable' if self.xwayland else 'disable'}",
            "default_border none",
            "default_floating_border none",
            "focus_follows_mouse no",
        ]
        if self.background and shutil.which("swaybg"):
            lines.append(f"output * bg {self.background} solid_color")
        if self.fullscreen_apps:
            lines.append('for_window [shell="xdg_shell"] fullscreen enable')
            lines.append('for_window [shell="xwayland"] fullscreen enable')
        if self.extra_config:
            lines.append(self.extra_config)
        return "\n".join(lines) + "\n"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise CompositorError(
                    f"sway exited at start ({self.proc.returncode}): {self._tail()}"
                )
            if self.wayland_socket is None:
                found = [
                    p
                    for p in sorted(glob.glob(os.path.join(self.runtime_dir, "wayland-*")))
                    if not p.endswith(".lock")
                ]
                self.wayland_socket = found[0] if found else None
            if self.ipc_socket is None:
                found = glob.glob(os.path.join(self.runtime_dir, f"sway-ipc.*.{self.pid}.sock"))
                self.ipc_socket = found[0] if found else None
            if self.wayland_socket and self.ipc_socket:
                try:
                    self._ipc = SwayIPC(self.ipc_socket, peer_pid=self.pid)
                    self._ipc.get_version()
                except SwayIPCError:
                    self._ipc = None
                else:
                    # Pin the outputs sway started with, so outputs created later do not
                    # push them around (sway re-places outputs that have no position).
                    for o in self.outputs():
                        r = o["rect"]
                        self.command(f"output {o['name']} pos {r['x']} {r['y']}")
                    return
            time.sleep(0.05)
        raise CompositorError(f"sway did not come up in {self.start_timeout:.0f} s: {self._tail()}")

    def _tail(self, lines: int = 5) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-lines:])
        except (OSError, TypeError):
            return "(no log)"

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Stop sway, its Xwayland and everything launched in it; idempotent."""
        if self._ipc is not None:
            self._ipc.close()
            self._ipc = None
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.wait(grace)
        if self.proc is None and self._pid is not None and self._pid in owned_pids(self.token):
            try:
                os.killpg(self._pid, signal.SIGTERM)  # sway leads its own session
            except OSError:
                pass
        kill_owned(self.token, grace)
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group's stragglers, if any
            except OSError:
                pass
        for d in (self.base_dir, self.runtime_dir):
            if d and os.path.isdir(d):
                shutil.rmtree(d, ignore_errors=True)  # fd-based: follows no link of the user

    def __enter__(self) -> SwayCompositor:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- IPC --------------------------------------------------------------------------------
    @property
    def ipc(self) -> SwayIPC:
        if self._ipc is None:
            raise CompositorError("sway is not running")
        return self._ipc

    def command(self, command: str) -> list[dict]:
        """Run sway commands; CompositorError (with sway's reason) when refused or gone."""
        try:
            return self.ipc.run_command(command)
        except SwayCommandError as e:
            raise CompositorError(str(e)) from e
        except SwayIPCError as e:
            raise CompositorError(f"sway is not answering: {e}") from e

    def outputs(self) -> list[dict]:
        """sway's get_outputs: name, active, rect, current_mode... for every output."""
        try:
            return self.ipc.get_outputs()
        except SwayIPCError as e:
            raise CompositorError(f"sway is not answering: {e}") from e

    def output(self, name: str) -> dict:
        for o in self.outputs():
            if o.get("name") == name:
                return o
        raise CompositorError(f"sway has no output {name!r}")

    def create_output(
        self,
        width: int,
        height: int,
        refresh: int = 60,
        *,
        x: int | None = None,
        y: int = 0,
    ) -> str:
        """A new headless output at width x height @ refresh Hz, placed at (x, y) (right of
        the others when x is None); its name. An output retired earlier is re-used."""
        for v, what in ((width, "width"), (height, "height"), (refresh, "refresh")):
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 16384:
                raise CompositorError(f"output {what} {v!r} is out of range")
        with self._lock:
            if self._retired:
                name = self._retired.pop(0)
            else:
                before = {o["name"] for o in self.outputs()}
                self.command("create_output")
                new = [o["name"] for o in self.outputs() if o["name"] not in before]
                if len(new) != 1:
                    raise CompositorError(f"create_output made {len(new)} outputs, expected one")
                name = new[0]
            if x is None:
                x = max(
                    (
                        o["rect"]["x"] + o["rect"]["width"]
                        for o in self.outputs()
                        if o.get("active") and o["name"] != name and o["name"] not in self._retired
                    ),
                    default=0,
                )
            self.configure_output(name, width, height, refresh, x=x, y=y)
            return name

    def configure_output(
        self, name: str, width: int, height: int, refresh: int = 60, *, x: int = 0, y: int = 0
    ) -> None:
        """Enable `name` at the mode and position given."""
        self._check_name(name)
        self.command(
            f"output {name} enable mode {int(width)}x{int(height)}@{int(refresh)}Hz "
            f"pos {int(x)} {int(y)}"
        )

    def disable_output(self, name: str) -> None:
        """Turn an output off (it keeps existing and can be configured again);
        CompositorError when sway accepts the command but the output stays on (sway 1.7's
        headless outputs fail to commit a disable)."""
        self._check_name(name)
        self.command(f"output {name} disable")
        if self.output(name).get("active"):
            raise CompositorError(f"sway could not disable output {name} (see {self.log_path})")

    def retire_output(self, name: str) -> str:
        """Take an output away after its session: unplug it where sway can (1.8+); else
        disable it; else (sway 1.7 headless) park it: 640x360 at 1 Hz, below the live
        outputs, so it costs next to nothing. A disabled or parked output is re-used by the
        next create_output. Returns what was done: "unplugged", "disabled" or "parked"."""
        self._check_name(name)
        try:
            self.command(f"output {name} unplug")
            return "unplugged"
        except CompositorError:
            pass
        try:
            self.disable_output(name)
            how = "disabled"
        except CompositorError:
            self._park(name)
            how = "parked"
        with self._lock:
            if name not in self._retired:
                self._retired.append(name)
        return how

    def _park(self, name: str) -> None:
        """640x360 at 1 Hz, in a row PARK_GAP below the live outputs. Not off to the side:
        Xwayland's screen spans the whole layout and X11 coordinates end at 32767, so a far
        parked output breaks pointer input for every X11 app."""
        outs = [o for o in self.outputs() if o["name"] != name]
        live = [o for o in outs if o["name"] not in self._retired and o.get("active")]
        # below any output a client can ask for (8K is 4320 tall), so new ones never overlap
        y = max([o["rect"]["y"] + o["rect"]["height"] for o in live] + [4320]) + PARK_GAP
        taken = {o["rect"]["x"] for o in outs if o["name"] in self._retired}
        x = next(i * 640 for i in range(len(taken) + 1) if i * 640 not in taken)
        self.configure_output(name, 640, 360, 1, x=x, y=y)

    def focus_output(self, name: str) -> None:
        self._check_name(name)
        self.command(f"focus output {name}")

    @staticmethod
    def _check_name(name: str) -> None:
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise CompositorError(f"output name {name!r} is not valid")

    # -- apps -------------------------------------------------------------------------------
    def xwayland_display(self, timeout: float = 5.0) -> str | None:
        """ ":N" of sway's Xwayland (the X socket sway holds; Xwayland itself starts when the
        first X client connects), or None when there is none after `timeout` seconds."""
        if not self.xwayland:
            return None
        deadline = time.monotonic() + timeout
        while self.alive():
            for lock in glob.glob("/tmp/.X*-lock"):
                try:
                    with open(lock) as f:
                        holder = int(f.read().replace("\0", "").strip() or 0)
                except (OSError, ValueError):
                    continue
                if holder == self.pid:
                    return ":" + os.path.basename(lock)[2:-5]
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return None

    def launch(
        self,
        command: str | Sequence[str],
        output: str,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        cwd: str = "",
    ) -> int:
        """Start `command` inside sway on `output`: an argv list, or one shell command line
        (it is run with `exec`, so no `&&` or `;`). It runs as the compositor's user with its
        environment (WAYLAND_DISPLAY, and DISPLAY of sway's Xwayland for X11 apps) plus `env`;
        its windows open on that output's workspace, fullscreen when `fullscreen_apps`.
        Returns the app's pid (see `wait_window`)."""
        self._check_name(output)
        cmd = command if isinstance(command, str) else shlex.join(command)
        tag = uuid.uuid4().hex  # not guessable ahead: nothing can be planted under it
        pidfile = os.path.join(self.runtime_dir, f"launch-{tag}.pid")  # the user's to write
        script = os.path.join(self.base_dir, f"launch-{tag}.sh")  # the host's
        exports = "".join(
            f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items() if _env_name(k)
        )
        text = (f"cd {shlex.quote(cwd)} || exit 1\n" if cwd else "") + exports
        text += f"echo $$ > {shlex.quote(pidfile)}.tmp\n"
        text += f"mv {shlex.quote(pidfile)}.tmp {shlex.quote(pidfile)}\n"
        text += f"exec {cmd}\n"
        _create(script, text.encode(), self.run_as[1] if self.run_as else None)
        uid = self.run_as[0] if self.run_as else os.geteuid()
        since = _boot_ticks()
        refused = ""
        try:
            # sway remembers the workspace focused when `exec` ran and opens the app's windows
            # (by pid and its children) there.
            self.command(f"focus output {output}; exec /bin/sh {script}")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                pid = _read_pid(pidfile, uid)
                if pid is not None:
                    refused = self._not_launched(pid, uid, since)
                    if not refused:
                        return pid
                if not self.alive():
                    break
                time.sleep(0.02)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(script)
        why = f" ({refused})" if refused else ""
        raise CompositorError(f"the app did not start in sway within {timeout:.0f} s{why}: {cmd}")

    def _not_launched(self, pid: int, uid: int, since: int) -> str:
        """Why `pid` (what a launch's pid file says: the compositor user wrote it, so any
        number) is not the app this launch started, "" when it is: a process of the
        compositor's user, all of whose uids are that user, carrying this compositor's token,
        started after the launch began, in a process group (sway's `exec` makes a session)
        that is neither sway's nor the host's and holds processes of that user alone. The
        host signals that group at the session's end: it must be the app's own."""
        info = _proc(pid)
        if info is None:
            return f"pid {pid} is not running"
        if set(info["uids"]) != {uid}:
            return f"pid {pid} is not a process of the compositor's user"
        if info["start"] < since:
            return f"pid {pid} started before this launch"
        marker = f"{OWNER_ENV}={self.token}".encode()
        if marker not in info["environ"]:
            return f"pid {pid} is not a process of this compositor"
        pgid = info["pgrp"]
        if pgid <= 1 or pgid in (os.getpgrp(), self.pid) or info["session"] != pgid:
            return f"pid {pid} is not in a process group of its own"
        if not group_only_of(pgid, uid):
            return f"the process group of pid {pid} holds another user's process"
        return ""

    def app_env(self) -> dict[str, str]:
        """What a client of this compositor needs in its environment (to run one ourselves as
        the compositor's user; `launch` gives apps sway's own environment instead)."""
        env = {
            "XDG_RUNTIME_DIR": self.runtime_dir or "",
            "WAYLAND_DISPLAY": self.wayland_display or "",
            OWNER_ENV: self.token,
        }
        x = self.xwayland_display(timeout=0)
        if x:
            env["DISPLAY"] = x
        return env

    def wait_window(self, pid: int, output: str | None = None, timeout: float = 30.0) -> dict:
        """The first window of `pid` or one of its descendants (on `output` when given);
        CompositorError if none maps within `timeout` s, if the app exits first, or if sway
        dies."""
        deadline = time.monotonic() + timeout
        while True:
            for w in self.windows():
                if (output is None or w["output"] == output) and _descends(w.get("pid"), pid):
                    return w
            if not self.alive():
                raise CompositorError(f"sway died before app {pid} mapped a window")
            if not procs.alive(pid):
                raise CompositorError(f"app {pid} exited without mapping a window")
            if time.monotonic() > deadline:
                raise CompositorError(f"app {pid} mapped no window in {timeout:.0f} s")
            time.sleep(0.05)

    def windows(self) -> list[dict]:
        """Every mapped window: pid, app_id (Wayland) or window_properties (X11), output,
        rect, fullscreen_mode."""
        try:
            return views(self.ipc.get_tree())
        except SwayIPCError as e:
            raise CompositorError(f"sway is not answering: {e}") from e


def _descends(pid: int | None, ancestor: int) -> bool:
    """`pid` is `ancestor` or one of its descendants (through /proc's parent links)."""
    for _ in range(64):
        if not pid:
            return False
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _env_name(name: str) -> bool:
    if not name or not (name[0].isalpha() or name[0] == "_"):
        raise CompositorError(f"environment name {name!r} is not valid")
    if not all(c.isalnum() or c == "_" for c in name):
        raise CompositorError(f"environment name {name!r} is not valid")
    return True


def _create(path: str, data: bytes, gid: int | None, *, keep_open: bool = False):
    """A new file of the host (O_EXCL|O_NOFOLLOW: never one planted there), 0640 with `gid` as
    its group (the compositor user's, who must read it) or 0600; its descriptor with
    `keep_open`, else None."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        if gid is not None:
            os.fchown(fd, -1, gid)
            os.fchmod(fd, 0o640)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        raise
    if keep_open:
        return fd
    os.close(fd)
    return None


def _read_pid(path: str, uid: int) -> int | None:
    """The number in a pid file the compositor user writes: a regular file of that user, read
    without following a link and without blocking on a FIFO; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            return None
        raw = os.read(fd, 32)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and 1 < int(text) < 2**22 + 1 else None


def _boot_ticks() -> int:
    """Now, in the clock of /proc/<pid>/stat's start time (ticks since boot), less one tick."""
    hz = os.sysconf("SC_CLK_TCK")
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * hz) - 1


def _proc(pid: int) -> dict | None:
    """uids (real, effective, saved, fs), start time, process group, session and environment
    of `pid`; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/status", "rb") as f:
            uids = next(line for line in f if line.startswith(b"Uid:")).split()[1:]
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
    except (OSError, StopIteration, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return {"uids": [int(u) for u in uids], "pgrp": int(fields[2]), "session": int(fields[3]),
            "start": int(fields[19]), "environ": environ}  # fmt: skip


def group_only_of(pgid: int, uid: int) -> bool:
    """Every live process of group `pgid` is `uid`'s in all its uids (and there is one): what
    to check before signalling an app's group as root, whose number may have been reused."""
    members = [m for m in map(_proc, _group_members(pgid)) if m is not None]
    return bool(members) and all(set(m["uids"]) == {uid} for m in members)


def _group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out
