"""Pairing sessions: PIN wait, one handshake at a time, timeouts, events; no sockets, no DB."""

from __future__ import annotations

import threading
import time

import pytest

from compat.nvhttp.coordinator import COMPLETED, DENIED, PENDING, PairingCoordinator, PinGone
from pairing import crypto
from tests.compat.test_handshake import Client, host
from tests.support.certs import pem


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeBackend:
    """Stands in for the database and the event bus; `pin` plays the operator."""

    def __init__(self, auto=False):
        self.auto = auto
        self.requests: dict[int, dict] = {}
        self.events: list[tuple[str, str, str]] = []
        self.stored: list[tuple[str, str]] = []
        self.opened = threading.Event()

    def host_identity(self):
        return host()

    def auto_pair(self, remote, params):
        return self.auto and params.get("trustedpair") == "1"

    def open_pin_request(self, *, device, fingerprint, salt, remote):
        rid = len(self.requests) + 1
        self.requests[rid] = {"salt": salt, "key": None, "name": ""}
        self.opened.set()
        return rid

    def poll_pin(self, rid):
        req = self.requests.get(rid)
        if req is None:
            return PinGone()
        return (req["key"], req["name"]) if req["key"] else None

    def close_pin_request(self, rid):
        self.requests.pop(rid, None)

    def store_client(self, cert, fingerprint, name):
        self.stored.append((fingerprint, name))

    def emit(self, kind, name, fingerprint):
        self.events.append((kind, name, fingerprint))

    def pin(self, pin, name="tv"):
        assert self.opened.wait(5)
        rid = next(iter(self.requests))
        self.requests[rid].update(key=crypto.derive_key(self.requests[rid]["salt"], pin), name=name)

    def kinds(self):
        return [e[0] for e in self.events]


def knock(co, c: Client, remote="10.0.0.5", cancelled=None, **extra):
    params = {
        "devicename": "roth\x07",
        "salt": c.salt.hex(),
        "clientcert": pem(c.cert).hex(),
        **extra,
    }
    return co.get_server_cert(
        uniqueid="0123456789ABCDEF", remote=remote, params=params, cancelled=cancelled
    )


def in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()))
    t.start()
    return t, box


def make(clock=None, **kw):
    be = FakeBackend(**{k: v for k, v in kw.items() if k == "auto"})
    co = PairingCoordinator(
        be, pin_timeout=60, step_timeout=30, poll_interval=0.01, clock=clock or time.monotonic
    )
    return be, co


def finish(co, c: Client, remote="10.0.0.5"):
    uid = "0123456789ABCDEF"
    r = co.client_challenge(uid, remote, c.client_challenge().hex())
    enc, _ = c.answer(bytes.fromhex(r.fields["challengeresponse"]), b"")
    r = co.server_challenge_response(uid, remote, enc.hex())
    assert r.fields["paired"] == "1"
    return co.client_pairing_secret(uid, remote, c.pairing_secret().hex())


def test_a_pin_completes_the_parked_request_and_pairing_stores_the_client():
    be, co = make()
    c = Client("4821")
    t, box = in_thread(lambda: knock(co, c))
    be.pin("4821", name="Living room")
    t.join(5)
    r = box["r"]
    assert (r.status, r.fields["paired"]) == (200, "1")
    assert bytes.fromhex(r.fields["plaincert"]) == host().cert_pem
    assert finish(co, c).fields["paired"] == "1"
    fp = crypto.fingerprint(c.cert)
    assert be.stored == [(fp, "Living room")]
    assert be.kinds() == [PENDING, COMPLETED]
    assert be.events[0][1] == "roth"  # control characters stripped from the device name
    assert be.requests == {}  # nothing left behind


def test_a_wrong_pin_stores_nothing_and_is_denied():
    be, co = make()
    c = Client("1111")
    t, box = in_thread(lambda: knock(co, c))
    be.pin("2222")
    t.join(5)
    r = finish(co, c)
    assert r.fields["paired"] == "0"
    assert be.stored == []
    assert be.kinds() == [PENDING, DENIED]


def test_a_client_that_aborts_after_a_wrong_pin_is_denied_once():
    be, co = make()
    c = Client("1111")
    t, box = in_thread(lambda: knock(co, c))
    be.pin("2222")
    t.join(5)
    co.client_challenge("0123456789ABCDEF", "10.0.0.5", c.client_challenge().hex())
    assert co.abort("10.0.0.9") is False  # another address cannot end it
    assert co.abort("10.0.0.5") is True
    assert be.kinds() == [PENDING, DENIED]
    assert co.abort("10.0.0.5") is False


def test_no_pin_in_time_times_out_with_a_denial():
    clock = Clock()
    be, co = make(clock)
    c = Client("1111")
    t, box = in_thread(lambda: knock(co, c))
    assert be.opened.wait(5)
    clock.now += 61
    t.join(5)
    assert box["r"].status == 408 and box["r"].fields["paired"] == "0"
    assert be.kinds() == [PENDING, DENIED]
    assert be.requests == {}


