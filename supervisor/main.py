"""The supervisor behind `manage.py runhost`: prepares the state dir, starts and watches every
process of the host, and stops them all cleanly.

SIGTERM / SIGINT stop the host; SIGHUP restarts it (the supervisor re-executes itself on the
same ports). Either way `host.stopping` is emitted first and its hooks get a bounded time
(HOST_STOPPING_HOOKS_GRACE_S) to run before the workers and daphne are stopped; a second
SIGTERM/SIGINT cuts that wait short.

A stop may come at any moment of the start: the handlers are installed before anything is
prepared, a stop during preparation ends it at once, and every later step checks for it. Every
child goes through `Child.start` (own process group, PR_SET_PDEATHSIG), and the sentinel
(sentinel.py) SIGKILLs whatever the host spawned further down once the supervisor is gone, even
after a `kill -9`; the next start sweeps what an earlier run left.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import ssl
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from access import identity, tokens
from common import netranges, update_cleanup, update_journal
from common.ports import PortMap, busy_ports, validate_base_port
from common.statedir import REDIS_SOCKET, state_dir
from console import update_apply
from displays import reaper
from hooks import worker as hooks_worker
from supervisor import (
    children,
    launcher,
    lifecycle,
    periodic,
    redis_server,
    sentinel,
    web_listener,
)
from supervisor.children import Child

log = logging.getLogger("supervisor")

STOP_GRACE_S = 10.0
# How long a version on probation after an update must keep its children up (docs/updates.md).
UPDATE_GRACE_S = float(os.environ.get("HOST_UPDATE_GRACE_S", "30"))
GATE_FAILED_EXIT = 3


class StartupError(RuntimeError):
    """The host cannot start; the message tells the operator why and what to change."""


class StopRequested(BaseException):  # not an error: the operator stopped the start
    """SIGTERM/SIGINT while the host was still preparing (nothing runs yet to stop)."""


def _escape_endpoint(value: str) -> str:
    """Twisted endpoint strings separate fields with ':'; escape it (and '\\') in values."""
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")


def _tls_handshake(conn: socket.socket, host: str) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a readiness probe, not a client: any certificate
    context.wrap_socket(conn, server_hostname=host).close()


def check_ports_free(bind: str, ports: PortMap) -> None:
    busy = [number for number, _ in busy_ports(bind, ports)]
    if busy:
        raise StartupError(
            f"ports {', '.join(map(str, busy))} on {bind} are in use; stop the other host or set "
            "HOST_PORT to another base port"
        )


class Supervisor:
    def __init__(self, *, no_mgmt_token: bool = False):
        self.no_mgmt_token = no_mgmt_token
        self.bind = settings.HOST_BIND
        self.ports = settings.PORTS
        self.children: list[Child] = []
        self.redis: Child | None = None
        self.periodic: periodic.Runner | None = None
        self._stop = False
        self._restart = False
        self._stop_requests = 0
        self._preparing = False
        self._announced = False
        self.sentinel: sentinel.Sentinel | None = None
        # The web port's socket, shared by the daphne processes (more than one of them).
        self.web_socket: socket.socket | None = None
        self.started_at = time.time()
        self._gate_failed: str | None = None

    def install_signals(self) -> None:
        """Before anything else: a stop at any moment of the start must be honoured."""
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_restart)

    # -- preparation ----------------------------------------------------------------------
    def prepare(self) -> None:
        """Tokens, database, identity, port check; a stop meanwhile raises StopRequested."""
        self._preparing = True
        try:
            if self._stop:
                raise StopRequested
            self._prepare()
        finally:
            self._preparing = False

    def _prepare(self) -> None:
        validate_base_port(self.ports.base)
        if self.no_mgmt_token and not netranges.is_loopback_host(self.bind):
            raise StartupError(
                f"refusing to start without a management token on non-loopback bind {self.bind}; "
                "drop --no-mgmt-token or bind 127.0.0.1"
            )
        if not self.no_mgmt_token:
            try:
                tokens.ensure_token(tokens.MGMT)
            except tokens.TokenError as exc:
                raise StartupError(str(exc)) from None
        elif os.environ.get(tokens.MGMT.env_name):
            raise StartupError("--no-mgmt-token conflicts with HOST_MGMT_TOKEN in the environment")
        try:
            tokens.ensure_token(tokens.PLUGIN)
        except tokens.TokenError as exc:
            raise StartupError(str(exc)) from None
        update_apply.recover()  # an apply a kill interrupted: remove what it left
        self._cleanup()  # what a finished apply left, when a kill came before its cleanup
        call_command("migrate", interactive=False, verbosity=0)
        identity.ensure_identity()
        identity.ensure_tls()
        check_ports_free(self.bind, self.ports)
        self.open_web_socket()

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
                "HOST_STATE_DIR": str(state_dir()),
                "HOST_PORT": str(self.ports.base),
                "HOST_BIND": self.bind,
                "REDIS_URL": settings.REDIS_URL,
                "HOST_STARTED_AT": str(self.started_at),
                "HOST_NO_MGMT_TOKEN": "1" if self.no_mgmt_token else "0",
                "HOST_SUPERVISOR_PID": str(os.getpid()),
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def child_specs(self) -> list[Child]:
        """Every long-lived process of the host besides Redis. Planes add theirs here."""
        env = self.child_env()
        py = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        cert, key = identity.cert_path(), identity.key_path()
        endpoint = (
            f"ssl:{self.ports.mgmt}:interface={_escape_endpoint(self.bind)}"
            f":privateKey={_escape_endpoint(str(key))}:certKey={_escape_endpoint(str(cert))}"
        )
        concurrency = str(settings.CELERY_WORKER_CONCURRENCY)
        daphne_args = ["-v", "0", "-e", endpoint, "hostmgmt.asgi:application"]
        specs = [
            # -v 0: no daphne access log; its request lines carry query strings, and the host
            # logs its own events instead (Django's logging config applies to daphne's loggers).
            # Started through hostmgmt.daphne_main: body limits enforced in Twisted's parser.
            *self.web_specs([py, "-m", "hostmgmt.daphne_main", *daphne_args], env),
            Child(
                "celery",
                [
                    py,
                    "-m",
                    "celery",
                    "-A",
                    "hostmgmt",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    concurrency,
                    "--hostname",
                    f"host-{self.ports.base}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                env,
            ),
        ]
        # Hook commands and webhooks: their own threads worker so they never starve the above.
        # Its hook commands run in sessions of their own: swept if it dies (kill -9, OOM).
        specs.append(Child("celery-hooks", hooks_worker.worker_argv(py, self.ports.base), env,
                           sweep_marked=True))  # fmt: skip
        specs.append(Child("compat", [py, manage, "run_compat_plane"], env))
        # One process per session of either plane (docs/architecture.md, "Path of a session").
        specs.append(Child("sessions", [py, "-m", "streaming.sessions.manager"], env))
        # Installed plugins, each a process of its own, while the runtime switch is on.
        specs.append(Child("plugins", [py, "-m", "plugins.runner"], env, critical=False))
        return specs

    def web_specs(self, argv: list[str], env: dict[str, str]) -> list[Child]:
        """One `daphne` binding the port itself, or daphne-0..N-1 on the supervisor's socket:
        each restarted on its own, none of them ever unbinding the port."""
        if self.web_socket is None:
            return [Child("daphne", argv, env)]
        fd = self.web_socket.fileno()
        fd_env = {**env, web_listener.FD_ENV: str(fd)}
        return [
            Child(f"daphne-{i}", argv, fd_env, pass_fds=(fd,))
            for i in range(settings.WEB_PROCESSES)
        ]

    def open_web_socket(self) -> None:
        if settings.WEB_PROCESSES > 1:
            try:
                self.web_socket = web_listener.open_listener(self.bind, self.ports.mgmt)
            except OSError as exc:
                raise StartupError(
                    f"cannot listen on {self.bind}:{self.ports.mgmt}: {exc}"
                ) from None

    # -- running ----------------------------------------------------------------------------
    def start_redis(self) -> None:
        if os.environ.get("REDIS_URL"):
            redis_server.wait_ready(settings.REDIS_URL)
            return
        sock = state_dir() / REDIS_SOCKET
        if sock.exists():  # a killed run's
            sock.unlink()
        self.redis = Child(
            "redis", redis_server.redis_argv(sock, state_dir() / "redis"), dict(os.environ)
        )
        self.redis.start()
        redis_server.wait_ready(settings.REDIS_URL, abort=lambda: self._stop)

    def wait_web_ready(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        host = self.bind if self.bind not in ("0.0.0.0", "::") else "127.0.0.1"
        while time.monotonic() < deadline and not self._stop:
            try:
                with socket.create_connection((host, self.ports.mgmt), timeout=0.5) as conn:
                    if self.web_socket is not None:
                        # The supervisor's own socket accepts into its queue before any daphne
                        # runs: ready is a daphne finishing a TLS handshake.
                        _tls_handshake(conn, host)
                    return True
            except OSError:
                time.sleep(0.1)
        return False

    def run(self) -> int:
        self.install_signals()
        # Its own periodic jobs ask for a restart as children do (update-auto's apply).
        os.environ["HOST_SUPERVISOR_PID"] = str(os.getpid())
        self._start_sentinel()
        try:
            self._start()
            gate_until = self._open_gate()
            while not self._stop:
                for child in self.children:
                    child.check()
                if self.redis:
                    self.redis.check()
                if gate_until is not None and self._gate(gate_until):
                    gate_until = None
                time.sleep(0.25)
        finally:
            self.shutdown()
            released = time.monotonic()
            self.sentinel.release()
            log.info("sentinel released in %.2f s", time.monotonic() - released)
        if self._gate_failed:
            log.error("update health gate failed: %s; rolling back", self._gate_failed)
            return GATE_FAILED_EXIT  # the launcher puts the previous tree and the backup back
        if self._restart and os.environ.get(launcher.PROBATION_ENV):
            log.info("restarting through the update launcher")
            return launcher.RESTART_EXIT  # it runs whatever tree the journal names now
        if self._restart:
            log.info("restarting")
            env = {k: v for k, v in os.environ.items() if k != sentinel.INSTANCE_ENV}
            os.execve(sys.executable, [sys.executable, *sys.argv], env)
        return 0

    # -- the health gate of a version on probation after an update ----------------------------
    def _on_probation(self) -> bool:
        job = os.environ.get(launcher.PROBATION_ENV)
        journal = update_journal.load() or {}
        return bool(job) and journal.get("state") == "switched" and journal.get("id") == job

    def _open_gate(self) -> float | None:
        """The gate's deadline when this start is an update's probation, else None."""
        if self._stop or not self._on_probation():
            return None
        if not self._announced:
            self._fail_gate("the web API did not answer")
            return None
        log.info("update probation: children must stay up for %.0f s", UPDATE_GRACE_S)
        return time.monotonic() + UPDATE_GRACE_S

    def _gate(self, until: float) -> bool:
        """One look: True once the gate is decided (passed or failed)."""
        down = [c.name for c in self.children if c.critical and (c.restarts or not c.alive())]
        if self.redis is not None and not self.redis.alive():
            down.append("redis")
        if down:
            self._fail_gate(f"{', '.join(down)} exited during the grace period")
            return True
        if time.monotonic() < until:
            return False
        if not self._health_ok():
            self._fail_gate("/api/v1/health did not answer 200")
            return True
        journal = update_journal.load() or {}
        journal["state"] = "done"
        update_journal.record(journal, "health", "done", "passed the health gate")
        log.info("update to %s passed its health gate", journal.get("to"))
        try:
            update_apply.announce_applied()
        except Exception:  # the update stands; a lost event must not stop the host
            log.warning("could not announce update.applied", exc_info=True)
        self._cleanup()
        return True

    @staticmethod
    def _cleanup() -> None:
        """Old staged trees and backups, once an apply is `done` (common/update_cleanup)."""
        try:
            update_cleanup.prune()
        except OSError:  # disk space stays taken; the host runs on
            log.warning("could not remove old staged trees and backups", exc_info=True)

    def _fail_gate(self, reason: str) -> None:
        self._gate_failed = reason
        journal = update_journal.load() or {}
        if journal:
            update_journal.record(journal, "health", "failed", reason)
        self._stop = True

    def _health_ok(self) -> bool:
        host = self.bind if self.bind not in ("0.0.0.0", "::") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # our own certificate; a probe, not a client
        url = f"https://{host}:{self.ports.mgmt}/api/v1/health"
        # No proxy: the probe is for this host's own port.
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        try:
            with opener.open(url, timeout=5) as response:
                return response.status == 200
        except (OSError, ValueError):
            return False

    def _start_sentinel(self) -> None:
        """Mark this run (HOST_INSTANCE, inherited by everything it spawns), sweep what an
        earlier run of this state directory left, and start the sentinel before any child."""
        instance = secrets.token_hex(8)
        os.environ[sentinel.INSTANCE_ENV] = instance
        where = str(state_dir())
        stale = sentinel.sweep_stale(where)
        if stale:
            log.warning("killed %d process(es) an earlier run of this host left", stale)
        self.sentinel = sentinel.Sentinel(where, instance)
        self.sentinel.start(self.child_env())

    def _start(self) -> None:
        """Redis, displays, children, periodic jobs, then host.started; each step only while
        no stop was asked for."""
        if self._stop:
            return
        self.start_redis()
        if self._stop:
            return
        reaper.on_host_start()  # expire countdowns that ended while down; restore kept displays
        self.children = self.child_specs()
        for child in self.children:
            if self._stop:
                return
            child.start()
        # Every periodic job of the host (display countdowns, game grace windows, telemetry,
        # log rotation, store polling, update checks): see periodic.py.
        self.periodic = periodic.Runner(periodic.jobs())
        self.periodic.start()
        if self.wait_web_ready() and not self._stop:
            shown = self.bind if self.bind not in ("0.0.0.0", "::") else "127.0.0.1"
            shown = f"[{shown}]" if ":" in shown else shown
            token_note = (
                "no management token (--no-mgmt-token)"
                if self.no_mgmt_token
                else f"management token in {tokens.MGMT.path}"
            )
            log.info("Console: https://%s:%d/ ; %s", shown, self.ports.mgmt, token_note)
            lifecycle.announce_started()
            self._announced = True

    def shutdown(self) -> None:
        if self.periodic is not None:  # no countdown or grace window acts on a stopping host
            self.periodic.stop()
            periodic.fleet_relays.stop_all()  # their cursors are in Redis: nothing is lost
        # Hooks first: the hooks worker runs them, daphne carries the event to SSE consumers.
        # A host stopped before it announced host.started announces no host.stopping either.
        if self._announced:
            lifecycle.announce_stopping(abort=lambda: self._stop_requests > 1)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in self.children:
            child.terminate()
        for child in self.children:
            child.wait(deadline)
        children.finish_groups(self.children)
        if self.web_socket is not None:  # no daphne left to accept on it
            self.web_socket.close()
        reaper.on_host_stop()  # no virtual display server outlives the host
        if self.redis:
            self.redis.terminate()
            self.redis.wait(time.monotonic() + 5)
            children.finish_groups([self.redis])
        log.info("host stopped in %.1f s", time.monotonic() - deadline + STOP_GRACE_S)

    def _on_stop(self, signum, frame) -> None:
        self._stop_requests += 1
        self._stop = True
        if self._preparing:
            raise StopRequested

    def _on_restart(self, signum, frame) -> None:
        self._restart = True
        self._stop = True
