"""End to end: a real Moonlight client (moonlight-python) against the running host."""

from __future__ import annotations

import secrets
import socket
import ssl
import threading
import time

import httpx
import pytest
from moonlight_python.exceptions import HttpResponseError, PairingAlreadyInProgress, WrongPinError
from zeroconf import IPVersion, ServiceBrowser, ServiceListener, Zeroconf

from compat.mdns import SERVICE_TYPE
from tests.support.moonlight import (
    Moonlight,
    TrustedPairHTTP,
    host_config,
    pairing_events,
    post_pin,
    wait_compat_plane,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def compat_plane(live_host):
    wait_compat_plane(live_host)


def listed(host, auth, fingerprint: str) -> tuple[bool, bool]:
    with host.mgmt() as c:
        v1 = any(r["fingerprint"] == fingerprint for r in c.get("/api/v1/clients").json())
    with host.client(auth=auth) as c:
        certs = c.get("/api/clients/list").json()["named_certs"]
    return v1, any(n["cert"] == fingerprint for n in certs)


def test_moonlight_pairs_with_a_pin_lists_apps_and_cannot_return_after_unpair(
    live_host, admin_auth, tmp_path
):
    ml = Moonlight(live_host, tmp_path)
    assert ml.server.app_version == "7.1.431.-1" and not ml.server.paired
    ml.start_pairing("4821")
    assert post_pin(live_host, admin_auth, "4821", "Living room")["status"] is True
    ml.wait_paired()
    assert ml.error is None, ml.error
    assert "Desktop" in [a.name for a in ml.apps()]
    assert "<PairStatus>1</PairStatus>" in ml.https("serverinfo")
    assert listed(live_host, admin_auth, ml.fingerprint) == (True, True)
    with live_host.mgmt() as c:
        (rec,) = [r for r in c.get("/api/v1/clients").json() if r["fingerprint"] == ml.fingerprint]
        assert rec["name"] == "Living room" and rec["last_seen_unix"] is not None
    desktop = next(a for a in ml.apps() if a.name == "Desktop")
    cert = (tmp_path / "cert.pem", tmp_path / "key.pem")
    asset = raw_https(
        live_host, f"GET /appasset?appid={desktop.id}&AssetType=2 HTTP/1.1\r\n\r\n".encode(), cert
    )
    head, _, body = asset.partition(b"\r\n\r\n")
    assert b"Content-Type: image/png" in head and body.startswith(b"\x89PNG\r\n\x1a\n")
    kinds = [
        e["kind"]
        for e in pairing_events(live_host, ml.fingerprint, {"pairing.pending", "pairing.completed"})
    ]
    assert kinds == ["pairing.pending", "pairing.completed"]

    with live_host.mgmt() as c:
        r = c.delete(f"/api/v1/clients/{ml.fingerprint.upper()}")
        assert r.status_code == 204
    assert listed(live_host, admin_auth, ml.fingerprint) == (False, False)
    with pytest.raises(HttpResponseError) as exc:
        ml.apps()
    assert exc.value.status_code == 401
    assert 'status_code="401"' in ml.https("serverinfo")


def test_a_wrong_pin_fails_stores_nothing_and_is_denied(live_host, admin_auth, tmp_path):
    ml = Moonlight(live_host, tmp_path)
    ml.start_pairing("1111")
    assert post_pin(live_host, admin_auth, "2222", "nope")["status"] is True
    ml.wait_paired()
    assert isinstance(ml.error, WrongPinError)
    assert listed(live_host, admin_auth, ml.fingerprint) == (False, False)
    kinds = {e["kind"] for e in pairing_events(live_host, ml.fingerprint, {"pairing.denied"})}
    assert "pairing.denied" in kinds and "pairing.completed" not in kinds


def wait_for_knock(c: httpx.Client, timeout: float = 20) -> None:
    """Until the /pin page lists a device waiting for its PIN."""
    deadline = time.monotonic() + timeout
    while "No device is waiting" in c.get("/pin").text:
        assert time.monotonic() < deadline, "no device knocked"
        time.sleep(0.1)


def pin_page_submit(host, auth, pin: str, name: str) -> httpx.Response:
    with host.client(auth=auth) as c:
        page = c.get("/pin")
        assert page.status_code == 200
        token = c.cookies.get("csrftoken")
        wait_for_knock(c)
        return c.post(
            "/pin",
            data={"pin": pin, "name": name, "csrfmiddlewaretoken": token},
            headers={"Referer": f"{host.url}/pin"},
        )


def test_pin_page_pairs_and_a_disabled_client_is_refused_until_enabled(
    live_host, admin_auth, tmp_path
):
    ml = Moonlight(live_host, tmp_path)
    ml.start_pairing("0427")
    r = pin_page_submit(live_host, admin_auth, "0427", "Deck")
    assert r.status_code == 200 and "PIN accepted" in r.text
    ml.wait_paired()
    assert ml.error is None, ml.error
    with live_host.client(auth=admin_auth) as c:
        (entry,) = [
            n
            for n in c.get("/api/clients/list").json()["named_certs"]
            if n["cert"] == ml.fingerprint
        ]
        assert entry["name"] == "Deck"
        r = c.post("/api/clients/update", json={"uuid": entry["uuid"], "enabled": False})
        assert r.json()["status"] is True
        with pytest.raises(HttpResponseError) as exc:
            ml.apps()
        assert exc.value.status_code == 401
        c.post("/api/clients/update", json={"uuid": entry["uuid"], "enabled": True})
        assert ml.apps()
        assert c.post("/api/clients/unpair", json={"uuid": entry["uuid"]}).json()["status"]
    with pytest.raises(HttpResponseError):
        ml.apps()


def test_a_second_device_is_told_to_wait_while_one_pairs(live_host, admin_auth, tmp_path):
    first = Moonlight(live_host, tmp_path / "a")
    second = Moonlight(live_host, tmp_path / "b")
    first.start_pairing("1234")
    with live_host.client(auth=admin_auth) as c:
        wait_for_knock(c)
    second.start_pairing("9999")
    second.wait_paired(10)
    assert isinstance(second.error, PairingAlreadyInProgress)
    post_pin(live_host, admin_auth, "1234", "first")
    first.wait_paired()
    assert first.error is None, first.error
    assert listed(live_host, admin_auth, first.fingerprint) == (True, True)
    assert listed(live_host, admin_auth, second.fingerprint) == (False, False)
    with live_host.mgmt() as c:
        c.delete(f"/api/v1/clients/{first.fingerprint}")


def test_trusted_subnet_auto_pairing_needs_no_pin_entry(live_host, admin_auth, tmp_path):
    ml = Moonlight(live_host, tmp_path)
    http = TrustedPairHTTP(
        "127.0.0.1", ml.identity, http_port=live_host.base_port, https_port=live_host.base_port - 5
    )
    plain = httpx.get(f"http://127.0.0.1:{live_host.base_port}/serverinfo?uniqueid=1")
    assert "TofuEnabled" not in plain.text
    with host_config(
        live_host,
        {
            "trusted_subnet_auto_pairing": "true",
            "trusted_subnets": "10.9.0.0/16,127.0.0.0/8,fd00::/8",
        },
    ):
        plain = httpx.get(f"http://127.0.0.1:{live_host.base_port}/serverinfo?uniqueid=1")
        assert "<TofuEnabled>1</TofuEnabled>" in plain.text
        ml.start_pairing("0000", http=http)
        ml.wait_paired(20)
    assert ml.error is None, ml.error
    assert "Desktop" in [a.name for a in ml.apps()]
    with live_host.mgmt() as c:
        assert c.delete(f"/api/v1/clients/{ml.fingerprint}").status_code == 204


def test_a_client_that_hangs_up_while_waiting_leaves_no_request(live_host, admin_auth, tmp_path):
    ml = Moonlight(live_host, tmp_path)
    query = (
        f"uniqueid=0123456789ABCDEF&devicename=x&updateState=1&phrase=getservercert"
        f"&salt={'ab' * 16}&clientcert={ml.identity.cert_pem.hex()}"
    )
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"http://127.0.0.1:{live_host.base_port}/pair?{query}", timeout=1.5)
    deadline = time.monotonic() + 5
    with live_host.client(auth=admin_auth) as c:
        while "No device is waiting" not in c.get("/pin").text:
            assert time.monotonic() < deadline, "the abandoned request is still waiting"
            time.sleep(0.1)
        assert c.post("/api/pin", json={"pin": "1234"}).json()["status"] is False
    kinds = {e["kind"] for e in pairing_events(live_host, ml.fingerprint, {"pairing.denied"})}
    assert kinds == {"pairing.pending", "pairing.denied"}