def test_a_client_that_hangs_up_while_waiting_is_denied():
    be, co = make()
    gone = threading.Event()
    t, box = in_thread(lambda: knock(co, Client("1"), cancelled=gone))
    assert be.opened.wait(5)
    gone.set()
    t.join(5)
    assert be.kinds() == [PENDING, DENIED] and be.requests == {}


def test_a_client_that_vanishes_mid_handshake_is_reaped():
    clock = Clock()
    be, co = make(clock)
    c = Client("1234")
    t, box = in_thread(lambda: knock(co, c))
    be.pin("1234")
    t.join(5)
    clock.now += 31
    co.reap()
    assert be.kinds() == [PENDING, DENIED]
    r = co.client_challenge("0123456789ABCDEF", "10.0.0.5", c.client_challenge().hex())
    assert r.status == 400  # the session is gone


def test_a_second_device_is_told_pairing_is_in_progress():
    be, co = make()
    first, second = Client("1234", n=0), Client("1234", n=1)
    t, box = in_thread(lambda: knock(co, first))
    assert be.opened.wait(5)
    r = knock(co, second, remote="10.0.0.6")
    assert r.status == 200 and r.fields == {"paired": "1"}  # no plaincert: already pairing
    be.pin("1234")
    t.join(5)
    assert finish(co, first).fields["paired"] == "1"
    fp2 = crypto.fingerprint(second.cert)
    assert (DENIED, "roth", fp2) in be.events
    assert [s[0] for s in be.stored] == [crypto.fingerprint(first.cert)]


def test_the_same_device_knocking_again_replaces_its_stale_attempt_and_pends_once():
    be, co = make()
    c = Client("1234")
    t1, box1 = in_thread(lambda: knock(co, c))
    assert be.opened.wait(5)
    c2 = Client("1234")  # same certificate, new salt
    t2, box2 = in_thread(lambda: knock(co, c2))
    t1.join(5)
    assert box1["r"].fields["paired"] == "0"
    deadline = time.monotonic() + 5
    while len(be.requests) != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    be.pin("1234")
    t2.join(5)
    assert box2["r"].fields["paired"] == "1"
    assert be.kinds().count(PENDING) == 1


@pytest.mark.parametrize(
    "params,message",
    [
        ({"salt": "zz" * 16}, "not hex"),
        ({"salt": "ab" * 8}, "Salt"),
        ({"clientcert": "00ff"}, "certificate"),
        ({"clientcert": ""}, "Missing"),
    ],
)
def test_bad_knocks_are_refused_without_a_session(params, message):
    be, co = make()
    c = Client("1")
    base = {"devicename": "x", "salt": c.salt.hex(), "clientcert": pem(c.cert).hex()}
    r = co.get_server_cert(uniqueid="u", remote="r", params={**base, **params})
    assert r.status == 400 and message in r.message and r.fields == {"paired": "0"}
    assert be.requests == {} and be.events == [] and not co.pin_pending


def test_garbage_in_a_later_step_ends_the_session_with_a_denial():
    be, co = make()
    c = Client("1234")
    t, box = in_thread(lambda: knock(co, c))
    be.pin("1234")
    t.join(5)
    r = co.client_challenge("0123456789ABCDEF", "10.0.0.5", "not-hex")
    assert r.status == 400 and r.fields["paired"] == "0"
    assert be.kinds() == [PENDING, DENIED]


def test_steps_from_another_address_do_not_touch_the_session():
    be, co = make()
    c = Client("1234")
    t, box = in_thread(lambda: knock(co, c))
    be.pin("1234")
    t.join(5)
    r = co.client_challenge("0123456789ABCDEF", "10.9.9.9", c.client_challenge().hex())
    assert r.status == 400
    assert finish(co, c).fields["paired"] == "1"


def test_trusted_auto_pairing_needs_no_operator():
    be, co = make(auto=True)
    c = Client("0000")
    r = knock(co, c, trustedpair="1")
    assert r.fields["paired"] == "1" and "plaincert" in r.fields
    assert finish(co, c).fields["paired"] == "1"
    assert be.kinds() == [COMPLETED]
    assert be.requests == {}


def test_salt_hex_case_does_not_matter():
    be, co = make(auto=True)
    c = Client("0000")
    params = {"salt": c.salt.hex().upper(), "clientcert": pem(c.cert).hex(), "trustedpair": "1"}
    r = co.get_server_cert(uniqueid="u", remote="r", params=params)
    assert r.fields["paired"] == "1"


def test_shutdown_releases_a_request_held_for_its_pin():
    be, co = make()
    t, box = in_thread(lambda: knock(co, Client("1")))
    assert be.opened.wait(5)
    co.shutdown()
    t.join(5)
    assert not t.is_alive() and box["r"].fields["paired"] == "0"
    assert be.requests == {} and DENIED not in be.kinds()


def test_a_failing_pin_lookup_ends_the_session_instead_of_parking_it():
    be, co = make()

    def broken(rid):
        raise RuntimeError("database is locked")

    be.poll_pin = broken
    with pytest.raises(RuntimeError):
        knock(co, Client("1"))
    assert not co.pin_pending and be.requests == {}
    assert be.kinds() == [PENDING, DENIED]
