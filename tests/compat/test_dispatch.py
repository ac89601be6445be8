"""nvhttp routing and XML, with the host faked: what each path answers over HTTP and HTTPS."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import pytest

from compat.nvhttp.coordinator import PairingCoordinator
from compat.nvhttp.dispatch import App, ClientInfo, Dispatcher, NvRequest, NvResponse, parse_query
from pairing import crypto
from tests.compat.test_coordinator import FakeBackend
from tests.support.certs import identity


class FakeHost(FakeBackend):
    def __init__(self):
        super().__init__()
        self.paired: set[str] = set()
        self.unpaired: list[str] = []
        self.games: dict[str, int] = {}  # fingerprint -> the app id of its own session

    def server_facts(self, client_name=""):
        return {"hostname": "box", "uniqueid": "U-1", "http_port": 47989, "https_port": 47984}

    def authorized_client(self, fp):
        return ClientInfo(fp, "tv", "UUID") if fp in self.paired else None

    def unpair_client(self, fp):
        self.unpaired.append(fp)
        return True

    def current_game(self, fp):
        return self.games.get(fp, 0)

    def list_apps(self):
        return [App(1234, "Desktop"), App(99, "Tom & <Jerry>")]

    def cover_png(self, app_id):
        return b"\x89PNG fake" if app_id == 1234 else None

    def tofu_offered(self, remote):
        return remote == "10.1.1.1"

    def mac_address(self, local):
        return "aa:bb:cc:dd:ee:ff"


@pytest.fixture
def host():
    h = FakeHost()
    return h, Dispatcher(h, PairingCoordinator(h))


def der(n=0):
    return crypto.cert_der(identity(n)[1])


def call(d, path, query="", https=False, peer=None, remote="10.0.0.5") -> NvResponse:
    return d.handle(NvRequest(path, parse_query(query), https, remote, "192.168.1.2", peer))


def root(resp: NvResponse) -> ET.Element:
    assert resp.body.startswith(b'<?xml version="1.0" encoding="utf-8"?>')
    return ET.fromstring(resp.body)


def test_serverinfo_over_http_has_the_fields_moonlight_reads(host):
    _, d = host
    r = root(call(d, "/serverinfo", "uniqueid=0123456789ABCDEF&uuid=x"))
    assert r.get("status_code") == "200"
    got = {child.tag: child.text for child in r}
    assert got["appversion"] == "7.1.431.-1"
    assert got["GfeVersion"] == "3.23.0.74"
    assert got["HttpsPort"] == "47984" and got["ExternalPort"] == "47989"
    assert got["PairStatus"] == "0"
    assert got["mac"] == "00:00:00:00:00:00"
    assert got["LocalIP"] == "192.168.1.2"
    assert got["ServerCodecModeSupport"] == "1"
    assert got["state"] == "SUNSHINE_SERVER_FREE" and got["currentgame"] == "0"
    assert got["uniqueid"] == "U-1" and got["hostname"] == "box"
    assert "TofuEnabled" not in got


def test_serverinfo_offers_tofu_only_to_trusted_peers(host):
    _, d = host
    r = root(call(d, "/serverinfo", remote="10.1.1.1"))
    assert r.find("TofuEnabled").text == "1"


def test_https_without_a_paired_certificate_is_refused_everywhere(host):
    h, d = host
    for path in ("/serverinfo", "/applist", "/appasset", "/pair", "/nope"):
        for peer in (None, der(3)):
            r = root(call(d, path, "uniqueid=1", https=True, peer=peer))
            assert r.get("status_code") == "401", path
            assert "Certificate verification failed" in r.get("status_message")
            assert r.get("query") == path


def test_serverinfo_names_the_callers_own_session_only(host):
    """Several clients stream at once: each one's /serverinfo says busy only for its own."""
    h, d = host
    mine, other = crypto.fingerprint_der(der(2)), crypto.fingerprint_der(der(3))
    h.paired |= {mine, other}
    h.games[other] = 99
    info = root(call(d, "/serverinfo", "uniqueid=1", https=True, peer=der(2)))
    assert info.find("currentgame").text == "0"
    assert info.find("state").text == "SUNSHINE_SERVER_FREE"
    info = root(call(d, "/serverinfo", "uniqueid=1", https=True, peer=der(3)))
    assert info.find("currentgame").text == "99"
    assert info.find("state").text == "SUNSHINE_SERVER_BUSY"


