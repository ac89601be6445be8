"""A member's placement tickets and approvals, in process (real Redis, the test database), and
the handoff page through Django's test client. The real host: test_place_e2e.py."""

from __future__ import annotations

import time

import pytest
from django.core import signing
from django.test import Client

from common.errors import Invalid, NotFound
from fleet import tickets
from native import services
from pairing.models import PLANE_NATIVE, PairedClient

FP = "ab" * 32
OTHER_FP = "cd" * 32


@pytest.fixture
def member(redis_db, db, settings, tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    return redis_db


def vouch(app="desktop", name="Den TV", by="fleet-host"):
    return tickets.vouch({"app": app, "name": name, "by": by})


def test_a_ticket_is_kept_by_its_hash_only_and_used_once(member):
    answer = vouch()
    ticket = answer["ticket"]
    assert answer["expires_in_secs"] == tickets.TICKET_TTL_S
    assert tickets.TICKET_RE.fullmatch(ticket)
    keys = member.keys("*")
    assert keys and all(ticket.encode() not in k for k in keys)
    assert all(ticket.encode() not in (member.get(k) or b"") for k in keys)
    assert 0 < member.ttl(keys[0]) <= tickets.TICKET_TTL_S

    vouched, cookie = tickets.redeem(ticket)
    assert vouched == tickets.Vouched("desktop", "Den TV", "fleet-host")
    assert ticket not in cookie
    assert tickets.redeem(ticket) is None  # one use
    assert tickets.redeem(ticket[:-1] + ("A" if ticket[-1] != "A" else "B")) is None
    for junk in (None, "", "x" * 43 + "!", 7, "a" * 500):
        assert tickets.redeem(junk) is None


def test_an_expired_ticket_is_refused(member):
    ticket = vouch()["ticket"]
    (key,) = member.keys(tickets.TICKET_KEY + "*")
    member.pexpire(key, 1)
    time.sleep(0.05)
    assert tickets.redeem(ticket) is None


def test_the_ticket_body_is_checked(member):
    with pytest.raises(NotFound):
        vouch(app="app:nothing-here")
    for body in (
        [],
        {"name": "x"},
        {"app": "desktop"},
        {"app": "", "name": "x"},
        {"app": "x" * 201, "name": "x"},
        {"app": "desktop", "name": 3},
        {"app": "desktop", "name": "x", "by": ["x"]},
    ):
        with pytest.raises(Invalid):
            tickets.vouch(body)
    assert member.keys(tickets.TICKET_KEY + "*") == []
    # names are cleaned as every device name is; an absent `by` is said plainly
    vouched, _ = tickets.redeem(vouch(name="Den\u202e\x07 TV", by=None)["ticket"])
    assert (vouched.name, vouched.by) == ("Den TV", "the fleet host")


def test_the_approval_pairs_the_first_device_offering_that_app_once(member):
    _, cookie = tickets.redeem(vouch()["ticket"])
    assert tickets.peek(cookie).by == "fleet-host"
    # another app: nothing used, nothing paired
    assert services.vouched(cookie, FP, "app:other") is False
    assert not PairedClient.objects.exists()

    assert services.vouched(cookie, FP, "desktop") is True
    client = PairedClient.objects.get(fingerprint=FP)
    assert (client.name, client.plane, client.enabled) == ("Den TV", PLANE_NATIVE, True)
    assert services.vouched(cookie, FP, "desktop") is False  # used
    assert services.vouched(cookie, OTHER_FP, "desktop") is False
    assert tickets.peek(cookie) is None
    assert list(PairedClient.objects.values_list("fingerprint", flat=True)) == [FP]


def test_a_forged_altered_or_expired_cookie_is_ignored(member, monkeypatch):
    _, cookie = tickets.redeem(vouch()["ticket"])
    approval = signing.loads(cookie, salt=tickets.SALT)["id"]
    forged = signing.dumps({"id": approval, "app": "desktop"}, key="not-the-key", salt=tickets.SALT)
    altered = cookie[:-2] + ("AA" if cookie[-2:] != "AA" else "BB")
    unsalted = signing.dumps({"id": approval, "app": "desktop"})
    for bad in (forged, altered, unsalted, "", None, "x" * 600):
        assert services.vouched(bad, FP, "desktop") is False
        assert tickets.peek(bad) is None
    real_time = time.time
    monkeypatch.setattr(signing.time, "time", lambda: real_time() + tickets.APPROVAL_TTL_S + 5)
    assert services.vouched(cookie, FP, "desktop") is False  # the signature's age
    monkeypatch.undo()
    assert not PairedClient.objects.exists()
    assert services.vouched(cookie, FP, "desktop") is True


def test_a_vouch_never_changes_an_existing_record(member):
    PairedClient.objects.create(
        fingerprint=FP, cert_pem="", name="kept", plane=PLANE_NATIVE, enabled=False
    )
    _, cookie = tickets.redeem(vouch()["ticket"])
    assert services.vouched(cookie, FP, "desktop") is True  # used up
    client = PairedClient.objects.get(fingerprint=FP)
    assert (client.name, client.enabled) == ("kept", False)  # still the operator's decision


def test_handoff_page_sets_the_cookie_and_redirects_without_the_ticket(member):
    web = Client(enforce_csrf_checks=True)
    ticket = vouch()["ticket"]
    r = web.post("/play/fleet", {"ticket": ticket, "mode": "1920x1080", "fps": "30"}, secure=True)
    assert r.status_code == 303
    assert r["Location"] == "/play?app=desktop&mode=1920x1080&fps=30"
    morsel = r.cookies[tickets.COOKIE]
    assert morsel["secure"] and morsel["httponly"] and morsel["samesite"] == "Lax"
    assert int(morsel["max-age"]) == tickets.APPROVAL_TTL_S
    assert ticket not in morsel.value and ticket not in r["Location"]

    page = web.get("/play?app=desktop&mode=1920x1080&fps=30", secure=True)
    html = page.content.decode()
    assert (
        "by fleet-host." in html and "Placed on <strong>" in html and 'data-autostart="1"' in html
    )
    assert 'value="Den TV"' in html and "<option selected>1920x1080</option>" in html

    again = web.post("/play/fleet", {"ticket": ticket}, secure=True)
    assert again.status_code == 403 and tickets.COOKIE not in again.cookies
    assert web.post("/play/fleet", {}, secure=True).status_code == 403
    assert web.get("/play/fleet", {"ticket": ticket}, secure=True).status_code == 405
    plain = Client().get("/play", secure=True).content.decode()
    assert "Placed on" not in plain and "data-autostart" not in plain
