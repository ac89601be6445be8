"""The plugin runner: a supervisor child (`python -m plugins.runner`) that runs each installed
plugin as a process of its own while the runtime switch is on.

Why a process of its own between the supervisor and the plugins: a plugin that crashes, spins
or floods its log is this process's problem, never the supervisor's loop or daphne's; the
supervisor restarts the runner like any child, and the plugins die with it (process group and
parent-death signal, as every child of the host).

Each plugin gets: `HOST_MGMT_URL` (https://127.0.0.1:<mgmt port>/api/v1), `HOST_PLUGIN_TOKEN`
(its own token, bound to its id: access/plugin_tokens.py), `HOST_PLUGIN_ID`, `HOST_CA_FILE` and
`SSL_CERT_FILE` (the host's certificate, so stdlib `ssl` verifies the host), plus the host's
environment without anything secret-named and without the host's own settings
(`plugins.env.child_env`, the same rule pip runs under).

Restarts back off (1 s doubling to `BACKOFF_CAP_S`), reset after `HEALTHY_S` of uptime, so a
plugin that exits at once is retried ever more slowly, never spun. Its stdout/stderr lines go
to the host's log under the logger `plugin.<id>`, at most `LOG_RATE` lines a second (burst
`LOG_BURST`); the rest are dropped and counted, and the pipe is always drained so neither the
plugin nor the runner stalls.

It reads its orders from files (plugins/runner_control.py): the runtime switch and the rescan
marker, and publishes `status()` every tick.

Confinement (`Sandbox`): each plugin runs under bubblewrap with an allow-listed filesystem (the
system's /usr and a few /etc files, the base Python install, the plugin environment read-only,
its own data directory writable, the host's certificate at `SANDBOX_CA`), a private /tmp, /dev
and /proc in new user, pid, ipc and uts namespaces, no capabilities. The state directory (tokens,
database, TLS key, host.conf) and other processes' /proc are simply not there. The network
namespace stays the host's: the plugin reaches the host API on 127.0.0.1 and the console
reaches the plugin's UI on 127.0.0.1 (docs/plugins.md says why). Without a working bwrap the
runner runs no plugin unless the operator set `HOST_PLUGINS_UNCONFINED=1`; then the log and the
Plugins page say "not confined" and why. A host without a management token
(`runhost --no-mgmt-token`, whose API answers anyone on loopback) runs no plugin at all.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import django
from django.conf import settings

from access import identity, plugin_tokens
from common import procs, statedir
from console.logfile import redact
from plugins import env as plugin_env
from plugins import runner_control

log = logging.getLogger("plugins.runner")

TICK_S = 0.25
BACKOFF_FIRST_S = 1.0
BACKOFF_CAP_S = 30.0
HEALTHY_S = 30.0
STOP_GRACE_S = 5.0
LOG_RATE = 20.0  # lines per second, sustained
LOG_BURST = 200
LOG_LINE_MAX = 2000
LOG_TAIL = 30  # lines kept for the console
SANDBOX_CA = "/run/host-plugin/ca.pem"  # the host's certificate inside the sandbox
# What a plugin sees of /etc: name resolution, CA bundles, users and time zone; never the rest.
_ETC = ("ssl", "ca-certificates", "resolv.conf", "hosts", "nsswitch.conf", "host.conf",
        "gai.conf", "passwd", "group", "localtime", "ld.so.cache", "mime.types", "os-release",
        "python3", "python3.11")  # fmt: skip
_USR_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
UNCONFINED_ENV = "HOST_PLUGINS_UNCONFINED"
READ_PATHS_ENV = "HOST_PLUGIN_READ_PATHS"
DEFAULT_READ_PATHS = "~/.local/share/applications"
NO_MGMT_TOKEN_REASON = (
    "the host runs without a management token (--no-mgmt-token): its API answers any local "
    "process, so no plugin is run"
)


def _plugin_preexec(runner: int):
    """Own process group (stopped as one) and SIGKILL when the runner dies, however it dies."""

    def prepare() -> None:
        os.setsid()
        procs.die_with_parent(runner, signal.SIGKILL)

    return prepare


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


class LogGate:
    """Token bucket over a plugin's log lines; counts what it drops."""

    def __init__(self, rate: float = LOG_RATE, burst: int = LOG_BURST):
        self.rate, self.burst = rate, float(burst)
        self.tokens = float(burst)
        self.at = time.monotonic()
        self.dropped = 0  # since the last note
        self.dropped_total = 0
        self.lock = threading.Lock()

    def admit(self) -> tuple[bool, int]:
        """(pass this line?, lines dropped just before it that should now be reported)."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1.0:
                self.dropped += 1
                self.dropped_total += 1
                return False, 0
            self.tokens -= 1.0
            dropped, self.dropped = self.dropped, 0
            return True, dropped


@dataclass
class Running:
    plugin: plugin_env.InstalledPlugin
    proc: subprocess.Popen | None = None
    started_at: float = 0.0  # monotonic
    started_wall: float | None = None
    restarts: int = 0
    failures: int = 0  # consecutive quick exits: the backoff exponent
    next_start: float = 0.0
    last_exit: int | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=LOG_TAIL))
    gate: LogGate = field(default_factory=LogGate)

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger(f"plugin.{self.plugin.plugin_id}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def view(self) -> dict:
        return {
            "pid": self.proc.pid if self.alive() else None,
            "running": self.alive(),
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "started_at": self.started_wall if self.alive() else None,
            "pkg": self.plugin.pkg,
            "version": self.plugin.version,
            "log_dropped": self.gate.dropped_total,
            "log": list(self.tail),
        }


def plugin_env_vars(
    plugin_id: str, token: str, mgmt_url: str, ca_file: str, data_dir: str = ""
) -> dict[str, str]:
    env = plugin_env.child_env()
    env.update(
        {
            "HOST_MGMT_URL": mgmt_url,
            "HOST_PLUGIN_TOKEN": token,
            "HOST_PLUGIN_ID": plugin_id,
            "HOST_CA_FILE": ca_file,
            "SSL_CERT_FILE": ca_file,
            "PYTHONUNBUFFERED": "1",
        }
    )
    if data_dir:
        env["HOST_PLUGIN_DATA_DIR"] = data_dir
    return env


def data_dir(plugin_id: str) -> Path:
    """The plugin's own writable directory (the only one it can write besides its /tmp)."""
    path = plugin_env.env_dir().parent / "data" / plugin_id
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _inside(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


class Sandbox:
    """The bubblewrap command line around a plugin's argv (see the module doc).

    `secret_paths` (the state directory, the TLS key) may never be bound in, whatever the
    operator lists in `HOST_PLUGIN_READ_PATHS`; only the plugin environment and the plugin's
    data directory inside the state directory are.
    """

    def __init__(self, bwrap: str, secret_paths: list[Path], read_paths: list[Path]):
        self.bwrap = bwrap
        self.secret_paths = [p.resolve() for p in secret_paths]
        self.read_paths = []
        for path in read_paths:
            path = path.expanduser().resolve()
            if any(_inside(path, s) or _inside(s, path) for s in self.secret_paths):
                log.warning("%s: %s holds host secrets; not shown to plugins", READ_PATHS_ENV,
                            path)  # fmt: skip
            elif path.exists():
                self.read_paths.append(path)

    def _system(self) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for name in _USR_LINKS:
            top = Path("/") / name
            if top.is_symlink():
                args += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                args += ["--ro-bind", str(top), str(top)]
        for name in _ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        return args

    def _python(self) -> list[str]:
        """The plugin environment's base interpreter install (outside /usr, e.g. pyenv)."""
        try:
            real = plugin_env.env_python().resolve(strict=True)
        except (FileNotFoundError, RuntimeError):
            return []
        prefix = real.parent.parent
        if _inside(prefix, Path("/usr")):
            return []
        if any(_inside(prefix, s) or _inside(s, prefix) for s in self.secret_paths):
            raise OSError(f"the plugin interpreter's install {prefix} holds host secrets")
        return ["--ro-bind", str(prefix), str(prefix)]

    def wrap(self, argv: list[str], *, data: Path, ca_file: str) -> list[str]:
        env = str(plugin_env.env_dir())
        args = [self.bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--cap-drop", "ALL", "--die-with-parent",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run",
                *self._system(), *self._python(),
                "--ro-bind", env, env,
                "--bind", str(data), str(data),
                "--ro-bind-try", ca_file, SANDBOX_CA]  # fmt: skip
        for path in self.read_paths:
            args += ["--ro-bind-try", str(path), str(path)]
        return [*args, "--chdir", str(data), "--", *argv]

    def probe(self) -> str | None:
        """None when bwrap can start a confined process here; otherwise why not."""
        true = shutil.which("true") or "/usr/bin/true"
        argv = [self.bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--cap-drop", "ALL", "--die-with-parent", "--proc", "/proc", "--dev", "/dev",
                *self._system(), "--", true]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap did not run: {exc}"
        if done.returncode != 0:
            return f"bwrap failed: {done.stderr.strip()[-300:] or done.returncode}"
        return None


def read_paths_from_env() -> list[Path]:
    raw = os.environ.get(READ_PATHS_ENV, DEFAULT_READ_PATHS)
    return [Path(p) for p in raw.split(":") if p.strip()]


def make_sandbox(secret_paths: list[Path]) -> tuple[Sandbox | None, str]:
    """(the sandbox, "") or (None, why plugins cannot be confined here)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None, "bubblewrap (bwrap) is not installed"
    sandbox = Sandbox(bwrap, secret_paths, read_paths_from_env())
    why = sandbox.probe()
    return (None, why) if why else (sandbox, "")


class Runner:
    """`sandbox`: None runs plugins unconfined, and only with `allow_unconfined` (the operator's
    `HOST_PLUGINS_UNCONFINED=1`); `unconfined_why` says why there is none. `refused`: a reason
    to run no plugin at all (a host without a management token)."""

    def __init__(
        self,
        mgmt_url: str,
        ca_file: str,
        *,
        sandbox: Sandbox | None = None,
        unconfined_why: str = "",
        allow_unconfined: bool = False,
        refused: str | None = None,
    ):
        self.mgmt_url = mgmt_url
        self.ca_file = ca_file
        self.sandbox = sandbox
        self.unconfined_why = unconfined_why or "no sandbox configured"
        self.allow_unconfined = allow_unconfined
        if sandbox is None and not allow_unconfined and refused is None:
            refused = (
                f"plugins cannot be confined ({self.unconfined_why}) and "
                f"{UNCONFINED_ENV}=1 is not set"
            )
        self.refused = refused
        self.plugins: dict[str, Running] = {}
        self.scanned_marker: str | None = None
        self.stopping = False
        self.said_refused = False

    def confinement(self) -> dict:
        if self.sandbox is not None:
            return {"confined": True, "confinement": "confined (bubblewrap)"}
        return {"confined": False, "confinement": f"not confined: {self.unconfined_why}"}

    # -- scanning --------------------------------------------------------------------------
    def rescan(self) -> None:
        try:
            found = {p.plugin_id: p for p in plugin_env.installed()}
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
            log.warning("listing installed plugins failed: %s", exc)
            return
        for plugin_id in list(self.plugins):
            now = found.get(plugin_id)
            if now is None or now != self.plugins[plugin_id].plugin:
                log.info("plugin %s %s; stopping it", plugin_id, "removed" if now is None else
                         "changed")  # fmt: skip
                self.stop_one(self.plugins.pop(plugin_id))
        for plugin_id, plugin in found.items():
            if plugin_id not in self.plugins:
                self.plugins[plugin_id] = Running(plugin)
        plugin_tokens.prune(set(found))

    # -- one plugin ------------------------------------------------------------------------
    def start_one(self, run: Running) -> None:
        plugin_id = run.plugin.plugin_id
        token = plugin_tokens.ensure(plugin_id)
        try:
            data = data_dir(plugin_id)
            argv = plugin_env.launch_argv(plugin_id)
            ca_file = self.ca_file
            if self.sandbox is not None:
                argv = self.sandbox.wrap(argv, data=data, ca_file=self.ca_file)
                ca_file = SANDBOX_CA
            env = plugin_env_vars(plugin_id, token, self.mgmt_url, ca_file, str(data))
            run.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=str(data),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=_plugin_preexec(os.getpid()),
            )
        except OSError as exc:
            log.warning("plugin %s could not start: %s", plugin_id, exc)
            run.proc = None
            self.schedule(run, time.monotonic())
            return
        run.started_at = time.monotonic()
        run.started_wall = time.time()
        run.next_start = 0.0
        how = "confined" if self.sandbox is not None else f"NOT CONFINED: {self.unconfined_why}"
        log.info("plugin %s started (pid %d, %s)", plugin_id, run.proc.pid, how)
        for stream, level in ((run.proc.stdout, logging.INFO), (run.proc.stderr, logging.WARNING)):
            threading.Thread(target=self.pump, args=(run, stream, level), daemon=True).start()

    def pump(self, run: Running, stream, level: int) -> None:
        """One pipe of one plugin into the host's log, line by line, rate-limited."""
        logger = run.logger
        with contextlib.suppress(OSError, ValueError):
            while True:
                raw = stream.readline(LOG_LINE_MAX)
                if not raw:
                    break
                ok, dropped = run.gate.admit()
                if not ok:
                    continue
                if dropped:
                    logger.warning("%d log line(s) dropped: over %d a second", dropped, LOG_RATE)
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                line = "".join(ch if ch.isprintable() else "?" for ch in line)
                logger.log(level, "%s", line)
                run.tail.append(redact(line))
        with contextlib.suppress(OSError):
            stream.close()

    def schedule(self, run: Running, now: float) -> None:
        delay = min(BACKOFF_CAP_S, BACKOFF_FIRST_S * (2**run.failures))
        run.failures += 1
        run.next_start = now + delay

    def check_one(self, run: Running, now: float) -> None:
        if run.proc is None:
            if now >= run.next_start:
                if run.last_exit is not None or run.next_start:
                    run.restarts += 1
                self.start_one(run)
            return
        code = run.proc.poll()
        if code is None:
            if run.failures and now - run.started_at >= HEALTHY_S:
                run.failures = 0
            return
        run.last_exit = code
        run.proc = None
        if now - run.started_at >= HEALTHY_S:
            run.failures = 0
        self.schedule(run, now)
        log.warning(
            "plugin %s exited with %s; restarting in %.1f s",
            run.plugin.plugin_id,
            code,
            run.next_start - now,
        )

    def terminate(self, run: Running) -> None:
        """SIGTERM to the plugin. Confined, the process the runner started is bubblewrap, whose
        death takes the whole sandbox with it at once (SIGKILL): the signal goes to the
        plugin's processes inside (below bwrap and its init) so the plugin can clean up."""
        if run.proc is None:
            return
        if self.sandbox is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.proc.pid, signal.SIGTERM)
            return
        outer = run.proc.pid
        tree = runner_control.process_tree(outer)
        inits = {p for p in tree if _ppid(p) == outer}
        for pid in tree - inits - {outer}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def stop_one(self, run: Running) -> None:
        if run.proc is None:
            return
        self.terminate(run)
        try:
            run.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            log.warning("plugin %s did not stop in time; killing it", run.plugin.plugin_id)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait()
        run.last_exit = run.proc.returncode
        run.proc = None
        log.info("plugin %s stopped", run.plugin.plugin_id)

    def stop_all(self) -> None:
        runs = [r for r in self.plugins.values() if r.proc is not None]
        for run in runs:
            self.terminate(run)
        for run in runs:
            self.stop_one(run)  # SIGTERM again is harmless; waits within the grace

    # -- the loop --------------------------------------------------------------------------
    def tick(self) -> None:
        enabled = runner_control.runtime_enabled()
        if not enabled or self.refused:
            if self.plugins:
                self.stop_all()
                self.plugins.clear()
                self.scanned_marker = None
            if enabled and not self.said_refused:
                log.error("plugin runner runs no plugin: %s", self.refused)
                self.said_refused = True
            runner_control.write_status({}, refused=self.refused, **self.confinement())
            return
        marker = runner_control.rescan_marker()
        if self.scanned_marker != marker:
            self.scanned_marker = marker
            self.rescan()
        now = time.monotonic()
        for run in list(self.plugins.values()):
            self.check_one(run, now)
        runner_control.write_status(
            {pid: r.view() for pid, r in self.plugins.items()}, **self.confinement()
        )

    def serve(self) -> None:
        while not self.stopping:
            try:
                self.tick()
            except Exception:  # one bad tick must not end every plugin
                log.exception("plugin runner tick failed")
            time.sleep(TICK_S)
        self.stop_all()
        runner_control.clear_status()


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    django.setup()
    # Loopback whenever the host listens there (wildcard or loopback bind), else its address.
    bind = settings.HOST_BIND
    loopback = bind in ("0.0.0.0", "::", "localhost") or bind.startswith("127.") or bind == "::1"
    host = "127.0.0.1" if loopback else bind
    host = f"[{host}]" if ":" in host else host
    sandbox, why = make_sandbox([statedir.state_dir(), identity.key_path()])
    allow = os.environ.get(UNCONFINED_ENV, "").strip() == "1"
    if sandbox is None:
        log.warning("plugins are not confined: %s (%s=%s)", why, UNCONFINED_ENV, int(allow))
    runner = Runner(
        f"https://{host}:{settings.PORTS.mgmt}/api/v1",
        str(identity.cert_path()),
        sandbox=sandbox,
        unconfined_why=why,
        allow_unconfined=allow,
        refused=NO_MGMT_TOKEN_REASON if settings.HOST_NO_MGMT_TOKEN else None,
    )

    def on_term(signum, frame):
        runner.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log.info("plugin runner up (runtime %s)", "on" if runner_control.runtime_enabled() else "off")
    runner.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
