"""The web port's shared socket: the setting, the supervisor's children, and real daphne
processes (hostmgmt.daphne_main) adopting the socket with TLS, one killed while the other
serves."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from supervisor import web_listener
from supervisor.children import Child
from supervisor.main import Supervisor
from tests.support import certs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", 1), ("2", 2), ("4", 4), (" 3 ", 3), ("", None)]
)
def test_web_processes_setting(raw, expected, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert web_listener.processes_from(raw) == (expected or 4)  # default: cores, at most 4
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert web_listener.processes_from("") == 1


@pytest.mark.parametrize("raw", ["0", "5", "-1", "two"])
def test_web_processes_out_of_range_stops_the_start(raw):
    with pytest.raises(ValueError, match="HOST_WEB_PROCESSES must be an integer 1-4"):
        web_listener.processes_from(raw)


def test_one_process_binds_the_port_itself(settings):
    settings.WEB_PROCESSES = 1
    sup = Supervisor(no_mgmt_token=True)
    sup.open_web_socket()
    assert sup.web_socket is None
    [child] = sup.web_specs(["daphne"], {"A": "1"})
    assert child.name == "daphne" and child.pass_fds == ()
    assert web_listener.FD_ENV not in child.env


def test_several_processes_share_the_supervisors_socket(settings):
    settings.WEB_PROCESSES = 3
    settings.HOST_BIND = "127.0.0.1"
    sup = Supervisor(no_mgmt_token=True)
    sup.bind = "127.0.0.1"
    sup.ports = type("Ports", (), {"mgmt": 0})()
    sup.open_web_socket()
    try:
        fd = sup.web_socket.fileno()
        specs = sup.web_specs(["daphne"], {"A": "1"})
        assert [c.name for c in specs] == ["daphne-0", "daphne-1", "daphne-2"]
        assert all(c.pass_fds == (fd,) and c.env[web_listener.FD_ENV] == str(fd) for c in specs)
        assert all(c.env["A"] == "1" for c in specs)
    finally:
        sup.web_socket.close()


def test_open_listener_is_listening_with_the_bind_family():
    for bind, family in (("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)):
        try:
            sock = web_listener.open_listener(bind, 0)
        except OSError:
            assert family == socket.AF_INET6  # a machine without IPv6
            continue
        try:
            assert sock.family == family
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
            assert web_listener.adopted_family(sock.fileno()) == family
            os.fstat(sock.fileno())  # adopted_family left the descriptor open
        finally:
            sock.close()


def _daphne(fd: int, tmp_path: Path) -> Child:
    key, cert = certs.identity(7)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    (tmp_path / "cert.pem").write_bytes(certs.pem(cert))
    # The supervisor's endpoint string: the port in it is never bound (the socket is adopted).
    endpoint = (
        f"ssl:1:interface=127.0.0.1:privateKey={tmp_path}/key.pem:certKey={tmp_path}/cert.pem"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
        "HOST_STATE_DIR": str(tmp_path / "state"),
        web_listener.FD_ENV: str(fd),
    }
    argv = [sys.executable, "-m", "hostmgmt.daphne_main", "-v", "0", "-e", endpoint,
            "tests.support.pid_app:app"]  # fmt: skip
    child = Child("daphne-test", argv, env, pass_fds=(fd,))
    return child


def _get_pid(port: int, cert: Path, timeout: float = 5.0) -> int:
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with ctx.wrap_socket(raw) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
    return int(data.split(b"\r\n\r\n", 1)[1])


def test_daphnes_adopt_the_socket_with_tls_and_one_dies_alone(tmp_path):
    sock = web_listener.open_listener("127.0.0.1", 0)
    port = sock.getsockname()[1]
    children = [_daphne(sock.fileno(), tmp_path) for _ in range(2)]
    try:
        for child in children:
            child.start()
        pids = {c.pid for c in children}
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while seen != pids and time.monotonic() < deadline:
            try:
                seen.add(_get_pid(port, tmp_path / "cert.pem"))
            except OSError:
                time.sleep(0.2)
        assert seen == pids, (seen, pids)  # both accept, over TLS with the given certificate

        os.kill(children[0].pid, signal.SIGKILL)
        children[0].proc.wait(10)
        # The port stays bound (the supervisor holds it) and the survivor answers every time.
        answers = {_get_pid(port, tmp_path / "cert.pem") for _ in range(10)}
        assert answers == {children[1].pid}
    finally:
        for child in children:
            child.terminate()
            child.wait(time.monotonic() + 10)
        sock.close()
