"""Native pairing by approval against the live host: the offer endpoint as the player uses it,
the /api/v1/native routes as the operator does, and the events both produce."""

from __future__ import annotations

import pytest

from tests.native.helpers import Knocker, device_events, fake_fp, last_seq, offer_sdp

pytestmark = pytest.mark.e2e


@pytest.fixture
def knocker(live_host):
    k = Knocker(live_host)
    yield k
    k.close()


@pytest.fixture
def api(live_host):
    with live_host.mgmt() as c:
        yield c
    # leave no pending devices behind for the next test
    with live_host.mgmt() as c:
        for p in c.get("/api/v1/native/pending").json():
            c.post(f"/api/v1/native/pending/{p['id']}/deny")


def test_pending_once_approve_and_listings(live_host, knocker, api, admin_auth):
    fp, since = fake_fp(), last_seq(live_host)
    r1 = knocker.knock(fp, name="Living\u202eroom \x07 TV  ")
    r2 = knocker.knock(fp, name="Living\u202eroom \x07 TV  ")
    assert r1.status_code == r2.status_code == 202, r1.text
    assert r1.json()["id"] == r2.json()["id"]  # a re-knock keeps the id
    pending = [p for p in api.get("/api/v1/native/pending").json() if p["fingerprint"] == fp]
    assert len(pending) == 1
    entry = pending[0]
    assert entry["name"] == "Livingroom TV" and entry["age_secs"] >= 0

    r = api.post(f"/api/v1/native/pending/{entry['id']}/approve", json={"name": "Den"})
    assert r.status_code == 200 and r.json() == {"name": "Den", "fingerprint": fp}
    assert api.post(f"/api/v1/native/pending/{entry['id']}/approve").status_code == 404
    assert api.post("/api/v1/native/pending/999999/deny").status_code == 404

    assert {"name": "Den", "fingerprint": fp} in api.get("/api/v1/native/clients").json()
    v1 = {c["fingerprint"]: c for c in api.get("/api/v1/clients").json()}
    assert v1[fp]["plane"] == "native" and v1[fp]["name"] == "Den"
    with live_host.client(auth=admin_auth) as admin:
        certs = admin.get("/api/clients/list").json()["named_certs"]
    assert any(c["cert"] == fp for c in certs)
    assert api.get("/api/v1/native/pair").json()["paired_clients"] >= 1

    kinds = device_events(live_host, since, "pairing.*", fp)
    assert kinds == ["pairing.pending", "pairing.completed"]

    # Disabling refuses it; unpairing makes it pending again.
    uuid = v1[fp]["uuid"]
    with live_host.client(auth=admin_auth) as admin:
        r = admin.post("/api/clients/update", json={"uuid": uuid, "enabled": False})
        assert r.json()["status"] is True
    r = knocker.knock(fp)
    assert r.status_code == 403 and "disabled" in r.json()["error"]
    assert api.delete("/api/v1/native/clients/" + "g" * 64).status_code == 400
    assert api.delete(f"/api/v1/native/clients/{fp.upper()}").status_code == 204
    assert api.delete(f"/api/v1/native/clients/{fp}").status_code == 404
    assert knocker.knock(fp).status_code == 202


def test_deny_then_retry(live_host, knocker, api):
    fp, since = fake_fp(), last_seq(live_host)
    pid = knocker.knock(fp, name="kid").json()["id"]
    assert api.post(f"/api/v1/native/pending/{pid}/deny").status_code == 204
    assert api.post(f"/api/v1/native/pending/{pid}/deny").status_code == 404
    r = knocker.knock(fp, name="kid")
    assert r.status_code == 403 and "denied" in r.json()["error"]
    again = knocker.knock(fp, name="kid")  # deny is not a blocklist
    assert again.status_code == 202 and again.json()["id"] != pid
    assert device_events(live_host, since, "pairing.*", fp) == [
        "pairing.pending",
        "pairing.denied",
        "pairing.pending",
    ]


