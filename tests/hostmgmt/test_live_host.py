"""The real host over TLS: start-up, tokens, both APIs' auth, bad input, supervision."""

from __future__ import annotations

import os
import signal
import ssl
import stat
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from tests.support.livehost import ROOT, free_base_port, start_host

pytestmark = pytest.mark.e2e


def test_health_over_verified_tls(live_host):
    with live_host.client() as c:  # trusts only the host's own certificate
        r = c.get("/api/v1/health")
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "ok" and body["status_code"] == 200
        assert body["version"].startswith("v") and isinstance(body["uptime"], int)
        assert c.get("/api/health").json()["version"] == body["version"]


def _daphne_files(host) -> list[str]:
    """The `/proc/<pid>/fd` targets of daphne's open fds other than sockets."""
    from bench.soak import _fd_targets, host_processes

    pid = next(p.pid for role, p in host_processes(host.proc.pid).items() if role == "daphne")
    return _fd_targets(pid)[1]


def test_daphne_opens_no_files_under_concurrent_load(live_host):
    """Every view thread and its database connection are open before daphne listens: a burst
    wider than the thread pool adds no file to daphne's open fds (it added the database file
    and its WAL for each thread the pool started late)."""
    before = _daphne_files(live_host)
    db = str(live_host.state_dir / "db.sqlite3")
    assert before.count(db) >= 8, f"{before}"  # one connection per view thread

    def burst(_):
        with live_host.mgmt() as c:
            for _ in range(5):
                assert c.get("/api/v1/library").status_code == 200

    with ThreadPoolExecutor(24) as pool:
        list(pool.map(burst, range(24)))
    after = _daphne_files(live_host)
    added = sorted((Counter(after) - Counter(before)).elements())
    assert added == [], f"daphne opened {added}"  # a str: pytest cuts a list's repr short


def test_plain_http_is_not_served(live_host):
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{live_host.mgmt_port}/api/v1/health", timeout=5)


def test_token_files_are_private_shell_assignments(live_host):
    for name, var in (("mgmt-token", "HOST_MGMT_TOKEN"), ("plugin-token", "HOST_PLUGIN_TOKEN")):
        path = live_host.state_dir / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        text = path.read_text()
        assert text.startswith(f"{var}=") and len(text.strip()) == len(var) + 1 + 64
    assert live_host.mgmt_token != live_host.plugin_token


def test_v1_401_without_and_200_with_the_token(live_host):
    with live_host.client() as c:
        r = c.get("/api/v1/host")
        assert r.status_code == 401 and "error" in r.json()
        pasted = (live_host.state_dir / "mgmt-token").read_text().strip()
        assert (
            c.get("/api/v1/host", headers={"Authorization": f"Bearer {pasted}"}).status_code == 401
        )
    with live_host.mgmt() as c:
        r = c.get("/api/v1/host")
        assert r.status_code == 200
        info = r.json()
        assert info["ports"]["mgmt"] == live_host.mgmt_port
        assert info["ports"]["https"] == live_host.base_port - 5
        assert info["ports"]["http"] == live_host.base_port


