"""Paired-client routes of both APIs, PIN entry (API and /pin page), trusted subnets, import."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from pairing import crypto, services
from pairing.models import PairedClient, PinRequest
from tests.support.certs import identity, pem
from tests.support.events import emitted

pytestmark = pytest.mark.django_db


def paired(n=0, name="tv", enabled=True) -> PairedClient:
    client = services.store_client(identity(n)[1], name)
    if not enabled:
        services.set_enabled(client.uuid, False)
    return PairedClient.objects.get(pk=client.pk)


def post_json(c, path, body, headers):
    return c.post(path, json.dumps(body), content_type="application/json", **headers)


# -- management API ------------------------------------------------------------------------------
def test_v1_lists_paired_clients(mgmt_headers):
    client = paired(0, "Living room")
    r = Client().get("/api/v1/clients", **mgmt_headers)
    assert r.status_code == 200
    (rec,) = r.json()
    assert rec["fingerprint"] == client.fingerprint == crypto.fingerprint(identity(0)[1])
    assert rec["name"] == "Living room" and rec["enabled"] is True and rec["plane"] == "compat"
    assert rec["subject"] == "CN=NVIDIA GameStream Client 0"
    assert rec["not_after_unix"] > rec["not_before_unix"]
    assert isinstance(rec["paired_at_unix"], int) and rec["last_seen_unix"] is None
    assert "cert_pem" not in rec


def test_v1_needs_the_token(mgmt_headers):
    assert Client().get("/api/v1/clients").status_code == 401


def test_v1_delete_is_case_insensitive_and_idempotent_in_status(mgmt_headers):
    client = paired(0)
    c = Client()
    r = c.delete(f"/api/v1/clients/{client.fingerprint.upper()}", **mgmt_headers)
    assert r.status_code == 204 and r.content == b""
    assert not PairedClient.objects.exists()
    r = c.delete(f"/api/v1/clients/{client.fingerprint}", **mgmt_headers)
    assert r.status_code == 404 and r.json() == {"error": "no paired client with that fingerprint"}


@pytest.mark.parametrize("bad", ["abc", "g" * 64, "a" * 63, "a" * 65, "%00" + "a" * 61])
def test_v1_delete_refuses_malformed_fingerprints(mgmt_headers, bad):
    paired(0)
    r = Client().delete(f"/api/v1/clients/{bad}", **mgmt_headers)
    assert r.status_code == 400 and "error" in r.json()
    assert PairedClient.objects.count() == 1


# -- admin API -----------------------------------------------------------------------------------
def test_admin_list_shows_named_certs_without_pems(admin_headers):
    client = paired(0, "tv")
    r = Client().get("/api/clients/list", **admin_headers)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] is True
    assert body["named_certs"] == [
        {"name": "tv", "uuid": client.uuid, "enabled": True, "cert": client.fingerprint}
    ]
    assert "BEGIN CERTIFICATE" not in r.content.decode()


def test_admin_routes_need_credentials(db):
    assert Client().get("/api/clients/list").status_code == 401
    assert post_json(Client(), "/api/pin", {"pin": "1234"}, {}).status_code == 401


def test_admin_unpair_by_uuid(admin_headers):
    a, b = paired(0), paired(1)
    c = Client()
    r = post_json(c, "/api/clients/unpair", {"uuid": a.uuid.lower()}, admin_headers)
    assert r.status_code == 200 and r.json()["status"] is True
    assert list(PairedClient.objects.values_list("pk", flat=True)) == [b.pk]
    r = post_json(c, "/api/clients/unpair", {"uuid": a.uuid}, admin_headers)
    assert r.status_code == 200 and r.json()["status"] is False
    for bad in ({}, {"uuid": 5}, {"uuid": ""}, ["x"]):
        r = post_json(c, "/api/clients/unpair", bad, admin_headers)
        assert r.status_code == 400 and r.json()["status"] is False


def test_admin_unpair_all(admin_headers):
    paired(0), paired(1)
    r = Client().post("/api/clients/unpair-all", **admin_headers)
    assert r.status_code == 200 and r.json()["status"] is True
    assert not PairedClient.objects.exists()


def test_admin_update_disables_and_enables(admin_headers):
    client = paired(0)
    c = Client()
    r = post_json(c, "/api/clients/update", {"uuid": client.uuid, "enabled": False}, admin_headers)
    assert r.json()["status"] is True
    assert services.authorized(client.fingerprint) is None
    r = post_json(c, "/api/clients/update", {"uuid": client.uuid}, admin_headers)
    assert r.json()["status"] is True  # enabled defaults to true
    assert services.authorized(client.fingerprint) is not None
    r = post_json(c, "/api/clients/update", {"uuid": client.uuid, "enabled": "no"}, admin_headers)
    assert r.status_code == 400
    r = post_json(c, "/api/clients/update", {"uuid": "nope", "enabled": True}, admin_headers)
    assert r.status_code == 200 and r.json()["status"] is False


def test_admin_json_routes_require_json(admin_headers):
    r = Client().post("/api/pin", "pin=1234", content_type="text/plain", **admin_headers)
    assert r.status_code == 400


def waiting_request(salt=b"s" * 16, minutes=1) -> PinRequest:
    now = timezone.now()
    return PinRequest.objects.create(
        fingerprint="f" * 64,
        device_name="tv",
        remote_addr="10.0.0.5",
        salt_hex=salt.hex(),
        expires_at=now + dt.timedelta(minutes=minutes),
    )


def test_pin_claims_the_waiting_request_with_the_derived_key(admin_headers):
    req = waiting_request()
    r = post_json(Client(), "/api/pin", {"pin": "0042", "name": "Den\x00 TV\u202e"}, admin_headers)
    assert r.status_code == 200 and r.json()["status"] is True
    req.refresh_from_db()
    assert req.key_hex == crypto.derive_key(b"s" * 16, "0042").hex()
    assert req.client_name == "Den TV"
    assert "0042" not in json.dumps(list(PinRequest.objects.values()), default=str)
    # Nothing waits any more: a second PIN is refused.
    r = post_json(Client(), "/api/pin", {"pin": "0042"}, admin_headers)
    assert r.status_code == 200 and r.json()["status"] is False


def test_pin_ignores_expired_requests(admin_headers):
    waiting_request(minutes=-1)
    r = post_json(Client(), "/api/pin", {"pin": "1234"}, admin_headers)
    assert r.json()["status"] is False


@pytest.mark.parametrize("pin", ["12a4", "12345", "123", "", None, True, 10000, -1, "١٢٣٤", [1]])
def test_pin_must_be_four_digits(admin_headers, pin):
    req = waiting_request()
    r = post_json(Client(), "/api/pin", {"pin": pin, "name": "x"}, admin_headers)
    assert r.status_code == 400 and r.json()["status"] is False
    req.refresh_from_db()
    assert req.key_hex == ""


def test_pin_accepts_an_integer(admin_headers):
    req = waiting_request()
    assert post_json(Client(), "/api/pin", {"pin": 7}, admin_headers).json()["status"] is True
    req.refresh_from_db()
    assert req.key_hex == crypto.derive_key(b"s" * 16, "0007").hex()


# -- the /pin page -------------------------------------------------------------------------------
def test_pin_page_asks_for_credentials(db, clean_config):
    from access import credentials

    credentials.set_credentials("admin", "s3cret")
    r = Client().get("/pin")
    assert r.status_code == 401 and r["WWW-Authenticate"].startswith("Basic")


def test_pin_page_form_round_trip(admin_headers):
    c = Client(enforce_csrf_checks=True)
    r = c.get("/pin", **admin_headers)
    assert r.status_code == 200 and b'name="pin"' in r.content
    token = r.cookies["csrftoken"].value
    assert b"No device is waiting" in r.content
    r = c.post("/pin", {"pin": "1234", "csrfmiddlewaretoken": token}, **admin_headers)
    assert r.status_code == 409 and b"No device is waiting for a PIN" in r.content
    waiting_request()
    r = c.get("/pin", **admin_headers)
    assert b"tv from 10.0.0.5" in r.content
    r = c.post("/pin", {"pin": "12x4", "csrfmiddlewaretoken": token}, **admin_headers)
    assert r.status_code == 400 and b"must be 4 digits" in r.content
    r = c.post("/pin", {"pin": "1234", "name": "tv", "csrfmiddlewaretoken": token}, **admin_headers)
    assert r.status_code == 200 and b"PIN accepted" in r.content
    r = c.post("/pin", {"pin": "1234"}, **admin_headers)
    assert r.status_code == 403  # no CSRF token


# -- trusted subnets, names, events --------------------------------------------------------------
def test_trusted_subnets_parse_every_form_and_match_v4_and_v6(clean_config):
    from hostconfig import store

    store.write({"trusted_subnets": "[10.0.0.0/24, fd00::/64, junk]"})
    assert not services.in_trusted_subnet("10.0.0.7")  # the switch is off
    store.write({"trusted_subnet_auto_pairing": "enabled"})
    assert services.in_trusted_subnet("10.0.0.7")
    assert services.in_trusted_subnet("::ffff:10.0.0.7")
    assert services.in_trusted_subnet("fd00::1")
    assert not services.in_trusted_subnet("10.0.1.7")
    assert not services.in_trusted_subnet("not an ip")
    store.write({"trusted_subnets": "192.168.1.0/24,127.0.0.1/32"})
    assert services.in_trusted_subnet("127.0.0.1") and not services.in_trusted_subnet("10.0.0.7")


def test_names_are_sanitized():
    from common.names import sanitize_name

    assert sanitize_name("  Den\tTV\x1b[31m \u202eevil ") == "Den TV[31m evil"
    assert len(sanitize_name("é" * 100).encode()) <= 64
    assert sanitize_name("\x00\x01", fallback_seed="abc").startswith("device ")


def test_pairing_events_carry_the_device_ref(django_capture_on_commit_callbacks, redis_db):
    with django_capture_on_commit_callbacks(execute=True):
        services.emit_device("pairing.completed", "tv", "f" * 64)
        assert emitted() == []  # inside the transaction: nothing goes out before the commit
    (event,) = emitted("pairing.completed")
    assert event["device"] == {"name": "tv", "fingerprint": "f" * 64, "plane": "compat"}


def test_repairing_a_known_certificate_keeps_its_uuid_and_enables_it():
    first = paired(0, "old", enabled=False)
    again = services.store_client(identity(0)[1], "new")
    assert again.uuid == first.uuid and again.enabled and again.name == "new"
    assert PairedClient.objects.count() == 1


# -- Sunshine state import -----------------------------------------------------------------------
def test_import_sunshine_state(tmp_path, capsys):
    existing = paired(2)
    state = {
        "root": {
            "uniqueid": "X",
            "named_devices": [
                {
                    "name": "Deck",
                    "cert": pem(identity(0)[1]).decode(),
                    "uuid": "8f1c2d3e-0000-4000-8000-000000000001",
                    "enabled": True,
                },
                {"name": "Off", "cert": pem(identity(1)[1]).decode(), "enabled": False},
                {"name": "Known", "cert": existing.cert_pem, "uuid": "x"},
                {"name": "Broken", "cert": "-----BEGIN CERTIFICATE-----\nxx\n"},
            ],
            "devices": [{"name": "Legacy", "certs": [pem(identity(3)[1]).decode()]}],
        },
        "username": "u",
    }
    path = tmp_path / "sunshine_state.json"
    path.write_text(json.dumps(state))
    call_command("import_sunshine_state", str(path), "--dry-run")
    assert PairedClient.objects.count() == 1
    call_command("import_sunshine_state", str(path))
    out = capsys.readouterr()
    assert "imported 3 client(s); 1 already paired; 1 unreadable" in out.out
    deck = PairedClient.objects.get(name="Deck")
    assert deck.uuid == "8F1C2D3E-0000-4000-8000-000000000001"
    assert deck.fingerprint == crypto.fingerprint(identity(0)[1])
    assert PairedClient.objects.get(name="Off").enabled is False
    assert PairedClient.objects.filter(name="Legacy").exists()


def test_import_refuses_files_that_are_not_state_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(CommandError, match="root"):
        call_command("import_sunshine_state", str(bad))
    bad.write_text("{nope")
    with pytest.raises(CommandError, match="JSON"):
        call_command("import_sunshine_state", str(bad))
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_sunshine_state", str(tmp_path / "missing.json"))


def test_django_admin_lists_paired_clients(admin_headers):
    from access import credentials

    client = paired(0, "Admin-visible")
    c = Client()
    c.force_login(credentials.admin_user())
    r = c.get("/admin/pairing/pairedclient/")
    assert r.status_code == 200 and b"Admin-visible" in r.content
    r = c.get(f"/admin/pairing/pairedclient/{client.pk}/change/")
    assert r.status_code == 200 and client.fingerprint.encode() in r.content


def test_runtime_counts_feed_the_status_snapshot():
    assert services.runtime_counts() == {
        "paired_clients": 0,
        "native_paired_clients": 0,
        "pin_pending": False,
    }
    paired(0)
    waiting_request()
    counts = services.runtime_counts()
    assert counts["paired_clients"] == 1 and counts["pin_pending"] is True