def test_per_ip_cap_says_so(knocker, api):
    fps = [fake_fp() for _ in range(5)]
    codes = [knocker.knock(fp).status_code for fp in fps[:4]]
    assert codes == [202] * 4
    r = knocker.knock(fps[4])
    assert r.status_code == 429
    assert "4 per address" in r.json()["error"]
    assert knocker.knock(fps[0]).status_code == 202  # known devices may still re-knock


def test_arm_pin_self_pairing(live_host, knocker, api):
    assert api.post("/api/v1/native/pair/arm", json={"ttl_secs": 1}).json()["expires_in_secs"] <= 15
    big = api.post("/api/v1/native/pair/arm", json={"ttl_secs": 100000}).json()
    assert 590 <= big["expires_in_secs"] <= 600 and big["armed"]
    assert api.post("/api/v1/native/pair/arm", json={"ttl_secs": "x"}).status_code == 400
    assert api.delete("/api/v1/native/pair").status_code == 204
    assert api.get("/api/v1/native/pair").json()["armed"] is False

    bound, other = fake_fp(), fake_fp()
    status = api.post("/api/v1/native/pair/arm", json={"fingerprint": f" {bound.upper()} "}).json()
    pin = status["pin"]
    assert len(pin) == 4 and pin.isdigit()
    assert knocker.knock(other, pin=pin).status_code == 202  # bound elsewhere: not consumed
    assert api.get("/api/v1/native/pair").json()["armed"] is True
    wrong = f"{(int(pin) + 1) % 10000:04d}"
    r = knocker.knock(bound, pin=wrong)
    assert r.status_code == 403 and "4 more wrong PINs" in r.json()["error"]
    assert api.get("/api/v1/native/pair").json()["wrong_pins"] == 1
    r = knocker.knock(bound, name="pin pad", pin=pin)
    # Paired now; the fake SDP has no ICE/DTLS, so the session itself fails to start.
    assert r.status_code == 400, r.text
    assert api.get("/api/v1/display/state").json()["displays"] == []  # nothing leaked
    assert {"name": "pin pad", "fingerprint": bound} in api.get("/api/v1/native/clients").json()
    assert api.get("/api/v1/native/pair").json()["armed"] is False  # consumed
    assert api.delete(f"/api/v1/native/clients/{bound}").status_code == 204


def _wrong(pin: str, i: int) -> str:
    return f"{(int(pin) + 1 + i) % 10000:04d}"


def test_wrong_pin_burst_closes_the_window(live_host, api):
    """A burst of wrong PINs from several addresses and devices (as a guesser would send
    them, in parallel): exactly 5 are counted host-wide, the 5th closes the window, and from
    then on the right PIN is refused too, with the reason; the console's status says so."""
    from concurrent.futures import ThreadPoolExecutor

    pin = api.post("/api/v1/native/pair/arm", json={"ttl_secs": 300}).json()["pin"]
    knockers = [Knocker(live_host, source=f"127.0.0.{n}") for n in (4, 5, 6)]
    try:
        tries = [(knockers[i % 3], fake_fp(), _wrong(pin, i)) for i in range(12)]
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda t: t[0].knock(t[1], pin=t[2]), tries))
        assert [r.status_code for r in answers] == [403] * 12, [r.text for r in answers]
        errors = [r.json()["error"] for r in answers]
        assert sum("more wrong PIN" in e for e in errors) == 4, errors
        assert "wrong PIN (1 more wrong PIN closes the pairing window)" in errors, errors
        assert sum(e.startswith("wrong PIN; the pairing PIN was closed") for e in errors) == 1
        assert sum(e.startswith("the pairing PIN was closed after 5") for e in errors) == 7

        right = fake_fp()
        r = knockers[0].knock(right, pin=pin)
        assert r.status_code == 403, r.text
        assert r.json() == {
            "error": "the pairing PIN was closed after 5 wrong PINs; ask the operator to arm "
            "a new one"
        }
        status = api.get("/api/v1/native/pair").json()
        assert status["armed"] is False and status["pin"] is None
        assert status["closed_by_wrong_pins"] is True
        clients = {c["fingerprint"] for c in api.get("/api/v1/native/clients").json()}
        assert right not in clients and not clients & {fp for _k, fp, _p in tries}
        assert knockers[0].knock(right).status_code == 202  # the operator may still approve

        again = api.post("/api/v1/native/pair/arm", json={"ttl_secs": 60}).json()
        assert again["armed"] and again["closed_by_wrong_pins"] is False
        assert again["wrong_pins"] == 0
    finally:
        for k in knockers:
            k.close()
        api.delete("/api/v1/native/pair")


