"""The plugin runner: a supervisor child (`python -m plugins.runner`) that runs each installed
plugin as a process of its own while the runtime switch is on.

Why a process of its own between the supervisor and the plugins: a plugin that crashes, spins
or floods its log is this process's problem, never the supervisor's loop or daphne's; the
supervisor restarts the runner like any child, and the plugins die with it (process group and
parent-death signal, as every child of the host).

Each plugin gets: `HOST_MGMT_URL` (https://127.0.0.1:<mgmt port>/api/v1), `HOST_PLUGIN_TOKEN`
(its own token, bound to its id: plugins/tokens.py), `HOST_PLUGIN_ID`, `HOST_CA_FILE` and
`SSL_CERT_FILE` (the host's certificate, so stdlib `ssl` verifies the host), plus the host's
environment without anything secret-named (hostmgmt.lib.env.without_secrets) and without the
host's own settings (HOST_*, DJANGO_*, REDIS_URL).

Restarts back off (1 s doubling to `BACKOFF_CAP_S`), reset after `HEALTHY_S` of uptime, so a
plugin that exits at once is retried ever more slowly, never spun. Its stdout/stderr lines go
to the host's log under the logger `plugin.<id>`, at most `LOG_RATE` lines a second (burst
`LOG_BURST`); the rest are dropped and counted, and the pipe is always drained so neither the
plugin nor the runner stalls.

It reads its orders from files (plugins/runner_control.py): the runtime switch and the rescan
marker, and publishes `status()` every tick.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from hostmgmt.lib.env import without_secrets
from plugins import env as plugin_env
from plugins import runner_control
from plugins import tokens as plugin_tokens

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
_PR_SET_PDEATHSIG = 1
_HOST_ONLY = ("HOST_", "DJANGO_", "REDIS_URL", "CELERY", "SESSION_MANAGER")


def _plugin_preexec() -> None:
    """Own process group (stopped as one) and SIGKILL when the runner dies, however it dies."""
    os.setsid()
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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


def plugin_env_vars(plugin_id: str, token: str, mgmt_url: str, ca_file: str) -> dict[str, str]:
    env = {
        k: v for k, v in without_secrets().items() if not k.startswith(_HOST_ONLY) and k != "PWD"
    }
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
    return env


class Runner:
    def __init__(self, mgmt_url: str, ca_file: str):
        self.mgmt_url = mgmt_url
        self.ca_file = ca_file
        self.plugins: dict[str, Running] = {}
        self.scanned_marker: str | None = None
        self.stopping = False

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
        env = plugin_env_vars(plugin_id, token, self.mgmt_url, self.ca_file)
        try:
            run.proc = subprocess.Popen(
                plugin_env.launch_argv(plugin_id),
                env=env,
                cwd=str(plugin_env.env_dir()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=_plugin_preexec,
            )
        except OSError as exc:
            log.warning("plugin %s could not start: %s", plugin_id, exc)
            run.proc = None
            self.schedule(run, time.monotonic())
            return
        run.started_at = time.monotonic()
        run.started_wall = time.time()
        run.next_start = 0.0
        log.info("plugin %s started (pid %d)", plugin_id, run.proc.pid)
        for stream, level in ((run.proc.stdout, logging.INFO), (run.proc.stderr, logging.WARNING)):
            threading.Thread(target=self.pump, args=(run, stream, level), daemon=True).start()

    def pump(self, run: Running, stream, level: int) -> None:
        """One pipe of one plugin into the host's log, line by line, rate-limited."""
        from hostmgmt.console.logfile import redact

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

    def stop_one(self, run: Running) -> None:
        if run.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.proc.pid, signal.SIGTERM)
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
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.proc.pid, signal.SIGTERM)
        for run in runs:
            self.stop_one(run)  # SIGTERM again is harmless; waits within the grace

    # -- the loop --------------------------------------------------------------------------
    def tick(self) -> None:
        enabled = runner_control.runtime_enabled()
        if not enabled:
            if self.plugins:
                self.stop_all()
                self.plugins.clear()
                self.scanned_marker = None
            runner_control.write_status({})
            return
        marker = runner_control.rescan_marker()
        if self.scanned_marker != marker:
            self.scanned_marker = marker
            self.rescan()
        now = time.monotonic()
        for run in list(self.plugins.values()):
            self.check_one(run, now)
        runner_control.write_status({pid: r.view() for pid, r in self.plugins.items()})

    def serve(self) -> None:
        while not self.stopping:
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad tick must not end every plugin
                log.exception("plugin runner tick failed")
            time.sleep(TICK_S)
        self.stop_all()
        runner_control.clear_status()


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    import django

    django.setup()
    from django.conf import settings

    from hostmgmt import identity

    # Loopback whenever the host listens there (wildcard or loopback bind), else its address.
    bind = settings.HOST_BIND
    loopback = bind in ("0.0.0.0", "::", "localhost") or bind.startswith("127.") or bind == "::1"
    host = "127.0.0.1" if loopback else bind
    host = f"[{host}]" if ":" in host else host
    runner = Runner(f"https://{host}:{settings.PORTS.mgmt}/api/v1", str(identity.cert_path()))

    def on_term(signum, frame):
        runner.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log.info("plugin runner up (runtime %s)", "on" if runner_control.runtime_enabled() else "off")
    runner.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