def test_oversized_bodies_get_413_in_each_api_shape(live_host):
    with live_host.mgmt() as c:
        huge = b"x" * (4 * 1024 * 1024 + 1)
        r = c.put("/api/v1/hooks", content=huge, headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert r.json() == {"error": "request body too large"}
    with live_host.client() as c:
        big = b"x" * (1024 * 1024 + 1)
        r = c.post("/api/password", content=big, headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert r.json()["status_code"] == 413


def test_a_2mb_hook_document_is_a_400_with_field_errors(live_host):
    entry = {"on": "host.started", "run": "true # " + "x" * 1000}
    doc = {"hooks": [entry] * 2048}  # about 2 MB of otherwise valid JSON
    with live_host.mgmt() as c:
        before = c.get("/api/v1/hooks").json()
        r = c.put("/api/v1/hooks", json=doc)
        assert r.status_code == 400, r.text
        assert r.json()["fields"]
        assert c.get("/api/v1/hooks").json() == before


def test_chunked_oversized_body_is_refused(live_host):
    def chunks():
        for _ in range(40):
            yield b"y" * 65536

    with live_host.client() as c:
        r = c.post("/api/password", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413


def test_malformed_json_and_wrong_content_type(live_host, admin_auth):
    with live_host.client(auth=admin_auth) as c:
        r = c.post("/api/password", content=b"{", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["status"] is False
        r = c.post("/api/password", content=b"a=b", headers={"Content-Type": "text/plain"})
        assert r.status_code == 400


def test_unknown_routes(live_host):
    with live_host.client() as c:
        assert c.get("/api/v1/nothing-here").status_code == 401
        r = c.get("/api/nothing-here")
        assert r.status_code == 404 and r.json()["status"] is False
    with live_host.mgmt() as c:
        r = c.get("/api/v1/nothing-here")
        assert r.status_code == 404 and r.json() == {"error": "not found"}


def test_admin_basic_and_security_headers(live_host, admin_auth):
    with live_host.client(auth=admin_auth) as c:
        r = c.get("/api/csrf-token")
        assert r.status_code == 200
        assert r.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
        assert "max-age" in r.headers["Strict-Transport-Security"]
    with live_host.client(auth=("admin", "wrong")) as c:
        r = c.get("/api/csrf-token")
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"].startswith("Basic realm=")


def test_api_docs_describe_both_apis(live_host):
    with live_host.client() as c:
        page = c.get("/api/docs")
        assert page.status_code == 200 and "swagger" in page.text.lower()
        schema = c.get("/api/schema", headers={"Accept": "application/json"})
        assert schema.status_code == 200
        assert "/api/v1/host" in schema.text and "/api/csrf-token" in schema.text


def test_secrets_never_reach_the_log(live_host):
    log = (live_host.state_dir / "logs" / "host.log").read_text(errors="replace")
    assert "Console: https://127.0.0.1:" in log
    assert live_host.mgmt_token not in log and live_host.plugin_token not in log
    # No access-log lines (their URLs may carry query strings) on the processes' output either.
    out = live_host.log_path.read_text(errors="replace")
    assert '"GET /api/v1/health' not in out and live_host.mgmt_token not in out


def _children(proc) -> dict[str, psutil.Process]:
    out = {}
    for child in psutil.Process(proc.pid).children():
        try:
            cmd = " ".join(child.cmdline())
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
        for name in ("daphne", "celery", "redis-server"):
            if name in cmd:
                out[name] = child
    return out


@pytest.mark.slow
def test_supervisor_restarts_a_crashed_child_and_stops_everything_on_sigterm():
    host = start_host()
    try:
        kids = _children(host.proc)
        assert {"daphne", "celery", "redis-server"} <= set(kids)
        all_pids = {p.pid for p in psutil.Process(host.proc.pid).children(recursive=True)}
        kids["daphne"].kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            new = _children(host.proc).get("daphne")
            if new and new.pid != kids["daphne"].pid:
                break
            time.sleep(0.2)
        host.wait_ready()
        all_pids |= {p.pid for p in psutil.Process(host.proc.pid).children(recursive=True)}
    finally:
        code = host.stop()
    assert code == 0
    time.sleep(0.5)
    leftovers = [
        p for p in all_pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
    ]
    assert leftovers == []


@pytest.mark.slow
def test_two_hosts_run_side_by_side_and_tokenless_mode():
    a = start_host()
    b = start_host(args=["--no-mgmt-token"])
    try:
        assert a.base_port != b.base_port
        with b.client() as c:
            r = c.get("/api/v1/host")
            assert r.status_code == 200
            assert r.json()["ports"]["mgmt"] == b.mgmt_port
        with a.client() as c:
            assert c.get("/api/v1/host").status_code == 401
    finally:
        assert a.stop() == 0
        assert b.stop() == 0


def test_tokenless_mode_refused_on_non_loopback_bind(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.update(
        {
            "HOST_STATE_DIR": str(tmp_path),
            "HOST_PORT": str(free_base_port()),
            "HOST_BIND": "0.0.0.0",
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
        }
    )
    r = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "runhost", "--no-mgmt-token"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "non-loopback" in r.stderr


def test_busy_port_is_reported_not_crashed(tmp_path, live_host):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.update(
        {
            "HOST_STATE_DIR": str(tmp_path),
            "HOST_PORT": str(live_host.base_port),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
        }
    )
    r = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "runhost"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "in use" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_sighup_restarts_on_the_same_ports():
    host = start_host()
    try:
        first = _children(host.proc)["daphne"].pid
        host.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            kids = _children(host.proc)
            if "daphne" in kids and kids["daphne"].pid != first:
                break
            time.sleep(0.2)
        host.wait_ready()
        with host.client() as c:
            assert c.get("/api/v1/health").status_code == 200
        assert host.proc.poll() is None  # same supervisor pid, re-executed in place
    finally:
        assert host.stop() == 0


def test_ssl_context_rejects_a_foreign_certificate(live_host, tmp_path):
    ctx = ssl.create_default_context()  # system CAs only: the self-signed cert must fail
    with pytest.raises((httpx.ConnectError, ssl.SSLError)):
        httpx.get(f"{live_host.url}/api/v1/health", verify=ctx, timeout=5)
