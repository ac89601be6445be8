"""Three real hosts, each in its own network namespace on one private LAN
(tests/support/netns_hosts.py): each answers over TLS at its own address with its own
certificate, its link can be cut and restored, and a restart keeps its identity and data."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time

import httpx
import pytest

from tests.support import netns_hosts
from tests.support.netns_hosts import netns_hosts as start_lan
from tests.support.netns_hosts import peer_fingerprint

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout)


@pytest.fixture(scope="module")
def lan():
    netns_hosts.require_netns()
    started = time.monotonic()
    with start_lan(3) as lan:
        took = time.monotonic() - started
        mib = [h.memory_bytes() / 2**20 for h in lan.hosts]
        print(
            f"\nnetns hosts: 3 ready in {took:.1f} s; PSS per host "
            + ", ".join(f"{m:.0f}" for m in mib)
            + f" MiB (total {sum(mib):.0f} MiB)"
        )
        yield lan


def _health(host, timeout: float = 5.0) -> httpx.Response:
    with host.client(timeout=timeout) as c:
        return c.get("/api/v1/health")


def _reachable_within(host, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if _health(host, timeout=2).status_code == 200:
                return True
        except UNREACHABLE:
            time.sleep(0.2)
    return False


def test_each_host_answers_at_its_own_address_with_its_own_certificate(lan):
    ips = [ipaddress.ip_address(h.ip) for h in lan.hosts]
    assert len(set(ips)) == 3 and all(ip in lan.subnet for ip in ips)
    for host in lan.hosts:
        assert host.url == f"https://{host.ip}:{netns_hosts.BASE_PORT + 1}"
        assert peer_fingerprint(host.ip, host.port) == host.fingerprint
        r = _health(host)
        assert r.status_code == 200, r.text
        with host.mgmt() as c:
            assert c.get("/api/v1/host").status_code == 200
        with host.client() as c:
            assert c.get("/api/v1/host").status_code == 401  # the token is what lets it in
    assert len({h.fingerprint for h in lan.hosts}) == 3
    assert len({h.mgmt_token for h in lan.hosts}) == 3


def test_hosts_reach_each_other_over_the_lan(lan):
    a, b = lan.hosts[0], lan.hosts[1]
    probe = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)"
    run = ["ip", "netns", "exec", a.namespace, sys.executable, "-c", probe]
    assert subprocess.run([*run, b.ip, str(b.port)], timeout=20).returncode == 0
    # Its own loopback is its namespace's: the root namespace's 127.0.0.1 is not there.
    refused = subprocess.run([*run, "127.0.0.1", str(b.port)], capture_output=True, timeout=20)
    assert refused.returncode != 0


def test_manage_runs_in_the_namespace_against_the_hosts_state(lan):
    host = lan.hosts[1]
    client = f"netns-{host.namespace}"
    payload = {"session": {"id": 7, "client": client, "mode": "1280x720@60", "hdr": False}}
    host.manage("emit_event", "session.started", json.dumps(payload))
    with host.mgmt(timeout=httpx.Timeout(10, read=15)) as c:
        url = "/api/v1/events?since=0&kinds=session.*"
        with c.stream("GET", url) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data:") and client in line:
                    break
            else:
                pytest.fail("the event emitted in the namespace never reached the stream")
    for other in (lan.hosts[0], lan.hosts[2]):  # each host has its own Redis and bus
        with other.mgmt(timeout=httpx.Timeout(10, read=2)) as c:
            with c.stream("GET", "/api/v1/events?since=0&kinds=session.*") as r:
                try:
                    seen = any(client in line for line in r.iter_lines())
                except httpx.ReadTimeout:
                    seen = False
            assert not seen


def test_cut_makes_a_host_unreachable_and_restore_brings_it_back(lan):
    host, other = lan.hosts[2], lan.hosts[0]
    host.cut()
    try:
        with pytest.raises(UNREACHABLE):
            _health(host, timeout=2)
        assert _health(other).status_code == 200  # the others are unaffected
    finally:
        host.restore()
    assert _reachable_within(host, 20)


def test_delay_slows_a_hosts_answers(lan):
    if not netns_hosts.netem_available():
        pytest.skip("the kernel has no netem qdisc (sch_netem)")
    host = lan.hosts[2]
    host.delay(300)
    try:
        started = time.monotonic()
        assert _health(host).status_code == 200
        assert time.monotonic() - started >= 0.6  # TCP handshake and request: two trips
    finally:
        host.restore()


def test_relay_is_a_slow_link_to_a_host_with_its_certificate(lan):
    host = lan.hosts[1]
    relay = lan.relay(host, delay_ms=0)
    url = lan.relay_url(relay)
    assert peer_fingerprint(lan.gateway, relay.port) == host.fingerprint
    with httpx.Client(base_url=url, verify=host.ssl_context(), timeout=10) as c:
        started = time.monotonic()
        assert c.get("/api/v1/health").status_code == 200
        fast = time.monotonic() - started
        relay.delay_ms = 400
        started = time.monotonic()
        assert c.get("/api/v1/health").status_code == 200  # the kept connection: one trip
        slow = time.monotonic() - started
    assert slow >= 0.8 > fast, (fast, slow)  # request and answer each 400 ms late


def test_restart_keeps_identity_tokens_and_data(lan):
    host = lan.hosts[0]
    name = f"netns-{host.namespace}"
    with host.mgmt() as c:
        r = c.put("/api/v1/host/config", json={"general": {"host_name": name}})
        assert r.status_code == 200, r.text
    fingerprint, token = host.fingerprint, host.mgmt_token
    assert host.stop() == 0
    assert netns_hosts.namespace_pids(host.namespace) == []
    with pytest.raises(UNREACHABLE):
        _health(host, timeout=2)
    started = time.monotonic()
    host.start()
    print(f"\nnetns host restart: ready in {time.monotonic() - started:.1f} s")
    assert peer_fingerprint(host.ip, host.port) == fingerprint
    assert host.mgmt_token == token
    with host.mgmt() as c:
        got = c.get("/api/v1/host/config").json()
    assert got["settings"]["general"]["host_name"] == name
