"""Start the real host (`manage.py runhost`) for end-to-end tests and talk to it like a user."""

from __future__ import annotations

import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from common.ports import MAX_SLOTS, SLOT_STRIDE

ROOT = Path(__file__).resolve().parents[2]


def _free(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base_port() -> int:
    """A base port whose every derived port (base-5 .. base+161: the stream ports of every
    concurrent-session slot, TCP and UDP) is free, below the kernel's ephemeral range: there,
    no other process's outgoing socket can take one of the host's ports while it runs
    (preflight would rightly call that port foreign)."""
    top = 21 + SLOT_STRIDE * (MAX_SLOTS - 1)
    low, high = _worker_range(10_000, max(_ephemeral_low() - top - 1, 10_100), span=top + 6)
    for _ in range(200):
        base = random.randrange(low, high)
        ports = range(base - 5, base + top + 1)
        if all(_free(p, socket.SOCK_STREAM) and _free(p, socket.SOCK_DGRAM) for p in ports):
            return base
    raise RuntimeError("no free base port found")


def _worker_range(low: int, high: int, span: int) -> tuple[int, int]:
    """This xdist worker's share of base ports in [low, high): a port that is free when checked
    is bound only later by the host, so two workers must never pick from the same ports. A
    base uses ports from base-5 to base+span-6, so each share ends `span` before the next one
    begins."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return low, high
    share = (high - low) // count
    index = int(worker[2:])
    return low + index * share, low + (index + 1) * share - span


def read_token(path: Path) -> str:
    return path.read_text().strip().split("=", 1)[1]


@dataclass
class LiveHost:
    state_dir: Path
    base_port: int
    proc: subprocess.Popen
    log_path: Path
    extra_env: dict = field(default_factory=dict)
    # The address the host binds and the tests reach it at (HOST_BIND when not loopback).
    address: str = "127.0.0.1"

    @property
    def mgmt_port(self) -> int:
        return self.base_port + 1

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.mgmt_port}"

    @property
    def cert_path(self) -> Path:
        return self.state_dir / "tls-cert.pem"

    @property
    def mgmt_token(self) -> str:
        return read_token(self.state_dir / "mgmt-token")

    @property
    def plugin_token(self) -> str:
        return read_token(self.state_dir / "plugin-token")

    def ssl_context(self) -> ssl.SSLContext:
        """Trust exactly the host's self-signed certificate: the TLS under test is real. The
        certificate names loopback only, so on another address the certificate itself (the
        one trust anchor) is the check, not the name."""
        ctx = ssl.create_default_context(cafile=str(self.cert_path))
        ctx.check_hostname = self.address == "127.0.0.1"
        return ctx

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.ssl_context(), timeout=30, **kwargs)

    def mgmt(self) -> httpx.Client:
        return self.client(headers={"Authorization": f"Bearer {self.mgmt_token}"})

    def set_first_admin(self, user: str, password: str) -> None:
        """Set the admin credentials through the first-run route, as a newcomer would."""
        body = {"newUsername": user, "newPassword": password, "confirmNewPassword": password}
        with self.client() as c:
            r = c.post("/api/password", json=body)
            assert r.status_code == 200, r.text

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 150.0) -> None:
        """Until the APIs and the compat listener answer (a host takes over a minute to start
        on a 2-core machine shared by parallel jobs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"host exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with self.client() as c:
                    if c.get("/api/v1/health").status_code == 200 and self._compat_listening():
                        return
            except (httpx.HTTPError, ssl.SSLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"host did not become ready in {timeout} s:\n{self.log_tail()}")

    def _compat_listening(self) -> bool:
        """The compat plane's nvhttp port accepts connections (it starts beside daphne)."""
        try:
            socket.create_connection((self.address, self.base_port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_host(
    state_dir: Path | None = None,
    base_port: int | None = None,
    args: list[str] | None = None,
    env: dict | None = None,
    wait: bool = True,
    tree: Path = ROOT,
    bind: str | None = None,
    prefix: list[str] | None = None,
) -> LiveHost:
    """`bind`: the address the host listens on (HOST_BIND). `prefix`: argv the command runs
    under, e.g. `["ip", "netns", "exec", NAME]` (it must exec the command, so the process
    stopped is the host's supervisor)."""
    state_dir = state_dir or Path(tempfile.mkdtemp(prefix="hostmgmt-e2e-"))
    base_port = base_port or free_base_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    full_env.pop("REDIS_URL", None)
    # The desktop the tests run in (if any) is not the host's: capture `auto` would attach to
    # it. A test that wants an attached desktop passes DISPLAY in `env`.
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY"):
        full_env.pop(name, None)
    full_env.update(
        {
            "HOST_STATE_DIR": str(state_dir),
            "HOST_PORT": str(base_port),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
            "HOST_WORKER_CONCURRENCY": "2",
            # One web process per test host: two cost every live-host test another daphne's
            # start and CPU on a 2-core CI machine. Several processes on one socket are tested
            # where they matter (tests/hostmgmt/test_web_processes_e2e.py passes 2).
            # TEST_HOST_WEB_PROCESSES runs the live-host tests on several.
            "HOST_WEB_PROCESSES": os.environ.get("TEST_HOST_WEB_PROCESSES", "1"),
        }
    )
    if bind is not None:
        full_env["HOST_BIND"] = bind
    full_env.update(env or {})
    log_path = state_dir.parent / f"{state_dir.name}.out"
    log_file = open(log_path, "ab")  # noqa: SIM115 - owned by the process for its lifetime
    proc = subprocess.Popen(
        [*(prefix or []), sys.executable, str(tree / "manage.py"), "runhost", *(args or [])],
        cwd=tree,
        env=full_env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    host = LiveHost(state_dir, base_port, proc, log_path, env or {}, bind or "127.0.0.1")
    if wait:
        try:
            host.wait_ready()
        except BaseException:
            host.stop()  # the caller never gets the host to stop: leave no processes behind
            raise
    return host


@contextmanager
def running_host(admin: tuple[str, str] | None = None, **kwargs) -> Iterator[LiveHost]:
    """`start_host(**kwargs)`, the admin credentials set through the first-run route, and a
    stop that prints the host's log tail when it did not exit cleanly. A host that never gets
    ready is stopped too (its processes must not outlive the test)."""
    host = start_host(**{**kwargs, "wait": False})
    try:
        if kwargs.get("wait", True):
            host.wait_ready()
        if admin is not None:
            host.set_first_admin(*admin)
        yield host
    finally:
        if host.stop() != 0:
            print(host.log_tail())
