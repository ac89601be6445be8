"""The address rules of a compat session (compat.endpoint): whom it listens to and
where its video and audio may go."""

from __future__ import annotations

import logging

from compat import endpoint
from compat.endpoint import MediaEndpoint, SessionClient

PAYLOAD = "0123456789ABCDEF"
CLIENT = ("192.168.1.20", 50000)


def _video(legacy_ok: bool = False, client_ip: str | None = CLIENT[0]) -> MediaEndpoint:
    return MediaEndpoint("video", client_ip, PAYLOAD, legacy_ok=legacy_ok)


def test_the_clients_payload_ping_sets_the_destination():
    ep = _video()
    assert ep.offer(endpoint.ping(PAYLOAD, 1), CLIENT)
    assert ep.addr == CLIENT
    assert not ep.offer(endpoint.ping(PAYLOAD, 2), CLIENT)  # its next pings change nothing
    assert ep.addr == CLIENT and ep.ignored == 0


def test_another_ip_never_sets_or_moves_the_destination_even_with_the_payload():
    ep = _video(legacy_ok=True)
    assert not ep.offer(endpoint.ping(PAYLOAD, 1), ("192.168.1.66", 50000))
    assert not ep.offer(b"PING", ("10.0.0.5", 40000))
    assert ep.addr is None
    assert ep.offer(endpoint.ping(PAYLOAD, 1), CLIENT)
    assert not ep.offer(endpoint.ping(PAYLOAD, 2), ("192.168.1.66", 50000))
    assert ep.addr == CLIENT and ep.ignored == 3


def test_a_client_that_sends_payload_pings_is_not_impersonated_by_plain_PINGs():
    ep = _video(legacy_ok=False)
    for bad in (
        b"PING",
        endpoint.ping("FEDCBA9876543210", 1),  # someone else's payload
        PAYLOAD.encode(),  # the payload without its counter
        endpoint.ping(PAYLOAD, 1) + b"x",  # a prefix check would take any data starting with it
        b"",
    ):
        assert not ep.offer(bad, CLIENT)
    assert ep.addr is None and ep.ignored == 5


def test_legacy_clients_may_send_PING_from_their_ip():
    ep = _video(legacy_ok=True)
    assert ep.offer(b"PING", CLIENT)
    assert ep.addr == CLIENT


def test_the_port_may_move_before_the_first_datagram_and_never_after():
    ep = _video()
    assert ep.offer(endpoint.ping(PAYLOAD, 1), CLIENT)
    rebound = (CLIENT[0], 50001)
    assert ep.offer(endpoint.ping(PAYLOAD, 2), rebound)  # NAT rebinding during the handshake
    assert ep.addr == rebound
    ep.went_live()
    assert not ep.offer(endpoint.ping(PAYLOAD, 3), CLIENT)
    assert not ep.offer(endpoint.ping(PAYLOAD, 4), (CLIENT[0], 50002))
    assert ep.addr == rebound and ep.ignored == 2


def test_ipv4_mapped_addresses_are_the_same_client():
    ep = MediaEndpoint("audio", "::ffff:192.168.1.20", PAYLOAD, legacy_ok=False)
    assert ep.offer(endpoint.ping(PAYLOAD, 1), ("::ffff:192.168.1.20", 50000, 0, 0))
    assert ep.addr == CLIENT


def test_without_a_client_ip_nothing_is_accepted():
    ep = _video(client_ip=None)
    assert not ep.offer(endpoint.ping(PAYLOAD, 1), CLIENT)
    assert ep.addr is None


def test_a_stranger_is_logged_once_without_the_datagram(caplog):
    ep = _video()
    ep.offer(endpoint.ping(PAYLOAD, 1), CLIENT)
    ep.went_live()
    with caplog.at_level(logging.WARNING, logger="compat.engine"):
        for i in range(50):
            ep.offer(endpoint.ping(PAYLOAD, i), ("203.0.113.9", 4000 + i))
    assert ep.ignored == 50
    (record,) = caplog.records
    assert "203.0.113.9" in record.getMessage() and PAYLOAD not in record.getMessage()


def test_payload_pings_are_required_when_the_announce_promises_them():
    assert endpoint.payload_pings_required(0x03)  # what moonlight-common-c sends
    assert not endpoint.payload_pings_required(0x01)
    assert not endpoint.payload_pings_required(0)


def test_the_session_client_is_the_launching_ip_or_else_the_first_rtsp_peer(caplog):
    known = SessionClient("::ffff:192.168.1.20")
    assert known.admit("RTSP", "192.168.1.20", pin=True)
    assert not known.admit("RTSP", "192.168.1.66", pin=True)  # no re-pinning
    assert not known.admit("control stream", b"192.168.1.66")
    assert not known.admit("control stream", "")
    assert known.ip == "192.168.1.20" and known.refused == 3

    unknown = SessionClient("")
    assert not unknown.admit("control stream", "192.168.1.20")  # ENet cannot pin
    assert unknown.admit("RTSP", "192.168.1.20", pin=True)
    assert not unknown.admit("RTSP", "192.168.1.66", pin=True)
    assert unknown.ip == "192.168.1.20"


def test_the_launching_clients_address_reaches_the_stream():
    """/launch records the nvhttp peer as `remote`; the engine's Launch listens to it alone."""
    from compat import launchconfig

    arm = {"rikey": "00" * 16, "rikeyid": 1, "remote": "192.168.1.20"}
    assert launchconfig.make_launch(arm).client_ip == "192.168.1.20"
    assert launchconfig.make_launch({**arm, "remote": ""}).client_ip == ""
