"""The mDNS instance name rules (reference B.8); announcing itself is tested end to end."""

from __future__ import annotations

import pytest

from compat.mdns import SERVICE_TYPE, instance_name


@pytest.mark.parametrize(
    "hostname,expected",
    [
        ("gaming-pc", "gaming-pc"),
        ("My Host", "My-Host"),
        ("box.example.org", "box"),
        ("ünicode", "Sunshine"),
        ("", "Sunshine"),
        ("a" * 80, "a" * 63),
    ],
)
def test_instance_name_follows_the_host_name(hostname, expected):
    assert instance_name(hostname) == expected


def test_service_type_is_what_moonlight_browses():
    assert SERVICE_TYPE == "_nvstream._tcp.local."