def raw_https(host, request: bytes, cert=None) -> bytes:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(*cert)
    sock = socket.create_connection(("127.0.0.1", host.base_port - 5), timeout=10)
    with sock, ctx.wrap_socket(sock) as tls:
        tls.sendall(request)
        out = b""
        while chunk := tls.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize(
    "request_line",
    [
        b"GET /serverinfo?uniqueid=1 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /applist?%%%&&&=&uniqueid HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /pair?uniqueid=1&clientchallenge=zz HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
)
def test_https_without_a_certificate_gets_the_401_document(live_host, request_line):
    out = raw_https(live_host, request_line)
    assert out.startswith(b"HTTP/1.1 200")
    assert b'status_code="401"' in out and b"Certificate verification failed" in out


def test_http_garbage_gets_xml_errors_never_a_crash(live_host):
    base = f"http://127.0.0.1:{live_host.base_port}"
    cases = {
        "/pair?uniqueid=1&clientchallenge=nothex": 'status_code="400"',
        "/pair?uniqueid=1&phrase=getservercert&salt=00&clientcert=00": 'status_code="400"',
        "/pair?uniqueid=1&phrase=getservercert&salt=" + "ab" * 16 + "&clientcert=zz": "not hex",
        "/pair?" + "&".join(f"k{i}=1" for i in range(200)): "Malformed query",
        "/nothing": 'status_code="404"',
    }
    for path, expect in cases.items():
        r = httpx.get(base + path)
        assert r.status_code == 200 and expect in r.text, path
    assert 'status_code="405"' in httpx.post(base + "/serverinfo").text
    assert "<hostname>" in httpx.get(base + "/serverinfo").text  # still serving


class _Found(ServiceListener):
    """Follows one instance name only, so another host announcing on the network (another test
    run on the same machine, say) can neither satisfy nor disturb the test."""

    def __init__(self, name: str, port: int):
        self.name = f"{name}.{SERVICE_TYPE}"
        self.port = port
        self.added = threading.Event()
        self.removed = threading.Event()

    def add_service(self, zc, type_, name):
        if name != self.name:
            return
        info = zc.get_service_info(type_, name, timeout=3000)
        if info and info.port == self.port and "127.0.0.1" in info.parsed_addresses():
            self.added.set()

    def remove_service(self, zc, type_, name):
        if name == self.name:
            self.removed.set()

    def update_service(self, zc, type_, name):
        pass


@pytest.mark.slow
def test_mdns_announces_while_the_compat_switch_is_on(live_host):
    """The host announces under its own name (`general.host_name`), follows a rename without a
    restart, and withdraws and re-announces with the compat switch."""
    unique = f"mdns-test-{secrets.token_hex(4)}"
    zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    with live_host.mgmt() as c:
        before = c.get("/api/v1/host/config").json()["settings"]["general"]["host_name"]
        try:
            found = _Found(unique, live_host.base_port)
            browser = ServiceBrowser(zc, SERVICE_TYPE, found)
            r = c.put("/api/v1/host/config", json={"general": {"host_name": unique}})
            assert r.status_code == 200, r.text
            assert found.added.wait(15), "the host was not discovered under its new name"
            assert c.put("/api/v1/host/compat", json={"enabled": False}).status_code == 200
            try:
                assert found.removed.wait(15), "the record was not withdrawn"
                found.added.clear()
            finally:
                assert c.put("/api/v1/host/compat", json={"enabled": True}).status_code == 200
            assert found.added.wait(15), "the host was not announced again"
            browser.cancel()
        finally:
            zc.close()
            c.put("/api/v1/host/config", json={"general": {"host_name": before}})
