"""Real hosts in network namespaces on this machine, each on its own address of one private
LAN, for tests of several hosts talking to each other (the fleet).

Layout: one bridge in the root namespace holds `.1` of a private /24 (10.213.X.0/24, X from
the test process's pid); host i lives in namespace `hm-<pid>-<i>` behind a veth pair whose
root end (`hm<pid>v<i>`) is a bridge port and whose namespace end is `eth0` with `.(10+i)`.
Every host listens on its namespace address with the same port layout (`BASE_PORT`: the
management API on `BASE_PORT + 1`), below the ephemeral range of its namespace. The root
namespace (the test, a fleet host started there) reaches each host at `https://ip:port`;
hosts reach each other and the root namespace's bridge address.

Each host is the real `manage.py runhost` (tests/support/livehost.py) run under
`ip netns exec`, with its own state dir, Redis, tokens and certificate; stopping one stops
its supervisor and then anything still running in its namespace, and leaving the context
deletes namespaces, links and bridge whatever happened. A run killed before that leaves
names whose pid is gone: the next run sweeps them.

`cut()` / `restore()` take the host's root-side veth down and up (connections hang, as on a
pulled cable).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from common.statedir import MGMT_TOKEN_FILE, PLUGIN_TOKEN_FILE, TLS_CERT_FILE
from tests.support.livehost import ROOT, LiveHost, read_token, start_host

BASE_PORT = 20000  # below the ephemeral range, so no outgoing socket takes a host's port
PREFIX = "hm"
NS_RE = re.compile(rf"{PREFIX}-(\d+)-(\d+)")
LINK_RE = re.compile(rf"{PREFIX}(\d+)(?:br|v\d+)")
CMD_TIMEOUT_S = 20


class NetnsUnavailable(Exception):
    """This machine cannot run hosts in namespaces (not root, no `ip netns`)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["ip", *args], check)


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def unavailable_reason() -> str | None:
    """Why hosts in namespaces cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    try:
        done = _ip("netns", "list", check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns` failed: {exc}"
    if done.returncode != 0:
        return f"`ip netns list` exited {done.returncode}: {done.stderr.strip()}"
    return None


def require_netns() -> None:
    """pytest.skip with the reason when hosts in namespaces cannot run here."""
    import pytest

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def namespace_pids(namespace: str) -> list[int]:
    done = _ip("netns", "pids", namespace, check=False)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def _kill_namespace(namespace: str, grace_s: float) -> None:
    """Wait up to `grace_s` for the processes left in `namespace` to end, then SIGKILL them."""
    deadline = time.monotonic() + grace_s
    while namespace_pids(namespace) and time.monotonic() < deadline:
        time.sleep(0.1)
    for _ in range(20):
        pids = namespace_pids(namespace)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise RuntimeError(f"processes {namespace_pids(namespace)} in {namespace} survive SIGKILL")


def _links() -> list[str]:
    return [
        line.split(":")[1].strip().split("@")[0]
        for line in _ip("-o", "link", "show").stdout.splitlines()
        if line.count(":") >= 2
    ]


def sweep_stale() -> None:
    """Delete the namespaces and links of runs whose process is gone (killed before cleanup)."""
    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = NS_RE.fullmatch(name)
        if match and not _alive(int(match.group(1))):
            _kill_namespace(name, 0)
            _ip("netns", "del", name, check=False)
    for link in _links():
        match = LINK_RE.fullmatch(link)
        if match and not _alive(int(match.group(1))):
            _ip("link", "del", link, check=False)


def _subnet(pid: int) -> ipaddress.IPv4Network:
    """10.213.X.0/24 with X from the pid, moved on past any /24 a route here already covers."""
    taken = []
    for line in _ip("-4", "route", "show", "table", "all").stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        try:
            taken.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    for step in range(224):
        net = ipaddress.ip_network(f"10.213.{16 + (pid + step) % 224}.0/24")
        if not any(net.overlaps(t) for t in taken if t.prefixlen > 0):
            return net
    raise NetnsUnavailable("no free 10.213.X.0/24 for the test LAN")


def certificate_fingerprint(cert_path: Path) -> str:
    """SHA-256 of the certificate's DER, 64 lower-case hex digits (what a fleet pins)."""
    der = ssl.PEM_cert_to_DER_cert(cert_path.read_text())
    return hashlib.sha256(der).hexdigest()