def test_https_with_a_paired_certificate_serves_pair_status_and_apps(host):
    h, d = host
    h.paired.add(crypto.fingerprint_der(der(2)))
    info = root(call(d, "/serverinfo", "uniqueid=1", https=True, peer=der(2)))
    assert info.find("PairStatus").text == "1"
    assert info.find("mac").text == "aa:bb:cc:dd:ee:ff"
    apps = root(call(d, "/applist", https=True, peer=der(2)))
    titles = [(a.find("AppTitle").text, a.find("ID").text) for a in apps.iter("App")]
    assert titles == [("Desktop", "1234"), ("Tom & <Jerry>", "99")]
    assert apps.find("App/IsHdrSupported").text == "0"
    chal = root(call(d, "/pair", "uniqueid=1&phrase=pairchallenge", https=True, peer=der(2)))
    assert chal.find("paired").text == "1"


def test_appasset_serves_png_and_refuses_bad_ids(host):
    h, d = host
    h.paired.add(crypto.fingerprint_der(der(2)))
    r = call(d, "/appasset", "appid=1234&AssetType=2&AssetIdx=0", https=True, peer=der(2))
    assert r.content_type == "image/png" and r.body.startswith(b"\x89PNG")
    assert (
        root(call(d, "/appasset", "appid=7", https=True, peer=der(2))).get("status_code") == "404"
    )
    for bad in ("appid=abc", "appid=", ""):
        assert root(call(d, "/appasset", bad, https=True, peer=der(2))).get("status_code") == "400"


def test_http_only_serves_the_public_routes(host):
    _, d = host
    assert root(call(d, "/applist")).get("status_code") == "404"
    assert root(call(d, "/launch", "appid=1")).get("status_code") == "404"
    assert root(call(d, "/pair", "phrase=getservercert")).get("status_message") == (
        "Missing uniqueid parameter"
    )
    assert root(call(d, "/pair", "uniqueid=1&phrase=bogus")).get("status_code") == "404"
    # Over plain HTTP the pair challenge proves nothing.
    assert root(call(d, "/pair", "uniqueid=1&phrase=pairchallenge")).find("paired").text == "0"


def test_unpair_over_https_removes_that_client(host):
    h, d = host
    fp = crypto.fingerprint_der(der(2))
    h.paired.add(fp)
    assert root(call(d, "/unpair", "uniqueid=1", https=True, peer=der(2))).get("status_code") == (
        "200"
    )
    assert h.unpaired == [fp]


def test_registered_routes_are_https_only_unless_asked(host):
    h, d = host
    d.register("launch", lambda req: NvResponse(b"launched " + req.client.name.encode()))
    h.paired.add(crypto.fingerprint_der(der(2)))
    assert call(d, "/launch", https=True, peer=der(2)).body == b"launched tv"
    assert root(call(d, "/launch")).get("status_code") == "404"


def test_a_crashing_handler_answers_xml_500(host):
    _, d = host
    d.register("boom", lambda req: 1 / 0, http=True)
    assert root(call(d, "/boom")).get("status_code") == "500"


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("a=1&a=2", {"a": "1"}),
        ("a=1&&b=", {"a": "1", "b": ""}),
        ("%zz=%ff&x", {"%zz": "\ufffd", "x": ""}),
        ("", {}),
    ],
)
def test_query_parsing_tolerates_junk(raw, expected):
    assert parse_query(raw) == expected


def test_too_many_query_fields_raise():
    with pytest.raises(ValueError):
        parse_query("&".join(f"k{i}=1" for i in range(100)))
