"""Management API (/api/v1) authentication, in process."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from hostmgmt.auth import tokens
from hostmgmt.auth.mgmt import plugin_denied

pytestmark = pytest.mark.django_db

ADMIN_TOKEN = "1" * 64
PLUGIN_TOKEN = "2" * 64


@pytest.fixture(autouse=True)
def token_env(monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN)
    tokens._cache.clear()


def get(path, auth=None):
    headers = {"HTTP_AUTHORIZATION": auth} if auth is not None else {}
    return Client().get(path, **headers)


def test_health_needs_no_token():
    r = get("/api/v1/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


@pytest.mark.parametrize(
    "auth",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {ADMIN_TOKEN}",
        f"Token {ADMIN_TOKEN}",
        f"Bearer {ADMIN_TOKEN[:-1]}",
        f"Bearer {ADMIN_TOKEN}0",
        f"Bearer {'3' * 64}",
        f"Bearer HOST_MGMT_TOKEN={ADMIN_TOKEN}",  # the token file's content pasted whole
        "Bearer \u00e9" + "1" * 63,
    ],
)
def test_bad_credentials_get_401_with_error_body(auth):
    r = get("/api/v1/host", auth)
    assert r.status_code == 401
    body = r.json()
    assert set(body) == {"error"}
    assert ADMIN_TOKEN not in r.content.decode()
    assert r["WWW-Authenticate"].startswith("Bearer")


def test_admin_and_plugin_tokens_read_host():
    assert get("/api/v1/host", f"Bearer {ADMIN_TOKEN}").status_code == 200
    assert get("/api/v1/host", f"bearer {PLUGIN_TOKEN}").status_code == 200


def test_unknown_route_is_401_without_token_and_404_with_it():
    assert get("/api/v1/no-such-route").status_code == 401
    r = get("/api/v1/no-such-route", f"Bearer {ADMIN_TOKEN}")
    assert r.status_code == 404
    assert r.json() == {"error": "not found"}


@override_settings(HOST_NO_MGMT_TOKEN=True)
def test_tokenless_host_answers_without_auth():
    assert get("/api/v1/host").status_code == 200


@pytest.mark.parametrize(
    "path, method, denied",
    [
        ("/api/v1/hooks", "GET", True),
        ("/api/v1/hooks", "PUT", True),
        ("/api/v1/store/catalog", "GET", True),
        ("/api/v1/update/status", "GET", True),
        ("/api/v1/pair/pin", "POST", True),
        ("/api/v1/native/pending/7/approve", "POST", True),
        ("/api/v1/clients/" + "a" * 64, "DELETE", True),
        ("/api/v1/clients", "GET", False),
        ("/api/v1/plugins/x/ui-credential", "GET", True),
        ("/api/v1/host/restart", "POST", True),
        ("/api/v1/library/custom/abc", "GET", True),
        ("/api/v1/library/custom/abc", "PUT", False),
        ("/api/v1/events", "GET", False),
        ("/api/v1/status", "GET", False),
        ("/api/v1/library", "GET", False),
        ("/api/v1/host", "GET", False),
    ],
)
def test_plugin_token_denied_routes(path, method, denied):
    assert plugin_denied(path, method) is denied