@pytest.mark.parametrize("bad", ["\u0661\u0662\u0663\u0664", "\u00e9123", "12\x0034", 1234, ["1"]])
def test_non_ascii_pin_is_a_400(knocker, api, bad):
    """A PIN is 4 ASCII digits: anything else is a JSON 400 (a non-ASCII one was a 500 from
    the digest compare), and it is not counted against the armed window."""
    api.post("/api/v1/native/pair/arm", json={"ttl_secs": 60})
    try:
        r = knocker.knock(fake_fp(), pin=bad)
        assert r.status_code == 400, r.text
        assert r.headers["Content-Type"] == "application/json"
        assert r.json()["error"].startswith("pin must be")
        status = api.get("/api/v1/native/pair").json()
        assert status["armed"] is True and status["wrong_pins"] == 0
    finally:
        api.delete("/api/v1/native/pair")


def test_bad_offers(knocker):
    fp = fake_fp()
    assert knocker.post(b"{not json").status_code == 400
    assert knocker.post({"sdp": "v=0", "width": 1280, "height": 720, "fps": 60}).status_code == 400
    body = {"sdp": "x", "width": 1280, "height": 720, "fps": 60}
    assert knocker.post(body).status_code == 400
    body = {"sdp": "v=0\r\nm=video 9 X 96\r\n", "width": 1280, "height": 720, "fps": 60}
    r = knocker.post(body)
    assert r.status_code == 400 and "fingerprint" in r.json()["error"]
    r = knocker.knock(fp, width=13)
    assert r.status_code == 400
    r = knocker.post({"sdp": "v=0\r\n" + "a=x\r\n" * 20000, "width": 1, "height": 1, "fps": 1})
    assert r.status_code == 413
    r = knocker.post(b"{}", **{"Content-Type": "text/plain"})
    assert r.status_code == 415
    no_csrf = knocker.c.post("/native/offer", json={}, headers={"Referer": "https://evil/"})
    assert no_csrf.status_code == 403
    assert no_csrf.headers["Content-Type"] == "application/json"
    assert "CSRF" in no_csrf.json()["error"]
    r = knocker.post({**_offer(fp), "app": "app:no-such-app"})
    assert r.status_code == 404 and "no app" in r.json()["error"]


def _offer(fp: str) -> dict:
    return {"sdp": offer_sdp(fp), "name": "x", "width": 1280, "height": 720, "fps": 60}


def test_offer_rate_limits(live_host, api):
    """Per device and per address, JSON 429 with Retry-After; other addresses unaffected.
    Each part comes from its own loopback address so the other tests' buckets stay empty."""
    from native.ratelimit import PER_DEVICE, PER_IP

    dev = Knocker(live_host, source="127.0.0.2")
    fp = fake_fp()
    codes = [dev.knock(fp).status_code for _ in range(2 * PER_DEVICE + 1)]
    assert set(codes) == {202, 429}, codes  # 41 offers: one window holds more than 20
    r = dev.knock(fp)
    if r.status_code == 429:
        assert "this device" in r.json()["error"] and int(r.headers["Retry-After"]) >= 1
    assert dev.knock(fake_fp()).status_code == 202  # another device from the same address
    dev.close()

    flood = Knocker(live_host, source="127.0.0.3")
    bad = [flood.post(b"{not json").status_code for _ in range(2 * PER_IP + 1)]
    assert set(bad) == {400, 429}, bad  # counted before any parsing
    r = flood.post(b"{not json")
    assert r.status_code in (400, 429)
    if r.status_code == 429:
        assert "this address" in r.json()["error"] and r.headers["Retry-After"]
    flood.close()
    home = Knocker(live_host)
    assert home.knock(fake_fp()).status_code == 202  # 127.0.0.1 is unaffected
    home.close()