def peer_fingerprint(ip: str, port: int, timeout: float = 5.0) -> str:
    """SHA-256 of the certificate the server at ip:port presents (no chain or name check)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((ip, port), timeout=timeout) as raw,
        ctx.wrap_socket(raw) as tls,
    ):
        return hashlib.sha256(tls.getpeercert(binary_form=True) or b"").hexdigest()


@dataclass
class NetnsHost:
    """One real host in its own namespace. `live` is the running LiveHost (None when stopped)."""

    name: str
    namespace: str
    ip: str
    veth: str  # the root end of its link: the one cut and impaired
    state_dir: Path
    base_port: int = BASE_PORT
    env: dict = field(default_factory=dict)
    live: LiveHost | None = None

    @property
    def port(self) -> int:
        return self.base_port + 1

    @property
    def url(self) -> str:
        return f"https://{self.ip}:{self.port}"

    @property
    def cert_path(self) -> Path:
        return self.state_dir / TLS_CERT_FILE

    @property
    def fingerprint(self) -> str:
        return certificate_fingerprint(self.cert_path)

    @property
    def mgmt_token(self) -> str:
        return read_token(self.state_dir / MGMT_TOKEN_FILE)

    @property
    def plugin_token(self) -> str:
        return read_token(self.state_dir / PLUGIN_TOKEN_FILE)

    @property
    def running(self) -> bool:
        return self.live is not None and self.live.proc.poll() is None

    def _prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def launch(self) -> None:
        """Start the host without waiting for it (several start side by side)."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.live = start_host(
            state_dir=self.state_dir,
            base_port=self.base_port,
            env={"HOST_LOG_LEVEL": "WARNING", **self.env},
            wait=False,
            bind=self.ip,
            prefix=self._prefix(),
        )

    def wait_ready(self, timeout: float = 150.0) -> None:
        assert self.live is not None, f"{self.name} was not started"
        self.live.wait_ready(timeout)

    def start(self, timeout: float = 150.0) -> None:
        """Start (again, on the same state dir: same identity, tokens and data) and wait."""
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> int | None:
        """SIGTERM the supervisor, then end whatever it left in the namespace (the sentinel
        gets its short grace). The exit status, None when it was not running."""
        code = None
        if self.live is not None:
            code = self.live.stop()
            if code != 0:
                print(f"{self.name} exited {code}:\n{self.live.log_tail()}", file=sys.stderr)
        _kill_namespace(self.namespace, grace_s=5.0)
        return code

    # -- talking to it -----------------------------------------------------------------------
    def ssl_context(self) -> ssl.SSLContext:
        """Trust exactly this host's certificate (it names loopback, not this address)."""
        ctx = ssl.create_default_context(cafile=str(self.cert_path))
        ctx.check_hostname = False
        return ctx

    def client(self, **kwargs) -> httpx.Client:
        kwargs.setdefault("timeout", 10)
        return httpx.Client(base_url=self.url, verify=self.ssl_context(), **kwargs)

    def mgmt(self, **kwargs) -> httpx.Client:
        return self.client(headers={"Authorization": f"Bearer {self.mgmt_token}"}, **kwargs)

    def manage(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`manage.py ARGS` against this host's state, inside its namespace (e.g.
        `emit_event KIND JSON`); raises with stderr when it fails."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
        env.pop("REDIS_URL", None)
        env.update(
            {
                "HOST_STATE_DIR": str(self.state_dir),
                "HOST_PORT": str(self.base_port),
                "HOST_BIND": self.ip,
                "HOST_LOG_LEVEL": "WARNING",
                "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
                **self.env,
            }
        )
        argv = [*self._prefix(), sys.executable, str(ROOT / "manage.py"), *args]
        done = subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} exited {done.returncode}: {done.stderr}")
        return done

    def log_tail(self, lines: int = 60) -> str:
        return self.live.log_tail(lines) if self.live is not None else ""

    def memory_bytes(self) -> int:
        """Proportional set size of every process in its namespace (shared pages split)."""
        total = 0
        for pid in namespace_pids(self.namespace):
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
            except (OSError, ValueError):
                continue
        return total

    # -- the link ------------------------------------------------------------------------------
    def cut(self) -> None:
        """Link down: packets to and from the host are lost (no reset), as on a pulled cable."""
        _ip("link", "set", "dev", self.veth, "down")

    def restore(self) -> None:
        """Link up and no impairment."""
        _run(["tc", "qdisc", "del", "dev", self.veth, "root"], check=False)
        _ip("link", "set", "dev", self.veth, "up")


