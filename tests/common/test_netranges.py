"""The one address table: each caller's question gets the answer it relied on."""

from __future__ import annotations

import ipaddress

import pytest

from access import origin
from common import netranges
from compat.engine import encryption
from hooks import ssrf
from plugins.store import netfetch

# address: (console class, encryption class, webhook refused, store refused without / with
# the operator's loopback allowance)
CASES = {
    "127.0.0.1": ("pc", "lan", True, True, False),
    "127.0.0.2": ("pc", "lan", True, True, False),
    "::1": ("pc", "lan", True, True, False),
    "::ffff:127.0.0.1": ("pc", "lan", True, True, False),
    "10.1.2.3": ("lan", "lan", False, False, False),
    "172.16.0.1": ("lan", "lan", False, False, False),
    "172.32.0.1": ("wan", "wan", False, False, False),
    "192.168.1.1": ("lan", "lan", False, False, False),
    "::ffff:192.168.1.1": ("lan", "lan", False, False, False),
    "100.64.0.1": ("lan", "lan", False, False, False),
    "100.128.0.1": ("wan", "wan", False, False, False),
    "169.254.169.254": ("lan", "lan", True, True, True),
    "fe80::1": ("lan", "lan", True, True, True),
    "fe80::1%eth0": ("lan", "lan", True, True, True),
    "fd12:3456::1": ("lan", "lan", False, False, False),
    "0.0.0.0": ("wan", "wan", True, True, True),
    "0.1.2.3": ("wan", "wan", True, True, True),
    "::": ("wan", "wan", True, True, True),
    "::7f00:1": ("wan", "wan", True, True, False),  # IPv4-compatible 127.0.0.1
    "::a9fe:a9fe": ("wan", "wan", True, True, True),  # IPv4-compatible metadata address
    "8.8.8.8": ("wan", "wan", False, False, False),
    "2001:db8::1": ("wan", "wan", False, False, False),
    "not-an-address": ("wan", "wan", False, False, False),
}


@pytest.mark.parametrize(("ip", "want"), CASES.items())
def test_each_caller_classifies_the_address_as_it_expects(ip, want):
    console, enc, hook_refused, store_refused, store_refused_allowed = want
    assert origin.classify(ip) == console
    assert encryption.network_class(ip) == enc
    assert netranges.is_outbound_refused(ip) is hook_refused
    assert netranges.is_outbound_refused(ip, allow_loopback=True) is store_refused_allowed
    addr = netranges.parse(ip)
    if addr is None:
        return
    assert netranges.is_outbound_refused(addr) is store_refused
    literal = ip if ":" not in ip else f"[{ip.split('%')[0]}]"
    for check in (ssrf.check_url, lambda u: netfetch.check_url(u, allow_loopback=False)):
        url = f"https://{literal}/x"
        if hook_refused:
            with pytest.raises(ssrf.UrlRefused):
                check(url)
        else:
            check(url)


def test_the_predicates_take_address_objects_and_unwrap_ipv4_mapped():
    mapped = ipaddress.ip_address("::ffff:10.0.0.1")
    assert netranges.parse("::ffff:10.0.0.1") == ipaddress.ip_address("10.0.0.1")
    assert netranges.is_lan(mapped) and not netranges.is_loopback(mapped)
    assert netranges.is_loopback(ipaddress.ip_address("127.255.255.254"))
    assert netranges.is_loopback_or_lan("127.0.0.1") and netranges.is_loopback_or_lan("10.0.0.1")
    assert not netranges.is_loopback_or_lan("1.1.1.1")
    assert not netranges.is_lan("127.0.0.1")


@pytest.mark.parametrize(
    ("host", "want"),
    [
        ("localhost", True),
        ("LocalHost", True),
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("192.168.1.1", False),
        ("example.localhost.org", False),
        ("", False),
    ],
)
def test_loopback_host_is_localhost_or_a_loopback_literal(host, want):
    assert netranges.is_loopback_host(host) is want


@pytest.mark.parametrize(
    ("host", "want"),
    [
        ("localhost", True),
        ("LOCALHOST.", True),
        ("app.localhost", True),
        ("localhost.example.org", False),
        ("notlocalhost", False),
        ("127.0.0.1", False),  # an address: the range checks answer for it
    ],
)
def test_localhost_names_are_refused_by_both_outbound_rules(host, want):
    assert netranges.is_localhost_name(host) is want
    url = f"https://{host}/x"
    for check in (ssrf.check_url, lambda u: netfetch.check_url(u, allow_loopback=False)):
        if want or host == "127.0.0.1":
            with pytest.raises(ssrf.UrlRefused):
                check(url)
        else:
            check(url)
    assert netfetch.is_loopback_url(url) is (want or host == "127.0.0.1")


def test_in_networks_takes_an_operator_list_and_the_client_address_as_the_socket_gave_it():
    nets = [ipaddress.ip_network("192.168.5.0/24"), ipaddress.ip_network("fd00:1::/64")]
    assert netranges.in_networks("192.168.5.9", nets)
    assert netranges.in_networks("::ffff:192.168.5.9", nets)
    assert netranges.in_networks("fd00:1::2%eth0", nets)
    assert not netranges.in_networks("192.168.6.9", nets)
    assert not netranges.in_networks("garbage", nets)
    assert not netranges.in_networks("192.168.5.9", [])
