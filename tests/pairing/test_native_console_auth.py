"""The `/api/v1/native` routes accept the web console's session instead of the management
token, with Django's CSRF check on writes (in process; the console page itself is covered by
tests/native/test_console.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from pairing.models import PLANE_NATIVE, PairedClient

pytestmark = pytest.mark.django_db

CSRF = "k" * 32  # Django accepts the unmasked secret as the header token


@pytest.fixture
def operator(mgmt_headers):  # mgmt_headers: the host has a management token
    user = get_user_model().objects.create_superuser("op", password="x")
    c = Client(enforce_csrf_checks=True)
    c.force_login(user)
    return c


def native(fp: str) -> PairedClient:
    return PairedClient.objects.create(fingerprint=fp, cert_pem="", name="tv", plane=PLANE_NATIVE)


def test_the_console_session_reads_without_the_token(operator):
    native("ab" * 32)
    r = operator.get("/api/v1/native/clients")
    assert r.status_code == 200 and r.json() == [{"name": "tv", "fingerprint": "ab" * 32}]
    assert r["Cache-Control"] == "no-store"


def test_no_session_no_token_is_a_401(mgmt_headers):
    r = Client().get("/api/v1/native/clients")
    assert r.status_code == 401 and r.json()["error"]
    assert r["WWW-Authenticate"].startswith("Bearer")


def test_a_session_that_is_not_the_operator_is_a_401(mgmt_headers):
    user = get_user_model().objects.create_user("guest", password="x")
    c = Client()
    c.force_login(user)
    assert c.get("/api/v1/native/clients").status_code == 401


def test_a_write_without_the_csrf_token_is_refused_and_changes_nothing(operator):
    native("ab" * 32)
    r = operator.delete(f"/api/v1/native/clients/{'ab' * 32}")
    assert r.status_code == 403 and r.json()["error"].startswith("CSRF check failed")
    assert PairedClient.objects.filter(fingerprint="ab" * 32).exists()


def test_a_write_with_the_csrf_token_passes(operator):
    native("ab" * 32)
    operator.cookies["csrftoken"] = CSRF
    r = operator.delete(f"/api/v1/native/clients/{'ab' * 32}", HTTP_X_CSRFTOKEN=CSRF)
    assert r.status_code == 204
    assert not PairedClient.objects.filter(fingerprint="ab" * 32).exists()
    r = operator.delete(f"/api/v1/native/clients/{'ab' * 32}", HTTP_X_CSRFTOKEN=CSRF)
    assert r.status_code == 404
    assert r.json() == {"error": "no paired native client with that fingerprint"}


def test_other_management_routes_still_need_the_token(operator):
    """Only the routes that opt in (`ConsoleMgmtAPIView`) take the session."""
    assert operator.get("/api/v1/clients").status_code == 401