def stop_all(hosts: list[NetnsHost]) -> None:
    """Stop the hosts side by side: each supervisor gets its one SIGTERM (a second one would
    cut its stop short), then each is waited for and its namespace emptied."""
    for host in hosts:
        if host.running:
            host.live.proc.send_signal(signal.SIGTERM)
    for host in hosts:
        if host.running:
            try:
                host.live.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass  # stop() kills it
    errors = []
    for host in hosts:
        try:
            host.stop()
        except RuntimeError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


@dataclass
class NetnsLan:
    """The namespaces' LAN: its bridge and the root namespace's address on it (a fleet host
    in the root namespace binds `gateway` to be reachable from the hosts)."""

    subnet: ipaddress.IPv4Network
    bridge: str
    gateway: str
    hosts: list[NetnsHost]


@contextmanager
def netns_hosts(count: int, *, start: bool = True, env: dict | None = None) -> Iterator[NetnsLan]:
    """`count` hosts, each in its own namespace, started side by side and ready (unless
    `start` is false); all of it removed on leaving, whatever happened."""
    reason = unavailable_reason()
    if reason:
        raise NetnsUnavailable(reason)
    sweep_stale()
    pid = os.getpid()
    subnet = _subnet(pid)
    addresses = list(subnet.hosts())
    bridge = f"{PREFIX}{pid}br"
    gateway = str(addresses[0])
    workdir = Path(tempfile.mkdtemp(prefix="netns-hosts-"))
    lan = NetnsLan(subnet, bridge, gateway, [])
    with ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
        _ip("link", "add", bridge, "type", "bridge")
        cleanup.callback(_ip, "link", "del", bridge, check=False)
        _ip("addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i in range(count):
            host = NetnsHost(
                name=f"host{i}",
                namespace=f"{PREFIX}-{pid}-{i}",
                ip=str(addresses[9 + i]),
                veth=f"{PREFIX}{pid}v{i}",
                state_dir=workdir / f"host{i}",
                env=dict(env or {}),
            )
            _ip("netns", "add", host.namespace)
            cleanup.callback(_ip, "netns", "del", host.namespace, check=False)
            cleanup.callback(_kill_namespace, host.namespace, 0)
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0",
                "netns", host.namespace)  # fmt: skip
            cleanup.callback(_ip, "link", "del", host.veth, check=False)
            _ip("link", "set", host.veth, "master", bridge)
            _ip("link", "set", host.veth, "up")
            ns = ["-n", host.namespace]
            _ip(*ns, "addr", "add", f"{host.ip}/{subnet.prefixlen}", "dev", "eth0")
            _ip(*ns, "link", "set", "eth0", "up")
            _ip(*ns, "link", "set", "lo", "up")
            _ip(*ns, "route", "add", "default", "via", gateway)
            lan.hosts.append(host)
        cleanup.callback(stop_all, lan.hosts)  # first (LIFO): processes, then links
        if start:
            for host in lan.hosts:
                host.launch()
            for host in lan.hosts:
                host.wait_ready()
        yield lan
